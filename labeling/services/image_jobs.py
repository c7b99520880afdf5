"""The background work after an import, as one ``Job`` per import: display images and baselines.

Each imported image gets two background steps: its display JPEG and thumbnail
(``images.image_make_derivatives``), then its colorimetric baseline. Both run in a
Celery worker, or in the web process when there is no broker (the embedded
default): either way they are counted on one ``Job`` of kind ``derivatives`` per
import (:func:`image_job_start`; ``parameters["import_batch"]`` names the import),
so the project's jobs page shows their state, progress and failures, and a lead can
retry the failed images (:func:`image_job_retry`).

Progress is recounted from the images themselves (:func:`image_job_refresh`), never
incremented, so a task that runs twice (a retry, a redelivery) counts nothing twice:
an image is finished when its display step is no longer pending and it has a
baseline row; it failed when either step failed.
"""

from __future__ import annotations

from celery import current_app
from django.core.cache import cache
from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q, Subquery
from django.utils import timezone

from ..models import Image, ImageBaseline, ImportBatch, Job
from . import queue
from .project_lifecycle import project_refuse_if_archived

#: At most this many failures are listed on the job (all are on the images and their baselines).
MAX_LISTED_FAILURES = 200
#: Above this many images a task recounts progress at most every REFRESH_SECONDS (a recount reads
#: the whole import); the sweeper, the end of the import and the job's page recount it anyway.
RECOUNT_EVERY_TASK_UP_TO = 2000
REFRESH_SECONDS = 2


def jobs_run_in_process() -> bool:
    """True when tasks run in the web process (no broker: the embedded default)."""
    return bool(current_app.conf.task_always_eager)


def image_job_start(*, batch: ImportBatch, user=None) -> Job:
    """The job counting the background work of the images ``batch`` imports (their number grows as they are)."""
    return Job.objects.create(
        project=batch.project,
        kind=Job.Kind.DERIVATIVES,
        parameters={
            "import_batch": batch.pk,
            "import_kind": batch.kind,
            "runs": "in-process" if jobs_run_in_process() else "worker",
        },
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )


def image_job_import_finished(job: Job) -> Job | None:
    """The import is over: drop the job when it imported nothing, else recount (it may be done already)."""
    if not Image.objects.filter(import_batch_id=job.parameters.get("import_batch")).exists():
        Job.objects.filter(pk=job.pk).delete()
        return None
    return image_job_refresh(job.pk, force=True)


def _images(job: Job):
    rows = ImageBaseline.objects.filter(image=OuterRef("pk"))
    return Image.objects.filter(import_batch_id=job.parameters.get("import_batch")).annotate(
        has_row=Exists(rows), has_ok=Exists(rows.filter(status=ImageBaseline.Status.OK))
    )


_FINISHED = ~Q(derivative_status=Image.DerivativeStatus.PENDING) & Q(has_row=True)
_FAILED = _FINISHED & (Q(derivative_status=Image.DerivativeStatus.FAILED) | Q(has_ok=False))


def _failures(job: Job) -> list[dict]:
    baseline_error = ImageBaseline.objects.filter(image=OuterRef("pk"), status=ImageBaseline.Status.FAILED).values(
        "error"
    )[:1]
    failed = (
        _images(job)
        .filter(_FAILED)
        .annotate(baseline_error=Subquery(baseline_error))
        .order_by("id")
        .values("id", "external_id", "derivative_status", "derivative_error", "baseline_error")
    )
    failures = []
    for image in failed[:MAX_LISTED_FAILURES]:
        reasons = []
        if image["derivative_status"] == Image.DerivativeStatus.FAILED:
            reasons.append(f"display image: {image['derivative_error']}")
        if image["baseline_error"]:
            reasons.append(f"baseline: {image['baseline_error']}")
        failures.append({"image_id": image["id"], "external_id": image["external_id"], "reason": "; ".join(reasons)})
    return failures


