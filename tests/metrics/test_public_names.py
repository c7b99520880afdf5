"""Every public name of ``metrics`` and ``labeling.colorimetry`` stays importable from its path.

Recorded before ``metrics.agreement`` became a package and the colorimetry code
moved to ``colorimetry/`` (issue 9): the module-level names not starting with an
underscore, plus each module's ``__all__``. Names may be added; removing one, or
moving it away from its path, breaks callers, so these lists are frozen.
``metrics._dbscan`` is private but imported by callers and tests.
"""

import importlib

import pytest

PUBLIC_NAMES = {
    "metrics": [],
    "metrics.__main__": ["main"],
    "metrics._dbscan": ["NeighbourIndex", "dbscan_labels_many", "squared_distances"],
    "metrics.agreement": [
        "ALPHA_RELIABLE",
        "ALPHA_TENTATIVE",
        "AlphaBootstrap",
        "ImageConsensus",
        "LevelOfMeasurement",
        "Selection",
        "TestRetestResult",
        "alpha_from_counts",
        "alpha_leave_one_out",
        "bootstrap_alpha",
        "cohen_kappa_weighted",
        "consensus_table",
        "fleiss_kappa",
        "image_consensus",
        "interpret_alpha",
        "k_of_n_agreement",
        "kappa_matrix",
        "krippendorff_alpha",
        "labeler_bias",
        "percent_exact",
        "percent_within_one",
        "selection_values",
        "selections_to_arrays",
        "test_retest",
        "unique_values_distribution",
        "value_counts",
    ],
    "metrics.dataset_bias": ["intraclass_disparity", "nmi", "npmi", "nsd", "overall_disparity"],
    "metrics.discrepancy": [
        "CleamEstimate",
        "METRICS",
        "Metric",
        "cleam_correct",
        "fairness_discrepancy",
        "max_discrepancy",
    ],
    "metrics.embedding": [
        "EmbeddingFairness",
        "SubgroupScores",
        "alignment",
        "cluster_nmi",
        "embedding_fairness",
        "recall_at_k",
        "uniformity",
    ],
    "metrics.groups": [
        "BUILTIN_METRICS",
        "CountMetric",
        "EMPTY_GROUP",
        "Method",
        "MetricFrame",
        "MetricValue",
        "SmallGroupWarning",
        "accuracy",
        "false_positive_rate",
        "mean_absolute_error",
        "mean_error",
        "precision",
        "recall",
        "selection_rate",
    ],
    "metrics.report": ["ReportInputError", "ReportOptions", "build_report", "load_table", "write_report"],
    "metrics.unfairness": [
        "CategoricalUnfairness",
        "ContinuousUnfairness",
        "DEFAULT_EPS_EXPONENTS",
        "EpsClusters",
        "IntersectionalUnfairness",
        "PairUnfairness",
        "Severity",
        "categorical_unfairness",
        "continuous_unfairness",
        "intersectional_unfairness",
        "severity",
        "standardise",
    ],
    "labeling.colorimetry": [
        "ALGORITHM_VERSION",
        "DEFAULT_MAX_PIXELS",
        "FITZPATRICK_ITA_CHARDON_CLASSES",
        "FITZPATRICK_ITA_KINYANJUI_2020",
        "FitzpatrickMapping",
        "ITA_CLASSES",
        "ImageDecodeError",
        "MaskSizeError",
        "classify_ita",
        "detect_skin",
        "fitzpatrick_from_ita",
        "ita_degrees",
        "measure_image",
        "skin_tone_stats",
        "srgb_to_lab",
    ],
}

ALL_BEFORE = {
    "metrics.agreement": [
        "AlphaBootstrap",
        "ImageConsensus",
        "LevelOfMeasurement",
        "TestRetestResult",
        "alpha_from_counts",
        "alpha_leave_one_out",
        "bootstrap_alpha",
        "cohen_kappa_weighted",
        "consensus_table",
        "fleiss_kappa",
        "image_consensus",
        "interpret_alpha",
        "k_of_n_agreement",
        "kappa_matrix",
        "krippendorff_alpha",
        "labeler_bias",
        "percent_exact",
        "percent_within_one",
        "selection_values",
        "selections_to_arrays",
        "test_retest",
        "unique_values_distribution",
        "value_counts",
    ],
    "metrics.dataset_bias": ["intraclass_disparity", "nmi", "npmi", "nsd", "overall_disparity"],
    "metrics.discrepancy": ["CleamEstimate", "METRICS", "cleam_correct", "fairness_discrepancy", "max_discrepancy"],
    "metrics.embedding": [
        "EmbeddingFairness",
        "SubgroupScores",
        "alignment",
        "cluster_nmi",
        "embedding_fairness",
        "recall_at_k",
        "uniformity",
    ],
    "metrics.groups": [
        "BUILTIN_METRICS",
        "CountMetric",
        "MetricFrame",
        "MetricValue",
        "SmallGroupWarning",
        "accuracy",
        "false_positive_rate",
        "mean_absolute_error",
        "mean_error",
        "precision",
        "recall",
        "selection_rate",
    ],
    "metrics.report": ["ReportInputError", "ReportOptions", "build_report", "load_table", "write_report"],
    "metrics.unfairness": [
        "CategoricalUnfairness",
        "ContinuousUnfairness",
        "DEFAULT_EPS_EXPONENTS",
        "EpsClusters",
        "IntersectionalUnfairness",
        "PairUnfairness",
        "Severity",
        "categorical_unfairness",
        "continuous_unfairness",
        "intersectional_unfairness",
        "severity",
        "standardise",
    ],
    "labeling.colorimetry": [
        "ALGORITHM_VERSION",
        "DEFAULT_MAX_PIXELS",
        "FITZPATRICK_ITA_CHARDON_CLASSES",
        "FITZPATRICK_ITA_KINYANJUI_2020",
        "FitzpatrickMapping",
        "ITA_CLASSES",
        "ImageDecodeError",
        "MaskSizeError",
        "classify_ita",
        "detect_skin",
        "fitzpatrick_from_ita",
        "ita_degrees",
        "measure_image",
        "skin_tone_stats",
        "srgb_to_lab",
    ],
}

CASES = [(module, name) for module, names in PUBLIC_NAMES.items() for name in names]


@pytest.mark.parametrize(("module", "name"), CASES, ids=[f"{m}.{n}" for m, n in CASES])
def test_public_name_is_importable_from_its_path(module, name):
    namespace: dict = {}
    exec(f"from {module} import {name}", namespace)  # the form callers use
    assert namespace[name] is getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("module", sorted(ALL_BEFORE))
def test_all_still_lists_its_names(module):
    assert set(ALL_BEFORE[module]) <= set(importlib.import_module(module).__all__)
