"""A job's sign of life while its task works: cheap, throttled heartbeats.

A long task (a release build, an evaluation report) calls a :class:`JobBeat` between its chunks and
stages as often as is convenient; the row is written at most every ``FAIRTONE["JOB_HEARTBEAT_SECONDS"]``
(a monotonic clock compared in between: nothing else). The jobs sweeper (``services.jobs``) gives up
a running job of a kind that beats (:data:`BEATING_KINDS`) once its heartbeat is older than
``FAIRTONE["JOB_STALE_MINUTES"]`` (:func:`job_stale_seconds`): a dead worker's build is failed, and left
retryable, within minutes instead of at its hours-long time limit.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.utils import timezone

from ..models import Job

#: Kinds whose task beats at least every few seconds while it works, so that a silence longer than
#: :func:`job_stale_seconds` means the worker is gone (a release build: ``Job.Kind.EXPORT``).
BEATING_KINDS = frozenset({Job.Kind.EXPORT, Job.Kind.EVALUATION})

DEFAULT_HEARTBEAT_SECONDS = 5.0
DEFAULT_STALE_MINUTES = 10.0


def job_heartbeat_seconds() -> float:
    """The least time between two heartbeats written by a :class:`JobBeat`."""
    return float(settings.FAIRTONE.get("JOB_HEARTBEAT_SECONDS", DEFAULT_HEARTBEAT_SECONDS))


def job_stale_seconds() -> float:
    """A running job of :data:`BEATING_KINDS` silent for longer than this has lost its worker."""
    return float(settings.FAIRTONE.get("JOB_STALE_MINUTES", DEFAULT_STALE_MINUTES)) * 60


class JobBeat:
    """Call it between steps (``beat()``, ``beat(done=n)``): it writes ``heartbeat_at`` at most every
    :func:`job_heartbeat_seconds`; with fields (progress) it writes them and the heartbeat at once."""

    def __init__(self, job_id: int | None, *, interval: float | None = None):
        self.job_id = job_id
        self.interval = job_heartbeat_seconds() if interval is None else interval
        self._last: float | None = None

    def __call__(self, *_args, force: bool = False, **fields) -> None:
        if self.job_id is None:
            return
        now = time.monotonic()
        if not (force or fields) and self._last is not None and now - self._last < self.interval:
            return
        self._last = now
        Job.objects.filter(pk=self.job_id).update(heartbeat_at=timezone.now(), **fields)
