"""How the services start background work: by task NAME, never by importing ``labeling.tasks``.

``labeling.tasks`` registers one Celery task under each name below and imports the
services it calls; the services only name the task here, so no import runs the other
way (no cycle between the tasks and the services; enforced by import-linter, see
``pyproject.toml``). The tasks module is imported when the app starts
(``LabelingConfig.ready``), so the names resolve in every process: in the web process
with no broker (``CELERY_TASK_ALWAYS_EAGER``: the task runs in-process at once) as well
as in the worker (Celery's autodiscovery imports ``labeling.tasks`` there too).

The names are those Celery derives from the task functions (``<module>.<function>``),
given explicitly so that renaming a function never changes what is sent to a worker.
"""

from __future__ import annotations

from celery import current_app
from django.db import transaction

IMAGE_MAKE_DERIVATIVES = "labeling.tasks.image_make_derivatives_task"
IMAGE_COMPUTE_BASELINE = "labeling.tasks.image_compute_baseline_task"
BASELINE_RUN = "labeling.tasks.baseline_run_task"
BASELINE_BATCH = "labeling.tasks.baseline_batch_task"
CONSENSUS_REFRESH = "labeling.tasks.consensus_refresh_task"
RELEASE_BUILD = "labeling.tasks.release_build_task"
EVALUATION_RUN = "labeling.tasks.evaluation_run_task"

#: Every task name; ``labeling.tasks`` registers exactly these (a test checks it).
TASK_NAMES = (
    IMAGE_MAKE_DERIVATIVES,
    IMAGE_COMPUTE_BASELINE,
    BASELINE_RUN,
    BASELINE_BATCH,
    CONSENSUS_REFRESH,
    RELEASE_BUILD,
    EVALUATION_RUN,
)


def enqueue(task_name: str, *args) -> None:
    """Send the task ``task_name`` with ``args`` now (run it now when there is no broker).

    Uses the task object from the registry rather than ``send_task``: ``send_task``
    ignores ``task_always_eager``, ``Task.delay`` honours it.

    Raises
    ------
    celery.exceptions.NotRegistered
        ``labeling.tasks`` was never imported (it is, in ``LabelingConfig.ready``).
    """
    current_app.tasks[task_name].delay(*args)


def enqueue_on_commit(task_name: str, *args) -> None:
    """Send the task once the current transaction commits (at once outside one).

    Never send inside an open transaction: the worker could otherwise look for
    rows that are not committed yet.
    """
    transaction.on_commit(lambda: enqueue(task_name, *args))
