"""Evaluation runs: a model's per-sample results joined with a release and scored by ``metrics``.

Modules: ``joining`` (reading a results file, matching it with the release's images; no Django),
``runs`` (validation, creation, the background report, files, worst images), ``compare`` (two runs side
by side with a paired test, a model's history, CI gates). Callers import from ``labeling.services.evaluations``.
"""

from .compare import evaluation_compare, gate_create, gate_delete, gate_rules_clean, gates_check, model_history
from .joining import AUTO_ID_COLUMNS, MATCH_COLUMNS, JoinSpec
from .runs import (
    DEFAULT_OPTIONS,
    EVALUATION_TASK_SOFT_TIME_LIMIT,
    EVALUATION_TASK_TIME_LIMIT,
    MAX_RESULTS_BYTES,
    evaluation_create,
    evaluation_dir,
    evaluation_fail,
    evaluation_file_name,
    evaluation_file_path,
    evaluation_prefix,
    evaluation_run,
    release_attributes,
    worst_images,
)

__all__ = [
    "AUTO_ID_COLUMNS",
    "DEFAULT_OPTIONS",
    "EVALUATION_TASK_SOFT_TIME_LIMIT",
    "EVALUATION_TASK_TIME_LIMIT",
    "MATCH_COLUMNS",
    "MAX_RESULTS_BYTES",
    "JoinSpec",
    "evaluation_compare",
    "evaluation_create",
    "evaluation_dir",
    "evaluation_fail",
    "evaluation_file_name",
    "evaluation_file_path",
    "evaluation_prefix",
    "evaluation_run",
    "gate_create",
    "gate_delete",
    "gate_rules_clean",
    "gates_check",
    "model_history",
    "release_attributes",
    "worst_images",
]
