"""Issue 14: the background work after an import is a job a lead can see, with progress, failures and retry.

Before, the display images and baselines of imported images ran as untracked tasks: the project's
jobs (``/api/projects/N/jobs/`` and the jobs page) stayed empty while they ran or failed.
"""

import io
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from labeling.models import Image, ImageBaseline, Job
from labeling.services import image_jobs
from labeling.services import images as image_services
from labeling.services import jobs as job_services
from labeling.services.imports import import_files
from tests.factories import png_bytes

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def in_process(monkeypatch):
    """Tasks run in this process, in the test's transaction (the embedded default), in both CI stages."""
    from tests.labeling.helpers import run_tasks_here

    run_tasks_here(monkeypatch)


def upload(project, lead, n, *, start=0):
    files = [(f"p{i}.png", io.BytesIO(png_bytes(colour=(100 + i, 90, 80)))) for i in range(start, start + n)]
    return import_files(project=project, files=files, user=lead)


def test_an_import_is_one_job_counting_each_image_once(project, lead, client_for, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        batch = upload(project, lead, 3)
    response = client_for(lead).get(f"/api/projects/{project.id}/jobs/")
    assert response.status_code == 200
    jobs = response.json()["results"]
    assert [j["kind"] for j in jobs] == ["derivatives"]
    job = jobs[0]
    assert job["status"] == "done" and job["total"] == 3 and job["done"] + job["failed"] == 3
    assert job["parameters"]["import_batch"] == batch.pk
    assert job["parameters"]["runs"] == "in-process"
    assert job["started_at"] and job["finished_at"]
    assert Image.objects.filter(project=project, derivative_status="ready").count() == 3
    assert ImageBaseline.objects.filter(image__project=project).count() == 3


def test_tasks_that_run_twice_count_nothing_twice(project, lead, django_capture_on_commit_callbacks):
    from labeling import tasks

    with django_capture_on_commit_callbacks(execute=True):
        upload(project, lead, 2)
    job = Job.objects.get(project=project)
    image = Image.objects.filter(project=project).first()
    tasks.image_make_derivatives_task.apply(args=[image.id, job.id])
    job.refresh_from_db()
    assert (job.status, job.total, job.done + job.failed) == (Job.Status.DONE, 2, 2)


def test_an_import_of_nothing_leaves_no_job(project, lead, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        batch = import_files(project=project, files=[("notes.txt", io.BytesIO(b"hello"))], user=lead)
    assert batch.n_imported == 0
    assert not Job.objects.filter(project=project).exists()


def test_a_failed_display_image_is_listed_and_retried_from_the_jobs_page(
    project, lead, monkeypatch, django_capture_on_commit_callbacks
):
    real = image_services.image_make_derivatives

    def broken(*, image):
        image.derivative_status = Image.DerivativeStatus.FAILED
        image.derivative_error = "could not make the display image: disk full"
        image.save(update_fields=["derivative_status", "derivative_error"])

    import labeling.tasks as tasks

    monkeypatch.setattr(tasks, "image_make_derivatives", broken)
    with django_capture_on_commit_callbacks(execute=True):
        upload(project, lead, 2)
    job = Job.objects.get(project=project)
    assert (job.status, job.total, job.failed) == (Job.Status.DONE, 2, 2)
    assert all("display image: could not make the display image: disk full" in f["reason"] for f in job.failures)
    assert {f["external_id"] for f in job.failures} == {"p0", "p1"}

    client = Client()
    client.force_login(lead)
    page = client.get(f"/projects/{project.id}/jobs/").content.decode()
    assert f"/projects/{project.id}/jobs/{job.id}/" in page and "Import" in page
    detail = client.get(f"/projects/{project.id}/jobs/{job.id}/").content.decode()
    assert "disk full" in detail and "Retry" in detail

    monkeypatch.setattr(tasks, "image_make_derivatives", real)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/projects/{project.id}/jobs/{job.id}/retry/")
    assert response.status_code == 302
    job.refresh_from_db()
    assert (job.status, job.done, job.failed, job.failures) == (Job.Status.DONE, 2, 0, [])
    assert job.parameters["retries"] == 1


def test_a_lost_import_job_is_sent_again_then_given_up(project, lead, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):  # no task ever runs (the broker lost them)
        upload(project, lead, 2)
    job = Job.objects.get(project=project)
    assert (job.status, job.total, job.done) == (Job.Status.QUEUED, 2, 0)
    later = timezone.now() + timedelta(seconds=job_services.QUEUED_RESEND_SECONDS + 60)
    with django_capture_on_commit_callbacks(execute=True):
        assert job_services.jobs_sweep(now=later)["resent"] == 1
    job.refresh_from_db()
    assert (job.status, job.done + job.failed) == (Job.Status.DONE, 2)


def test_a_silent_running_import_job_is_given_up_and_retryable(project, lead, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        upload(project, lead, 2)
    job = Job.objects.get(project=project)
    Job.objects.filter(pk=job.pk).update(status=Job.Status.RUNNING, started_at=timezone.now())
    later = timezone.now() + timedelta(seconds=job_services.job_deadline_seconds(Job.Kind.DERIVATIVES) + 5)
    assert job_services.jobs_sweep(now=later)["abandoned"] == 1
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED and "worker was lost" in job.message
    with django_capture_on_commit_callbacks(execute=True):
        assert image_jobs.image_job_retry(job=job) == 2
    job.refresh_from_db()
    assert (job.status, job.done + job.failed) == (Job.Status.DONE, 2)
