"""Every Celery task of the app. Each takes ids, loads rows, calls a service, and is safe to run twice.

The services never import this module: they send a task by its name through
``labeling.services.queue`` (``enqueue_on_commit``, after the transaction commits,
so the worker never looks for rows that are not committed yet). The names are
defined there; this module registers a task under each of them. It is imported
when the app starts (``LabelingConfig.ready``) and by the worker's autodiscovery.

Every task has the same retry policy (``RETRYING``) and its own named time limits
(``TIME_LIMITS``); the soft limit leaves time to record what was not done.
"""

import logging

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded

from .models import Image, Job, Phase, Project, Release
from .services import queue
from .services.baselines import (
    BASELINE_TASK_SOFT_TIME_LIMIT,
    BASELINE_TASK_TIME_LIMIT,
    baseline_image_ensure,
    baseline_run_batch,
    baseline_run_batch_abandon,
    baseline_run_prepare,
)
from .services.consensus import phase_refresh_unlock, phase_summary_refresh
from .services.evaluations import EVALUATION_TASK_SOFT_TIME_LIMIT, EVALUATION_TASK_TIME_LIMIT
from .services.image_jobs import image_job_baseline, image_job_refresh, image_job_step_started, job_runner_record
from .services.images import image_make_derivatives
from .services.jobs import job_heartbeat, jobs_sweep
from .services.precompute import project_precompute
from .services.releases import (
    RELEASE_TASK_SOFT_TIME_LIMIT,
    RELEASE_TASK_TIME_LIMIT,
    release_build,
    release_fail,
)

logger = logging.getLogger(__name__)

#: Every task: acknowledged after it ran (a worker that dies mid-task leaves it to
#: another), retried with backoff on transient storage errors (OSError), at most 3 times.
RETRYING = {"bind": True, "acks_late": True, "autoretry_for": (OSError,), "retry_backoff": True, "max_retries": 3}

#: (hard, soft) time limit in seconds of each task.
TIME_LIMITS = {
    # Decode one image (at most FAIRTONE["MAX_IMAGE_PIXELS"]) and write two resized JPEGs.
    queue.IMAGE_MAKE_DERIVATIVES: (300, 280),
    # One image's baseline: a measurement and an overlay (well under a second for 12 MP).
    queue.IMAGE_COMPUTE_BASELINE: (120, 100),
    # Splitting a run into batches: one query over the project's image ids.
    queue.BASELINE_RUN: (120, 100),
    # BASELINE_BATCH_SIZE images; their cost is measured next to these limits.
    queue.BASELINE_BATCH: (BASELINE_TASK_TIME_LIMIT, BASELINE_TASK_SOFT_TIME_LIMIT),
    # One phase's consensus summary (100,000 images x 4 labels: about 5 s on a loaded 2-core machine).
    queue.CONSENSUS_REFRESH: (600, 570),
    # A whole dataset release: its tables, data card, optional images and zip (see services.releases.build).
    queue.RELEASE_BUILD: (RELEASE_TASK_TIME_LIMIT, RELEASE_TASK_SOFT_TIME_LIMIT),
    # One evaluation report (see services.evaluations.runs).
    queue.EVALUATION_RUN: (EVALUATION_TASK_TIME_LIMIT, EVALUATION_TASK_SOFT_TIME_LIMIT),
    # A pass over the queued and running jobs (a few queries per active job).
    queue.JOBS_SWEEP: (120, 100),
    # A project's lead pages: every phase's consensus and the baseline comparison (100,000 images x 4
    # labels: about 15 s on a loaded 2-core machine; bench/bench_lead_pages.py).
    queue.PROJECT_PRECOMPUTE: (900, 870),
}


def _options(name: str) -> dict:
    """The task decorator's options: its registered name, the retry policy and its limits."""
    hard, soft = TIME_LIMITS[name]
    return {"name": name, **RETRYING, "time_limit": hard, "soft_time_limit": soft}


def _final_attempt(task) -> bool:
    """On the last attempt storage errors are recorded as failures instead of raised (never retried forever)."""
    return task.request.retries >= (task.max_retries or 0)


@shared_task(**_options(queue.IMAGE_MAKE_DERIVATIVES))
def image_make_derivatives_task(self, image_id: int, job_id: int | None = None) -> str:
    """The display images of a new image, then (chained) its baseline; ``job_id``: its import's job."""
    image = Image.objects.filter(pk=image_id).first()
    if image is None:
        image_job_refresh(job_id)
        return "missing"
    image_job_step_started(job_id, in_process=bool(self.request.is_eager))
    image_make_derivatives(image=image)
    # Chained: the colorimetric baseline of a new image (a no-op when it exists).
    if job_id is None:
        queue.enqueue(queue.IMAGE_COMPUTE_BASELINE, image_id)
    else:
        queue.enqueue(queue.IMAGE_COMPUTE_BASELINE, image_id, job_id)
    return image.derivative_status


# --- colorimetric baselines ------------------------------------------------------


