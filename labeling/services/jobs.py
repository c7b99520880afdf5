"""Jobs never stay stuck: heartbeats and the periodic sweeper.

A worker that dies (SIGKILL, out of memory, a lost machine) or a broker that loses its queue (a Redis
restart) leaves ``Job`` rows queued or running with nothing working on them. The tasks record a sign
of life (:func:`job_heartbeat`; each baseline result is one too); :func:`jobs_sweep`, run every
:data:`SWEEP_INTERVAL_SECONDS` by Celery beat (``CELERY_BEAT_SCHEDULE``) or ``manage.py jobs_sweep``,
then

* sends the tasks recorded while the broker was unreachable (``queue.pending_tasks_send``);
* re-sends once the start of a job queued for :data:`QUEUED_RESEND_SECONDS` without starting (its
  task was lost), and gives it up after twice that;
* gives up a running job with no sign of life for longer than its kind's task time limit plus
  :data:`DEADLINE_MARGIN_SECONDS`;
* gives up sooner a running job of a kind whose task beats while it works (``heartbeat.BEATING_KINDS``:
  a release build, an evaluation run) once its heartbeat is older than ``FAIRTONE["JOB_STALE_MINUTES"]``
  (``heartbeat.job_stale_seconds``): a release's four-hour limit is no wait for a dead worker.

Giving up leaves the job retryable: a baseline run records every image without a result as failed
("worker lost") so that its "retry failed images" reruns exactly those; a release is marked failed
(nothing published) and can be started again; an evaluation run is marked failed with the reason. A task of a given-up job that arrives late does nothing.
An import left "running" by a process that died is marked failed, and old temporary uploads are removed
(``imports.stale``).
"""

from __future__ import annotations

import logging

from django.db.models import Max
from django.utils import timezone

from ..models import EvaluationRun, ImageBaseline, Job, Release
from . import queue
from .heartbeat import BEATING_KINDS, job_stale_seconds

logger = logging.getLogger(__name__)

#: How often beat runs the sweeper.
SWEEP_INTERVAL_SECONDS = 60
#: Added to a task's hard time limit before a silent running job is given up.
DEADLINE_MARGIN_SECONDS = 120
#: A job queued this long without starting has lost its task: it is sent again (once).
QUEUED_RESEND_SECONDS = 15 * 60

ABANDONED = "no sign of life from a worker for {minutes} minutes (the worker was lost)"
STALE = (
    "no heartbeat from its worker for {minutes} minutes, more than the {stale:g} allowed "
    "(FAIRTONE_JOB_STALE_MINUTES): the worker was lost"
)


def job_heartbeat(job_id: int | None) -> None:
    """Record that work on the job is alive (a task started or finished a step)."""
    if job_id is not None:
        Job.objects.filter(pk=job_id).update(heartbeat_at=timezone.now())


def job_deadline_seconds(kind: str) -> int:
    """How long a running job of ``kind`` may go without a sign of life."""
    from .baselines.runs import BASELINE_TASK_TIME_LIMIT
    from .evaluations import EVALUATION_TASK_TIME_LIMIT
    from .releases import RELEASE_TASK_TIME_LIMIT

    limits = {
        Job.Kind.BASELINE: BASELINE_TASK_TIME_LIMIT,
        Job.Kind.EXPORT: RELEASE_TASK_TIME_LIMIT,
        Job.Kind.EVALUATION: EVALUATION_TASK_TIME_LIMIT,
    }
    from django.conf import settings

    return limits.get(kind, settings.CELERY_TASK_TIME_LIMIT) + DEADLINE_MARGIN_SECONDS


def job_silence_limit_seconds(kind: str) -> float:
    """How long a running job of ``kind`` may be silent before the sweeper gives it up."""
    deadline = job_deadline_seconds(kind)
    return min(deadline, job_stale_seconds()) if kind in BEATING_KINDS else deadline


def _last_sign_of_life(job: Job):
    signs = [job.heartbeat_at, job.started_at, job.created_at]
    if job.kind == Job.Kind.BASELINE:
        signs.append(ImageBaseline.objects.filter(job=job).aggregate(t=Max("computed_at"))["t"])
    return max(s for s in signs if s is not None)


