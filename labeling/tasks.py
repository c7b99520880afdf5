"""Celery tasks. Each takes ids, loads rows, calls a service, and is safe to run twice.

Enqueue them with ``transaction.on_commit`` (see ``enqueue_on_commit``), never
inside an open transaction: the worker could otherwise look for rows that are
not committed yet.
"""

import logging

from celery import shared_task
from django.db import transaction

logger = logging.getLogger(__name__)


# Every task here: acknowledged after it ran (a worker that dies mid-task leaves it to
# another), retried with backoff on transient storage errors (OSError), at most 3 times.
RETRYING = {"bind": True, "acks_late": True, "autoretry_for": (OSError,), "retry_backoff": True, "max_retries": 3}


def enqueue_on_commit(task, *args) -> None:
    """Send ``task`` once the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: task.delay(*args))


@shared_task(**RETRYING, time_limit=300, soft_time_limit=280)
def image_make_derivatives_task(self, image_id: int) -> str:
    from .models import Image
    from .services.images import image_make_derivatives

    image = Image.objects.filter(pk=image_id).first()
    if image is None:
        return "missing"
    image_make_derivatives(image=image)
    # Chained: the colorimetric baseline of a new image (a no-op when it exists).
    image_compute_baseline_task.delay(image_id)
    return image.derivative_status


# --- colorimetric baselines ------------------------------------------------------
# Time limits: a batch is BASELINE_BATCH_SIZE images (see labeling.services.baselines
# for what one costs); the soft limit leaves time to record the unprocessed images.


@shared_task(**RETRYING, time_limit=120, soft_time_limit=100)
def baseline_run_task(self, job_id: int) -> int:
    """Start a baseline run: split its images into batches and enqueue one task per batch."""
    from .models import Job
    from .services.baselines import baseline_run_prepare

    job = Job.objects.filter(pk=job_id).select_related("project").first()
    if job is None or job.status not in (Job.Status.QUEUED, Job.Status.RUNNING):
        return 0
    batches = baseline_run_prepare(job=job)
    for image_ids in batches:
        baseline_batch_task.delay(job_id, image_ids)
    return len(batches)


@shared_task(**RETRYING, time_limit=600, soft_time_limit=540)
def baseline_batch_task(self, job_id: int, image_ids: list[int]) -> str:
    """Compute one batch of a run. Safe to run twice (a retried batch counts no image twice)."""
    from celery.exceptions import SoftTimeLimitExceeded

    from .models import Job
    from .services.baselines import baseline_run_batch, baseline_run_batch_abandon

    job = Job.objects.filter(pk=job_id).select_related("project").first()
    if job is None:
        return "missing"
    # On the last attempt, storage errors are recorded as failures instead of raised:
    # an image is never retried forever and the run always finishes.
    final_attempt = self.request.retries >= (self.max_retries or 0)
    try:
        baseline_run_batch(job=job, image_ids=image_ids, final_attempt=final_attempt)
    except SoftTimeLimitExceeded:
        logger.warning("baseline batch of job %s hit its time limit", job_id)
        baseline_run_batch_abandon(
            job=job, image_ids=image_ids, reason="time limit exceeded while processing this batch"
        )
    return "ok"


@shared_task(**RETRYING, time_limit=120, soft_time_limit=100)
def image_compute_baseline_task(self, image_id: int) -> str:
    """The baseline of a new image with its project's current parameters (skipped if present)."""
    from .models import Image
    from .services.baselines import baseline_image_ensure

    image = Image.objects.filter(pk=image_id).select_related("project").first()
    if image is None:
        return "missing"
    final_attempt = self.request.retries >= (self.max_retries or 0)
    row = baseline_image_ensure(image=image, final_attempt=final_attempt)
    return "exists" if row is None else row.status
