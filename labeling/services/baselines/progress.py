"""Progress of a baseline run: each image counted once on its ``Job``, done or failed."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from ...models import Image, ImageBaseline, Job

#: At most this many failures are listed on a job row (all are on the result rows).
MAX_JOB_FAILURES = 200


def job_count(job: Job, image: Image, row: ImageBaseline) -> None:
    """Count one image on the job (inside the caller's transaction)."""
    if row.status == ImageBaseline.Status.OK:
        Job.objects.filter(pk=job.pk).update(done=F("done") + 1)
    else:
        locked = Job.objects.select_for_update().only("failures").get(pk=job.pk)
        failures = list(locked.failures or [])
        if len(failures) < MAX_JOB_FAILURES:
            failures.append({"image_id": image.id, "external_id": image.external_id, "reason": row.error})
        Job.objects.filter(pk=job.pk).update(failed=F("failed") + 1, failures=failures)
    job_finish_if_complete(job.pk)


def job_finish_if_complete(job_id: int) -> None:
    """Mark the job done once every image is counted (done or failed)."""
    Job.objects.filter(
        pk=job_id,
        status__in=[Job.Status.QUEUED, Job.Status.RUNNING],
        total__lte=F("done") + F("failed"),
    ).update(status=Job.Status.DONE, finished_at=timezone.now())


def job_fail_missing(job: Job, image_id: int, reason: str) -> None:
    """Count an image that has no row to store (e.g. deleted during the run) as failed, once."""
    with transaction.atomic():
        locked = Job.objects.select_for_update().only("failures").get(pk=job.pk)
        failures = list(locked.failures or [])
        if any(f.get("image_id") == image_id for f in failures):
            return
        if len(failures) < MAX_JOB_FAILURES:
            failures.append({"image_id": image_id, "external_id": "", "reason": reason})
        Job.objects.filter(pk=job.pk).update(failed=F("failed") + 1, failures=failures)
        job_finish_if_complete(job.pk)
