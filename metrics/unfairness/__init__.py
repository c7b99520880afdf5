"""The four unfairness scores of seed 000 [Seed000] on a per-sample model error.

The error is one number per sample where larger is worse (e.g. the mean deviation
between predicted and true silhouette boundaries, in mm). Seed 000 defines:

* **categorical** (gender): two-sample Kolmogorov-Smirnov test; if significant, the
  score is the difference of the group means;
* **continuous** (body shape, skin tone): least-squares line of error on the attribute,
  t-test on the slope; if significant, the score is the fitted error difference between
  the 5th and 95th percentile of the attribute;
* **intersectional**: standardise the attributes, run DBSCAN for
  ``eps = 10**-1.5, 10**-1.49, ..., 10**0``; a cluster of at least 10 points of which at
  least 70% have error >= 1.7 is underperforming; the score is the number of samples (images;
  seed 000 calls them customers) in such clusters;
* **severity**: each score is judged against an error threshold (2 mm in the seed).

What the report's verdicts rest on (issue 20, so that they hold on real study designs):
``robust`` (wild cluster bootstrap max-t over contrasts of group means, the CR2 slope, whole-cluster
permutations, the design effect), ``disparity`` (group means, pairwise gaps, the largest gap's
interval, performance and power per group), ``severity`` (the one rule that reads a level from an
interval), ``verdict`` (disparity verdicts), ``grid`` (intersectional cells, max-t). Seed 000's tests
stay as its reproduction.

Beyond the seed (issue 11, so that the verdict cannot call a real disparity negligible):
``bands`` gives the mean error per band of a continuous attribute with intervals and the
largest band gap (tested, with a simultaneous interval and a direction); ``verdict``
reads the slope test and the bands together; the categorical test is Holm-corrected over
pairs; the intersectional score gets a permutation null, its regions and their
consistency over ``eps``; ``uncertainty`` re-scores skin tone with tones drawn within the
labelers' range and per labeler.

Every score is computed even when it is not significant (``significant`` says whether
it should be acted upon), so that reports can show the effect size either way.

Layout
------
Import from ``metrics.unfairness`` (the names in ``__all__``); one module per
score: ``categorical``, ``continuous``, ``intersectional`` (the DBSCAN ensemble;
the clustering itself is ``metrics._dbscan``) and ``severity``; ``_checks``
validates the inputs they share.
"""

from .bands import AttributeBand, BandUnfairness, attribute_bands, band_unfairness, testable_band_count, tone_band_count
from .categorical import CategoricalUnfairness, PairUnfairness, categorical_unfairness, group_disparity
from .continuous import ContinuousUnfairness, continuous_unfairness
from .disparity import GroupReading, PairGap, PairwiseDisparity, pairwise_disparity, performance_reading
from .grid import GridCell, GridUnfairness, grid_unfairness
from .intersectional import (
    DEFAULT_EPS_EXPONENTS,
    ClusterFinding,
    EpsClusters,
    IntersectionalUnfairness,
    describe_finding,
    intersectional_unfairness,
    min_samples_sweep,
    standardise,
)
from .robust import (
    ContrastTest,
    GroupMean,
    RobustSlope,
    cluster_codes,
    cluster_permutations,
    contrast_max_t,
    design_effect,
    mean_interval,
    robust_slope,
)
from .severity import DISPARITY_RULE, Disparity, Severity, disparity_level, severity
from .uncertainty import LabelUncertainty, label_uncertainty
from .verdict import LEVELS, ContinuousVerdict, Verdict, categorical_verdict, continuous_verdict, holm

__all__ = [
    "DEFAULT_EPS_EXPONENTS",
    "DISPARITY_RULE",
    "LEVELS",
    "ContrastTest",
    "Disparity",
    "GridCell",
    "GridUnfairness",
    "GroupMean",
    "GroupReading",
    "PairGap",
    "PairwiseDisparity",
    "RobustSlope",
    "Verdict",
    "categorical_verdict",
    "cluster_codes",
    "cluster_permutations",
    "contrast_max_t",
    "design_effect",
    "disparity_level",
    "grid_unfairness",
    "mean_interval",
    "group_disparity",
    "pairwise_disparity",
    "performance_reading",
    "robust_slope",
    "AttributeBand",
    "BandUnfairness",
    "CategoricalUnfairness",
    "ClusterFinding",
    "ContinuousUnfairness",
    "ContinuousVerdict",
    "EpsClusters",
    "IntersectionalUnfairness",
    "LabelUncertainty",
    "PairUnfairness",
    "Severity",
    "attribute_bands",
    "band_unfairness",
    "categorical_unfairness",
    "continuous_unfairness",
    "continuous_verdict",
    "describe_finding",
    "holm",
    "intersectional_unfairness",
    "label_uncertainty",
    "min_samples_sweep",
    "severity",
    "standardise",
    "testable_band_count",
    "tone_band_count",
]
