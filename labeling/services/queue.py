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

import logging

from celery import current_app
from django.db import transaction
from kombu.exceptions import OperationalError as BrokerOperationalError
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

#: What sending a task raises when the broker is down or unreachable (kombu wraps most of it).
BROKER_ERRORS = (BrokerOperationalError, RedisError, ConnectionError, TimeoutError)

IMAGE_MAKE_DERIVATIVES = "labeling.tasks.image_make_derivatives_task"
IMAGE_COMPUTE_BASELINE = "labeling.tasks.image_compute_baseline_task"
BASELINE_RUN = "labeling.tasks.baseline_run_task"
BASELINE_BATCH = "labeling.tasks.baseline_batch_task"
CONSENSUS_REFRESH = "labeling.tasks.consensus_refresh_task"
RELEASE_BUILD = "labeling.tasks.release_build_task"
EVALUATION_RUN = "labeling.tasks.evaluation_run_task"
JOBS_SWEEP = "labeling.tasks.jobs_sweep_task"
PROJECT_PRECOMPUTE = "labeling.tasks.project_precompute_task"

#: Every task name; ``labeling.tasks`` registers exactly these (a test checks it).
TASK_NAMES = (
    IMAGE_MAKE_DERIVATIVES,
    IMAGE_COMPUTE_BASELINE,
    BASELINE_RUN,
    BASELINE_BATCH,
    CONSENSUS_REFRESH,
    RELEASE_BUILD,
    EVALUATION_RUN,
    JOBS_SWEEP,
    PROJECT_PRECOMPUTE,
)


def _send(task_name: str, args, countdown: float | None = None) -> None:
    if countdown:
        current_app.tasks[task_name].apply_async(args=list(args), countdown=countdown)
    else:
        current_app.tasks[task_name].delay(*args)


def enqueue(task_name: str, *args, countdown: float | None = None) -> None:
    """Send the task ``task_name`` with ``args`` now, or to run ``countdown`` seconds from now (run it now
    when there is no broker).

    Uses the task object from the registry rather than ``send_task``: ``send_task``
    ignores ``task_always_eager``, ``Task.delay`` honours it.

    When the broker cannot be reached the task is not lost and the caller gets no error:
    it is recorded as a ``PendingTask`` and sent, in order, by :func:`pending_tasks_send`
    (after the next task that could be sent, and by the periodic sweeper).

    Raises
    ------
    celery.exceptions.NotRegistered
        ``labeling.tasks`` was never imported (it is, in ``LabelingConfig.ready``).
    """
    from ..models import PendingTask

    current_app.tasks[task_name]  # unknown names raise here, never end up pending
    try:
        _send(task_name, args, countdown=countdown)
    except BROKER_ERRORS as exc:
        PendingTask.objects.create(name=task_name, args=list(args), attempts=1, last_error=type(exc).__name__)
        logger.warning("broker unreachable (%s): %s recorded to be sent later", type(exc).__name__, task_name)
        return
    if PendingTask.objects.exists():
        pending_tasks_send()


def pending_tasks_send(limit: int = 1000) -> int:
    """Send the tasks recorded while the broker was unreachable, oldest first; stop at the first failure.

    Each is deleted once sent (a task sent twice is harmless: every task is idempotent).

    Returns
    -------
    int
        How many were sent.
    """
    from ..models import PendingTask

    sent = 0
    for pending in PendingTask.objects.order_by("id")[:limit]:
        try:
            _send(pending.name, pending.args)
        except BROKER_ERRORS as exc:
            PendingTask.objects.filter(pk=pending.pk).update(
                attempts=pending.attempts + 1, last_error=type(exc).__name__
            )
            break
        PendingTask.objects.filter(pk=pending.pk).delete()
        sent += 1
    if sent:
        logger.info("sent %d task(s) recorded while the broker was unreachable", sent)
    return sent


def enqueue_on_commit(task_name: str, *args) -> None:
    """Send the task once the current transaction commits (at once outside one).

    Never send inside an open transaction: the worker could otherwise look for
    rows that are not committed yet.
    """
    transaction.on_commit(lambda: enqueue(task_name, *args))


#: What this process knows of open debounce windows: key -> the wall-clock time (``time.time()``) until which
#: the window is surely still open (its end, less a second of margin for clocks). Calls before that send nothing
#: without asking the cache: the labeling hot path submits every few seconds per labeler.
_windows_open_until: dict[str, float] = {}


def enqueue_debounced(task_name: str, key: str, delay: float, *args) -> bool:
    """Send ``task_name`` once per ``delay`` seconds per ``key``, to run ``delay`` seconds from now.

    The first call in a window sends the task with a countdown; later calls in the same window do
    nothing (the task, when it runs, sees their changes: the window closes before it starts, so a
    change after it started opens a new window and sends another). Returns whether it sent one.
    A broker outage records the task like :func:`enqueue` (sent later, without the countdown).

    The window is a cache entry shared by every process, whose value is the time it closes; each
    process remembers the windows it saw (:data:`_windows_open_until`), so most calls in a window ask
    nothing of the cache.
    """
    import time

    from django.core.cache import cache

    current_app.tasks[task_name]  # unknown names raise before the window opens
    now = time.time()
    if _windows_open_until.get(key, 0.0) > now:
        return False
    ttl = max(1, int(delay))
    cache_key = f"debounce:{key}"
    if not cache.add(cache_key, now + ttl, ttl):
        closes = cache.get(cache_key)
        if isinstance(closes, float):
            _windows_open_until[key] = closes - 1.0
        return False
    _windows_open_until[key] = now + ttl - 1.0
    enqueue(task_name, *args, countdown=delay)
    return True


def debounce_forget() -> None:
    """Forget the windows this process saw (tests that close a window by deleting its cache entry)."""
    _windows_open_until.clear()


def background_precompute_enabled() -> bool:
    """A real worker recomputes the lead's numbers in the background (``FAIRTONE["CONSENSUS_BACKGROUND_REFRESH"]``;
    never with jobs run in-process, where the first view computes them)."""
    from django.conf import settings

    return bool(settings.FAIRTONE.get("CONSENSUS_BACKGROUND_REFRESH")) and not settings.CELERY_TASK_ALWAYS_EAGER


def precompute_schedule(project_id: int) -> bool:
    """Ask the worker to precompute the project's lead pages (consensus of every phase, test-retest,
    the baseline comparison) ``FAIRTONE["PRECOMPUTE_DELAY"]`` seconds from now, at most once per that
    delay; nothing with jobs run in-process. Called when labels or baselines change. Returns whether a
    task was sent."""
    from django.conf import settings

    if not background_precompute_enabled():
        return False
    delay = float(settings.FAIRTONE.get("PRECOMPUTE_DELAY", 15))
    return enqueue_debounced(PROJECT_PRECOMPUTE, f"precompute:{project_id}", delay, project_id)


def precompute_schedule_on_commit(project_id: int) -> None:
    """:func:`precompute_schedule` once the current transaction commits (a cheap settings check first:
    with jobs run in-process nothing is registered)."""
    if background_precompute_enabled():
        transaction.on_commit(lambda: precompute_schedule(project_id))
