"""Inter-labeler agreement statistics for ordinal skin-tone labels.

Pure NumPy/SciPy/pandas; this package never imports Django.

Conventions
-----------
* ``reliability_data`` is a *labelers x items* array with ``NaN`` for a missing
  label, the convention of the ``krippendorff`` package on PyPI.
* A label is a number: the tone number, or the midpoint of two adjacent tones
  (a labeler who picked tones 3 and 4 gives 3.5).
* Functions return ``NaN`` (or a result object whose ``n`` is 0 or small) when
  there is too little data, so that the UI can say "too little data"; they do
  not raise on degenerate input and do not leak NumPy warnings.

Krippendorff's alpha is computed from an *items x values* count matrix (how many
labelers gave each value to each item), which one database aggregate can
supply, via the coincidence matrix (Krippendorff 2011 [Krippendorff2011], "Computing
Krippendorff's Alpha-Reliability"). Results agree with the ``krippendorff``
package to about 1e-12.

Layout
------
Import from ``metrics.agreement`` (the names in ``__all__``); the modules are
the implementation, one family each:

* ``krippendorff``: ``krippendorff_alpha``, ``alpha_from_counts``,
  ``value_counts``, ``alpha_leave_one_out``, ``interpret_alpha``;
* ``bootstrap``: ``bootstrap_alpha`` (BCa item-bootstrap interval of alpha; ``bootstrap_alpha_levels``
  for several levels from one draw),
  ``bootstrap_cohen_kappa``, ``bootstrap_fleiss_kappa``, ``kappa_matrix_intervals`` (the same for the
  kappas), ``CoefficientInterval``;
* ``kappa``: ``percent_exact``, ``percent_within_one``, ``fleiss_kappa``,
  ``cohen_kappa_weighted``, ``kappa_matrix``;
* ``distributions``: ``k_of_n_agreement``, ``unique_values_distribution``;
* ``labelers``: ``test_retest``, ``labeler_bias``, ``bias_change`` (between two phases, with an
  interval), ``outlier_labels``;
* ``clustered``: ``clustered_proportion`` (a pooled share over pairs or labels with an interval
  that respects the clustering by image), ``pairwise_agreement_counts``,
  ``pairwise_agreement_interval``, ``cluster_bootstrap_proportion``;
* ``bands``: ``agreement_by_band`` (near consensus, each labeler's signed bias and alpha per tone
  band of the scale, with intervals), ``agreement_by_band_long``, ``tone_band_edges``;
* ``consensus``: ``image_consensus``, ``consensus_table``,
  ``selections_to_arrays``, ``selection_values``;
* ``asymptotic``: delta-method (linearised, cluster-robust) intervals of alpha and the kappas for many
  units, and the functions that choose them over the bootstrap from ``ASYMPTOTIC_MIN_UNITS`` units on;
* ``_data`` (private): reliability data -> value codes -> count matrix.
"""

from ._data import LevelOfMeasurement
from .asymptotic import (
    ASYMPTOTIC_MIN_UNITS,
    DELTA_METHOD,
    DeltaInterval,
    alpha_intervals,
    cohen_kappa_interval,
    delta_alpha_levels,
    delta_cohen_kappa,
    delta_fleiss_kappa,
    fleiss_kappa_interval,
    interval_q,
    kappa_matrix_intervals_by_size,
)
from .bands import (
    RANGE_RESTRICTION_NOTE,
    BandAgreement,
    BandShare,
    LabelerBandBias,
    ToneBandAgreement,
    agreement_by_band,
    agreement_by_band_long,
    default_band_width,
    tone_band_edges,
)
from .bootstrap import (
    AlphaBootstrap,
    CoefficientInterval,
    bootstrap_alpha,
    bootstrap_alpha_levels,
    bootstrap_cohen_kappa,
    bootstrap_fleiss_kappa,
    kappa_matrix_intervals,
)
from .clustered import (
    ClusteredProportion,
    cluster_bootstrap_proportion,
    clustered_proportion,
    pairwise_agreement_counts,
    pairwise_agreement_interval,
)
from .consensus import (
    ImageConsensus,
    Selection,
    consensus_table,
    image_consensus,
    selection_values,
    selections_to_arrays,
)
from .distributions import k_of_n_agreement, unique_values_distribution
from .kappa import cohen_kappa_weighted, fleiss_kappa, kappa_matrix, percent_exact, percent_within_one
from .krippendorff import (
    ALPHA_INTERVAL_READINGS,
    ALPHA_RELIABLE,
    ALPHA_TENTATIVE,
    alpha_from_counts,
    alpha_leave_one_out,
    alpha_q,
    interpret_alpha,
    krippendorff_alpha,
    read_alpha_interval,
    value_counts,
    value_counts_without_each,
)
from .labelers import OUTLIER_DISTANCE, TestRetestResult, bias_change, labeler_bias, outlier_labels, test_retest

__all__ = [
    "ASYMPTOTIC_MIN_UNITS",
    "DELTA_METHOD",
    "DeltaInterval",
    "alpha_intervals",
    "cohen_kappa_interval",
    "delta_alpha_levels",
    "delta_cohen_kappa",
    "delta_fleiss_kappa",
    "fleiss_kappa_interval",
    "interval_q",
    "kappa_matrix_intervals_by_size",
    "ALPHA_INTERVAL_READINGS",
    "ALPHA_RELIABLE",
    "ALPHA_TENTATIVE",
    "OUTLIER_DISTANCE",
    "RANGE_RESTRICTION_NOTE",
    "AlphaBootstrap",
    "BandAgreement",
    "BandShare",
    "LabelerBandBias",
    "ToneBandAgreement",
    "agreement_by_band",
    "agreement_by_band_long",
    "default_band_width",
    "tone_band_edges",
    "ClusteredProportion",
    "CoefficientInterval",
    "ImageConsensus",
    "LevelOfMeasurement",
    "Selection",
    "TestRetestResult",
    "alpha_from_counts",
    "alpha_leave_one_out",
    "bootstrap_alpha",
    "bootstrap_alpha_levels",
    "bootstrap_cohen_kappa",
    "bootstrap_fleiss_kappa",
    "cluster_bootstrap_proportion",
    "clustered_proportion",
    "cohen_kappa_weighted",
    "consensus_table",
    "fleiss_kappa",
    "image_consensus",
    "alpha_q",
    "interpret_alpha",
    "read_alpha_interval",
    "k_of_n_agreement",
    "kappa_matrix",
    "kappa_matrix_intervals",
    "krippendorff_alpha",
    "labeler_bias",
    "bias_change",
    "outlier_labels",
    "pairwise_agreement_counts",
    "pairwise_agreement_interval",
    "percent_exact",
    "percent_within_one",
    "selection_values",
    "selections_to_arrays",
    "test_retest",
    "unique_values_distribution",
    "value_counts",
    "value_counts_without_each",
]