def image_job_refresh(job_id: int | None, *, force: bool = False, alive: bool = True) -> Job | None:
    """Recount the job's progress from its images; mark it done once the import is over and every image finished.

    ``alive``: called by a task, so a sign of life for the sweeper (not when the sweeper or a page
    recounts). ``force``: recount even a large job recounted less than REFRESH_SECONDS ago. A job the sweeper gave up (failed) or a cancelled one
    keeps its status; its counts are still brought up to date.
    """
    if job_id is None:
        return None
    job = Job.objects.filter(pk=job_id, kind=Job.Kind.DERIVATIVES).first()
    if job is None:
        return None
    now = timezone.now()
    if not force and job.total > RECOUNT_EVERY_TASK_UP_TO:
        if not cache.add(f"image-job-recount-{job.pk}", 1, REFRESH_SECONDS):  # recounted moments ago
            Job.objects.filter(pk=job.pk).update(heartbeat_at=now)
            return job
    counts = _images(job).aggregate(
        total=Count("id"), finished=Count("id", filter=_FINISHED), failed=Count("id", filter=_FAILED)
    )
    fields = {
        "total": counts["total"],
        "done": counts["finished"] - counts["failed"],
        "failed": counts["failed"],
    }
    if alive:
        fields["heartbeat_at"] = now
    if counts["failed"] != job.failed or (counts["failed"] and not job.failures):
        fields["failures"] = _failures(job)
    import_over = not ImportBatch.objects.filter(
        pk=job.parameters.get("import_batch"), status=ImportBatch.Status.RUNNING
    ).exists()
    if job.status in (Job.Status.QUEUED, Job.Status.RUNNING):
        if import_over and counts["finished"] >= counts["total"]:
            fields.update(status=Job.Status.DONE, finished_at=now, started_at=job.started_at or now)
        elif counts["finished"] or job.started_at:
            fields.update(status=Job.Status.RUNNING, started_at=job.started_at or now)
    Job.objects.filter(pk=job.pk).update(**fields)
    job.refresh_from_db()
    return job


def image_job_step_started(job_id: int | None, *, in_process: bool) -> None:
    """A task of the job started: it is running (and where it runs is recorded)."""
    if job_id is None:
        return
    now = timezone.now()
    Job.objects.filter(pk=job_id, status=Job.Status.QUEUED).update(
        status=Job.Status.RUNNING, started_at=now, heartbeat_at=now
    )
    Job.objects.filter(pk=job_id).update(heartbeat_at=now)
    job_runner_record(job_id, in_process=in_process)


def job_runner_record(job_id: int | None, *, in_process: bool) -> None:
    """Record on the job whether its tasks run in a worker or in the web process (once)."""
    if job_id is None:
        return
    runs = "in-process" if in_process else "worker"
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).only("parameters").first()
        if job is not None and job.parameters.get("runs") != runs:
            Job.objects.filter(pk=job_id).update(parameters={**job.parameters, "runs": runs})


def image_job_baseline(*, image: Image, final_attempt: bool = True) -> ImageBaseline | None:
    """The baseline step of an imported image: computed when missing, computed again when it failed."""
    from .baselines import (
        BASELINE_CODE_VERSION,
        baseline_compute,
        baseline_parameters_effective,
        baseline_parameters_hash,
    )

    parameters = baseline_parameters_effective(image.project)
    current = ImageBaseline.objects.filter(
        image=image, parameters_hash=baseline_parameters_hash(parameters), code_version=BASELINE_CODE_VERSION
    ).first()
    if current is not None and current.status == ImageBaseline.Status.OK:
        return None
    return baseline_compute(image=image, parameters=parameters, final_attempt=final_attempt)


def _unfinished(job: Job) -> tuple[list[int], list[int]]:
    """(images whose display step must run again, images whose baseline step must run again)."""
    images = _images(job)
    again = Q(derivative_status=Image.DerivativeStatus.FAILED) | Q(derivative_status=Image.DerivativeStatus.PENDING)
    derivatives = list(images.filter(again).order_by("id").values_list("id", flat=True))
    baselines = list(
        images.exclude(again).filter(Q(has_row=False) | Q(has_ok=False)).order_by("id").values_list("id", flat=True)
    )
    return derivatives, baselines


def image_job_retry(*, job: Job) -> int:
    """Run the failed and unfinished steps of the job's images again (the same job counts them).

    Returns
    -------
    int
        How many images were sent again (0: nothing to retry).

    Raises
    ------
    django.core.exceptions.ValidationError
        The project is archived.
    """
    project_refuse_if_archived(job.project_id, "retry its jobs")
    derivatives, baselines = _unfinished(job)
    if not derivatives and not baselines:
        return 0
    with transaction.atomic():
        Job.objects.filter(pk=job.pk).update(
            status=Job.Status.RUNNING,
            finished_at=None,
            heartbeat_at=timezone.now(),
            message=f"Retried {len(derivatives) + len(baselines)} images.",
            parameters={**job.parameters, "retries": int(job.parameters.get("retries", 0)) + 1},
        )
        for image_id in derivatives:
            queue.enqueue_on_commit(queue.IMAGE_MAKE_DERIVATIVES, image_id, job.pk)
        for image_id in baselines:
            queue.enqueue_on_commit(queue.IMAGE_COMPUTE_BASELINE, image_id, job.pk)
    return len(derivatives) + len(baselines)