def job_abandon(job: Job, reason: str) -> None:
    """Give the job up, leaving it retryable (see the module's docstring)."""
    logger.warning("job %s (%s) given up: %s", job.pk, job.kind, reason)
    if job.kind == Job.Kind.BASELINE:
        from .baselines.runs import baseline_run_batch_abandon

        images = job.project.images.order_by("id")
        if "image_ids" in job.parameters:
            images = images.filter(id__in=job.parameters["image_ids"])
        counted = set(
            ImageBaseline.objects.filter(job=job, parameters_hash=job.parameters.get("parameters_hash")).values_list(
                "image_id", flat=True
            )
        )
        uncounted = [i for i in images.values_list("id", flat=True) if i not in counted]
        Job.objects.filter(pk=job.pk, status=Job.Status.QUEUED).update(status=Job.Status.RUNNING)
        baseline_run_batch_abandon(job=job, image_ids=uncounted, reason=reason)
        Job.objects.filter(pk=job.pk).update(message=f"Stopped: {reason}. Retry the failed images to finish the run.")
        # Anything not counted (e.g. the images were deleted meanwhile) must not keep the run open.
        Job.objects.filter(pk=job.pk, status__in=[Job.Status.QUEUED, Job.Status.RUNNING]).update(
            status=Job.Status.FAILED, finished_at=timezone.now()
        )
        return
    release = Release.objects.filter(job=job).first()
    if release is not None:
        from .releases import release_fail

        release_fail(release, f"Stopped: {reason}. Nothing was published; start the release again.")
        return
    run = EvaluationRun.objects.filter(job=job).first()
    if run is not None:
        from .evaluations import evaluation_fail

        evaluation_fail(run, f"Stopped: {reason}. Upload the results again to start a new run.")
        return
    Job.objects.filter(pk=job.pk, status__in=[Job.Status.QUEUED, Job.Status.RUNNING]).update(
        status=Job.Status.FAILED, message=f"Stopped: {reason}.", finished_at=timezone.now()
    )


def _resend(job: Job) -> bool:
    """Send the task that starts ``job`` again; False when the kind has no such task here."""
    if job.kind == Job.Kind.DERIVATIVES:
        from .image_jobs import image_job_retry

        return image_job_retry(job=job) > 0
    if job.kind == Job.Kind.BASELINE:
        queue.enqueue(queue.BASELINE_RUN, job.pk)
        return True
    release = Release.objects.filter(job=job).first()
    if release is not None:
        queue.enqueue(queue.RELEASE_BUILD, release.pk)
        return True
    run = EvaluationRun.objects.filter(job=job).first()
    if run is not None:
        queue.enqueue(queue.EVALUATION_RUN, run.pk)
        return True
    return False


def jobs_sweep(*, now=None) -> dict[str, int]:
    """One pass of the sweeper (see the module's docstring).

    Returns
    -------
    dict
        How many pending tasks were sent, jobs re-sent and jobs given up.
    """
    now = now or timezone.now()
    from .imports.stale import imports_sweep, upload_temp_sweep

    report = {"pending_sent": queue.pending_tasks_send(), "resent": 0, "abandoned": 0}
    # Imports run in web requests: one whose process died is given up here, with its temporary upload.
    report["imports_abandoned"] = imports_sweep(now=now)
    report["uploads_removed"] = upload_temp_sweep()
    active = Job.objects.filter(status__in=[Job.Status.QUEUED, Job.Status.RUNNING])
    for job in active.select_related("project"):
        if job.kind == Job.Kind.DERIVATIVES:
            # An import's job is recounted from its images: its last task may have skipped the recount.
            from .image_jobs import image_job_refresh

            refreshed = image_job_refresh(job.pk, force=True, alive=False)
            if refreshed is None or refreshed.status not in (Job.Status.QUEUED, Job.Status.RUNNING):
                continue
        silent = (now - _last_sign_of_life(job)).total_seconds()
        if job.status == Job.Status.QUEUED and job.started_at is None:
            if silent > 2 * QUEUED_RESEND_SECONDS:
                job_abandon(job, f"never started in {int(silent // 60)} minutes (its task was lost)")
                report["abandoned"] += 1
            elif silent > QUEUED_RESEND_SECONDS and not job.parameters.get("resent"):
                if _resend(job):
                    Job.objects.filter(pk=job.pk).update(parameters={**job.parameters, "resent": now.isoformat()})
                    report["resent"] += 1
            continue
        if silent > job_deadline_seconds(job.kind):
            job_abandon(job, ABANDONED.format(minutes=int(silent // 60)))
            report["abandoned"] += 1
        elif silent > job_silence_limit_seconds(job.kind):
            job_abandon(job, STALE.format(minutes=int(silent // 60), stale=job_stale_seconds() / 60))
            report["abandoned"] += 1
    return report