@shared_task(**_options(queue.BASELINE_RUN))
def baseline_run_task(self, job_id: int) -> int:
    """Start a baseline run: split its images into batches and enqueue one task per batch."""
    job = Job.objects.filter(pk=job_id).select_related("project").first()
    if job is None or job.status not in (Job.Status.QUEUED, Job.Status.RUNNING):
        return 0
    job_heartbeat(job_id)
    job_runner_record(job_id, in_process=bool(self.request.is_eager))
    batches = baseline_run_prepare(job=job)
    for image_ids in batches:
        queue.enqueue(queue.BASELINE_BATCH, job_id, image_ids)
    return len(batches)


@shared_task(**_options(queue.BASELINE_BATCH))
def baseline_batch_task(self, job_id: int, image_ids: list[int]) -> str:
    """Compute one batch of a run. Safe to run twice (a retried batch counts no image twice)."""
    job = Job.objects.filter(pk=job_id).select_related("project").first()
    if job is None:
        return "missing"
    if job.status not in (Job.Status.QUEUED, Job.Status.RUNNING):
        return "not running"  # e.g. given up by the sweeper: its images are recorded as failed
    job_heartbeat(job_id)
    try:
        baseline_run_batch(job=job, image_ids=image_ids, final_attempt=_final_attempt(self))
    except SoftTimeLimitExceeded:
        logger.warning("baseline batch of job %s hit its time limit", job_id)
        baseline_run_batch_abandon(
            job=job, image_ids=image_ids, reason="time limit exceeded while processing this batch"
        )
    return "ok"


@shared_task(**_options(queue.IMAGE_COMPUTE_BASELINE))
def image_compute_baseline_task(self, image_id: int, job_id: int | None = None) -> str:
    """The baseline of a new image with its project's current parameters (skipped if present; with its
    import's ``job_id``, a failed one is computed again and the job's progress recounted)."""
    image = Image.objects.filter(pk=image_id).select_related("project").first()
    if image is None:
        image_job_refresh(job_id)
        return "missing"
    if job_id is None:
        row = baseline_image_ensure(image=image, final_attempt=_final_attempt(self))
        return "exists" if row is None else row.status
    image_job_step_started(job_id, in_process=bool(self.request.is_eager))
    try:
        row = image_job_baseline(image=image, final_attempt=_final_attempt(self))
    finally:
        image_job_refresh(job_id)
    return "exists" if row is None else row.status


# --- consensus -------------------------------------------------------------------


@shared_task(**_options(queue.CONSENSUS_REFRESH))
def consensus_refresh_task(self, phase_id: int) -> str:
    """Recompute a phase's consensus summary into the cache (the dashboard serves the last one meanwhile)."""
    try:
        phase = Phase.objects.select_related("project__scale").filter(pk=phase_id).first()
        if phase is None:
            return "missing"
        phase_summary_refresh(phase)
        return "refreshed"
    finally:
        phase_refresh_unlock(phase_id)


@shared_task(**_options(queue.PROJECT_PRECOMPUTE))
def project_precompute_task(self, project_id: int) -> str:
    """Precompute a project's lead pages after its labels or baselines changed (debounced; see
    ``services.precompute``)."""
    project = Project.objects.select_related("scale").filter(pk=project_id).first()
    if project is None:
        return "missing"
    timings = project_precompute(project)
    logger.info("precomputed project %s: %s", project_id, {k: round(v, 2) for k, v in timings.items()})
    return "precomputed"


# --- dataset releases ---------------------------------------------------------------


@shared_task(**_options(queue.RELEASE_BUILD))
def release_build_task(self, release_id: int) -> str:
    """Build and publish a release. Safe to run again: each attempt starts from scratch in a new temporary
    directory (the old one is removed) and publishes at most once."""
    release = Release.objects.filter(pk=release_id).first()
    if release is None:
        return "missing"
    job_heartbeat(release.job_id)
    job_runner_record(release.job_id, in_process=bool(self.request.is_eager))
    try:
        release = release_build(release, final_attempt=_final_attempt(self))
    except SoftTimeLimitExceeded:
        logger.warning("release %s hit its time limit", release_id)
        release_fail(release, "The release took longer than its time limit and was stopped; nothing was published.")
        return "failed"
    return release.status


# --- fairness evaluation runs -------------------------------------------------------


@shared_task(**_options(queue.EVALUATION_RUN))
def evaluation_run_task(self, run_id: int) -> str:
    """Compute an evaluation run's report. Safe to run again: a finished run is left alone, an unfinished
    one starts afresh."""
    from .models import EvaluationRun
    from .services.evaluations import evaluation_fail, evaluation_run

    run = EvaluationRun.objects.select_related("project__scale").filter(pk=run_id).first()
    if run is None:
        return "missing"
    job_runner_record(run.job_id, in_process=bool(self.request.is_eager))
    try:
        run = evaluation_run(run)
    except SoftTimeLimitExceeded:
        logger.warning("evaluation %s hit its time limit", run_id)
        evaluation_fail(run, "The report took longer than its time limit and was stopped.")
        return "failed"
    return run.status


# --- the sweeper ----------------------------------------------------------------------


@shared_task(**_options(queue.JOBS_SWEEP))
def jobs_sweep_task(self) -> dict:
    """Send tasks recorded during a broker outage; re-send or give up jobs nothing works on (beat, every minute)."""
    return jobs_sweep()
