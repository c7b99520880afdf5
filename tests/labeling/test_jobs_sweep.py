"""Issue 13, item 1: jobs never stay stuck.

A worker killed mid-run leaves its job "running" with part of its images done; a broker restart
without persistence drops a queued job's task. The sweeper (``services.jobs.jobs_sweep``, run by
Celery beat every minute) gives such a job up within its kind's deadline and leaves it retryable,
or sends its lost task again. The state "the worker died after the first batch" is made with the
real services: the run's task is never sent (the callbacks are not run), the first batch is computed
as the worker would, then nothing more happens.
"""

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from labeling import tasks
from labeling.models import ImageBaseline, Job
from labeling.services import baselines as svc
from labeling.services import jobs as job_services
from tests.labeling.helpers import add_images

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def in_process():
    """Tasks run in this process, in this test's transaction, in both CI stages (a real worker could not
    see the uncommitted rows): what is tested here is the sweeper's logic, not the transport."""
    from tests.labeling.helpers import eager

    with eager(True):
        yield


@pytest.fixture
def half_done_run(project, lead, django_capture_on_commit_callbacks):
    add_images(project, 5)
    with django_capture_on_commit_callbacks(execute=False):  # the task is lost: never sent
        job = svc.baseline_run_start(project=project, user=lead)
    batches = svc.baseline_run_prepare(job=job)
    first = batches[0][:2]
    svc.baseline_run_batch(job=Job.objects.get(pk=job.pk), image_ids=first)  # then the worker dies
    job.refresh_from_db()
    assert (job.status, job.done, job.total) == (Job.Status.RUNNING, 2, 5)
    return job


def later(seconds: float):
    return timezone.now() + timedelta(seconds=seconds)


def test_a_run_whose_worker_died_is_given_up_within_its_deadline_and_retryable(
    half_done_run, lead, django_capture_on_commit_callbacks
):
    job = half_done_run
    deadline = job_services.job_deadline_seconds(Job.Kind.BASELINE)
    # Not before its deadline: a slow batch is not a dead one.
    assert job_services.jobs_sweep(now=later(deadline - 30))["abandoned"] == 0
    assert Job.objects.get(pk=job.pk).status == Job.Status.RUNNING

    report = job_services.jobs_sweep(now=later(deadline + 1))
    assert report["abandoned"] == 1
    job.refresh_from_db()
    assert job.status in (Job.Status.DONE, Job.Status.FAILED) and job.finished_at is not None
    assert (job.done, job.failed) == (2, 3)
    assert "worker was lost" in job.message
    assert all("worker was lost" in f["reason"] for f in job.failures)

    # Retryable: the failed images run again (in-process here) and get their results.
    with django_capture_on_commit_callbacks(execute=True):
        retry = svc.baseline_retry_failed(job=job, user=lead)
    assert retry.total == 3
    retry.refresh_from_db()
    assert retry.status == Job.Status.DONE and retry.done == 3


def test_a_late_batch_of_a_given_up_run_does_nothing(half_done_run):
    job = half_done_run
    job_services.jobs_sweep(now=later(job_services.job_deadline_seconds(Job.Kind.BASELINE) + 1))
    job.refresh_from_db()
    before = (job.done, job.failed, job.status)
    remaining = list(
        ImageBaseline.objects.filter(job=job, status=ImageBaseline.Status.FAILED).values_list("image_id", flat=True)
    )
    assert tasks.baseline_batch_task.apply(args=[job.pk, remaining]).get() == "not running"
    job.refresh_from_db()
    assert (job.done, job.failed, job.status) == before


def test_a_queued_job_whose_task_was_lost_is_sent_again_once_then_given_up(
    project, lead, django_capture_on_commit_callbacks
):
    add_images(project, 3)
    with django_capture_on_commit_callbacks(execute=False):
        job = svc.baseline_run_start(project=project, user=lead)
    assert job_services.jobs_sweep(now=later(60))["resent"] == 0
    # Re-sent after QUEUED_RESEND_SECONDS; in-process here, so the run then completes.
    with django_capture_on_commit_callbacks(execute=True):
        report = job_services.jobs_sweep(now=later(job_services.QUEUED_RESEND_SECONDS + 1))
    assert report["resent"] == 1
    job.refresh_from_db()
    assert job.status == Job.Status.DONE and job.done == 3


def test_a_queued_job_never_started_is_given_up_retryable(project, lead, django_capture_on_commit_callbacks):
    add_images(project, 3)
    with django_capture_on_commit_callbacks(execute=False):
        job = svc.baseline_run_start(project=project, user=lead)
    Job.objects.filter(pk=job.pk).update(parameters={**job.parameters, "resent": "earlier"})
    report = job_services.jobs_sweep(now=later(2 * job_services.QUEUED_RESEND_SECONDS + 1))
    assert report["abandoned"] == 1
    job.refresh_from_db()
    assert job.status != Job.Status.QUEUED and job.failed == 3 and "never started" in job.message


