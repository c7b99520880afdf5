"""Consensus and labeler-quality statistics for a project's lead (issue 4).

Every number comes from ``metrics.agreement``; this package only loads labels,
arranges them as arrays and makes the results JSON-safe (``None`` plus a reason
instead of ``NaN``; "too little data" instead of a misleading value). The plots
of the dashboard are drawn from its dict by ``labeling.plots``.

How the phase dashboard stays fast (100,000 images x 4 labels):

* one query per phase pulls the labels as columns, turned into NumPy arrays and
  pivoted to an images x labelers matrix with ``np.unique`` (``loading``);
  everything after that is vectorised (``consensus_table``, the count-matrix
  alpha and its pattern bootstrap, bincounts; ``summary``, ``labelers``); from
  ``numbers.DELTA_MIN_UNITS`` images (or people) on, alpha's and the kappas' intervals
  are the delta method's (``metrics.agreement.asymptotic``: cluster-robust, no
  resampling), which cover as the bootstrap does there and agree with it;
* the result is cached in Django's cache under (phase id, version), where the
  version is the phase's latest ``updated_at`` and a count of deleted labels
  (``caching``). A new, changed or deleted label changes the version, so a stale
  summary is never served as fresh.

Repeated calibration-2 labels (``is_repeat``) never enter between-labeler
statistics; they are used for test-retest only.

Modules: ``numbers`` (thresholds, JSON-safe numbers), ``loading``, ``summary``
(one phase), ``labelers`` (per labeler, test-retest, drift), ``caching``,
``dashboard`` (the whole project), ``table`` (the per-image page). Callers import
the names below from ``labeling.services.consensus``.
"""

from .caching import (
    CACHE_PREFIX,
    CACHE_TIMEOUT,
    label_deleted_count,
    phase_refresh_unlock,
    phase_summary,
    phase_summary_refresh,
    phase_versions,
)
from .dashboard import project_consensus
from .labelers import labeler_drift, test_retest_compute
from .loading import PhaseLabels, phase_labels_load, value_categories
from .numbers import (
    COEFFICIENT_MIN_UNITS,
    CONFIDENCE,
    MAX_COEFFICIENT_WIDTH,
    MAX_INTERVAL_WIDTH,
    MIN_IMAGES,
    N_RESAMPLES,
    UNDER_REPRESENTED,
    WIDE_RANGE,
    ZERO_WIDTH_MIN_IMAGES,
    coefficient_stat,
    share_stat,
    too_little,
    wilson_share,
)
from .summary import phase_summary_compute
from .table import BOOLEAN_FILTERS, IMAGE_COLUMNS, SORTABLE, consensus_images, image_rows

__all__ = [
    "BOOLEAN_FILTERS",
    "CACHE_PREFIX",
    "CACHE_TIMEOUT",
    "CONFIDENCE",
    "IMAGE_COLUMNS",
    "MAX_COEFFICIENT_WIDTH",
    "ZERO_WIDTH_MIN_IMAGES",
    "COEFFICIENT_MIN_UNITS",
    "MAX_INTERVAL_WIDTH",
    "MIN_IMAGES",
    "N_RESAMPLES",
    "SORTABLE",
    "UNDER_REPRESENTED",
    "WIDE_RANGE",
    "PhaseLabels",
    "coefficient_stat",
    "consensus_images",
    "image_rows",
    "label_deleted_count",
    "labeler_drift",
    "phase_labels_load",
    "phase_refresh_unlock",
    "phase_summary",
    "phase_summary_compute",
    "phase_summary_refresh",
    "phase_versions",
    "project_consensus",
    "share_stat",
    "test_retest_compute",
    "too_little",
    "value_categories",
    "wilson_share",
]