def test_the_visibility_timeout_covers_every_task_limit_and_beat_runs_the_sweeper():
    """Redis re-delivers an unacknowledged task only after the longest task could have ended."""
    longest = max(hard for hard, _soft in tasks.TIME_LIMITS.values())
    assert settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] >= longest + 60
    for kind in Job.Kind.values:
        assert job_services.job_deadline_seconds(kind) < settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    schedule = settings.CELERY_BEAT_SCHEDULE["jobs-sweep"]
    assert schedule["task"] == "labeling.tasks.jobs_sweep_task" and schedule["schedule"] <= 60
    assert "labeling.tasks.jobs_sweep_task" in tasks.queue.TASK_NAMES


def test_the_sweeper_runs_from_the_command_line(half_done_run):
    import io

    from django.core.management import call_command

    out = io.StringIO()
    call_command("jobs_sweep", stdout=out)
    assert "gave up 0 job(s)" in out.getvalue()


def test_a_heartbeat_is_written_at_most_every_interval_and_progress_always(project, lead, settings):
    from labeling.services.heartbeat import JobBeat

    job = Job.objects.create(project=project, kind=Job.Kind.EXPORT, status=Job.Status.RUNNING, created_by=lead)
    beat = JobBeat(job.pk, interval=3600)
    beat()
    first = Job.objects.get(pk=job.pk).heartbeat_at
    assert first is not None
    beat()  # within the interval: nothing written
    assert Job.objects.get(pk=job.pk).heartbeat_at == first
    beat(done=3)  # progress is written at once, with a heartbeat
    job.refresh_from_db()
    assert job.done == 3 and job.heartbeat_at > first
    JobBeat(None)()  # no job: nothing to do


def test_only_kinds_that_beat_are_given_up_on_a_stale_heartbeat(settings):
    settings.FAIRTONE = {**settings.FAIRTONE, "JOB_STALE_MINUTES": 7}
    for kind in (Job.Kind.EXPORT, Job.Kind.EVALUATION):
        assert job_services.job_silence_limit_seconds(kind) == 7 * 60
    # A baseline batch writes its results (each a sign of life) within its own 10-minute limit.
    assert job_services.job_silence_limit_seconds(Job.Kind.BASELINE) == job_services.job_deadline_seconds(
        Job.Kind.BASELINE
    )


# --------------------------------------------------------------------------- issue 26: imports a process left


def test_an_import_left_running_by_a_dead_process_is_given_up_with_its_job(project, lead):
    from labeling.models import ImportBatch, Job
    from labeling.services.imports.report import report_start
    from labeling.services.imports.stale import IMPORT_STALE_SECONDS

    report = report_start(project, ImportBatch.Kind.UPLOAD, "photos", lead)  # as an import request starts one
    batch, job = report.batch, report.job
    ImportBatch.objects.filter(pk=batch.pk).update(n_imported=3)
    started = batch.created_at
    # Within the hour it is left alone (a request may be importing).
    assert job_services.jobs_sweep(now=started + timedelta(seconds=IMPORT_STALE_SECONDS - 60))["imports_abandoned"] == 0
    assert ImportBatch.objects.get(pk=batch.pk).status == ImportBatch.Status.RUNNING
    swept = job_services.jobs_sweep(now=started + timedelta(seconds=IMPORT_STALE_SECONDS + 60))
    assert swept["imports_abandoned"] == 1
    batch.refresh_from_db()
    assert batch.status == ImportBatch.Status.FAILED and batch.finished_at is not None
    assert "3 file(s) imported before it stopped" in batch.error and "skipped as duplicates" in batch.error
    job.refresh_from_db()
    assert job.status not in (Job.Status.QUEUED, Job.Status.RUNNING)
    assert (
        job_services.jobs_sweep(now=started + timedelta(seconds=IMPORT_STALE_SECONDS + 120))["imports_abandoned"] == 0
    )


def test_temporary_uploads_a_killed_request_left_are_removed(settings, tmp_path):
    import os
    import time as _time

    from labeling.services.imports.stale import IMPORT_STALE_SECONDS, upload_temp_sweep

    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path)
    old, fresh = tmp_path / "tmpab12.upload.zip", tmp_path / "tmpcd34.upload.png"
    old.write_bytes(b"x" * 100)
    fresh.write_bytes(b"y")
    past = _time.time() - IMPORT_STALE_SECONDS - 10
    os.utime(old, (past, past))
    assert job_services.jobs_sweep()["uploads_removed"] == 1
    assert not old.exists() and fresh.exists()
    assert upload_temp_sweep() == 0
