"""The project's jobs page (leads): every background job, what it works on, its progress, failures and retry.

Import jobs (display images and baselines of the imported images), baseline runs, dataset
releases and evaluation runs, newest first, each linked to what it made; an import job or a
baseline run with failed images can be retried here. A request from anyone but a lead of
the project gets 404.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from ..errors import error_text
from ..models import EvaluationRun, ImportBatch, Job, Membership, Release
from ..services import baselines as baseline_services
from ..services import image_jobs
from .access import page_project

ACTIVE = (Job.Status.QUEUED, Job.Status.RUNNING)
#: What each kind of job is, in the words of this page (a derivatives job also makes the baselines).
KIND_LABELS = {
    Job.Kind.DERIVATIVES: "Imports: display images and baselines",
    Job.Kind.BASELINE: "Baseline runs",
    Job.Kind.EXPORT: "Dataset releases",
    Job.Kind.EVALUATION: "Evaluation runs",
}


def _subjects(project, jobs) -> dict[int, tuple[str, str]]:
    """Each job's (title, link to what it works on)."""
    ids = [j.pk for j in jobs]
    batches = ImportBatch.objects.in_bulk(
        [j.parameters.get("import_batch") for j in jobs if j.kind == Job.Kind.DERIVATIVES]
    )
    releases = {r.job_id: r for r in Release.objects.filter(job_id__in=ids).only("job_id", "version")}
    runs = {r.job_id: r for r in EvaluationRun.objects.filter(job_id__in=ids).only("job_id", "name")}
    subjects = {}
    for job in jobs:
        if job.kind == Job.Kind.DERIVATIVES:
            batch = batches.get(job.parameters.get("import_batch"))
            title = (
                f"Import #{batch.pk} ({batch.get_kind_display().lower()}): display images and baselines"
                if batch
                else "Imported images: display images and baselines"
            )
            url = reverse("import-report", args=[project.pk, batch.pk]) if batch else ""
        elif job.kind == Job.Kind.BASELINE:
            title = f"Baseline run {job.pk}"
            url = reverse("baseline-job", args=[project.pk, job.pk])
        elif job.pk in releases:
            title = f"Release v{releases[job.pk].version}"
            url = reverse("release-page", args=[project.pk, releases[job.pk].version])
        elif job.pk in runs:
            title = f"Evaluation {runs[job.pk].name}"
            url = reverse("evaluation-page", args=[project.pk, runs[job.pk].pk])
        else:
            title, url = job.get_kind_display(), ""
        subjects[job.pk] = (title, url)
    return subjects


def _retryable(job: Job) -> bool:
    if job.status in ACTIVE:
        return False
    if job.kind == Job.Kind.DERIVATIVES:
        return job.status == Job.Status.FAILED or job.failed > 0 or job.done + job.failed < job.total
    return job.kind == Job.Kind.BASELINE and job.failed > 0


@login_required
@require_GET
def project_jobs(request, pk: int):
    project, _ = page_project(request, pk, Membership.Role.LEAD)
    kinds = {k for k in request.GET.getlist("kind") if k in Job.Kind.values}
    jobs = project.jobs.select_related("created_by")
    if kinds:
        jobs = jobs.filter(kind__in=kinds)
    page = Paginator(jobs, 25).get_page(request.GET.get("page"))
    # An import job is recounted from its images: the page never shows a count its last task skipped.
    rows = [
        image_jobs.image_job_refresh(j.pk, alive=False) or j
        if j.kind == Job.Kind.DERIVATIVES and j.status in ACTIVE
        else j
        for j in page
    ]
    subjects = _subjects(project, rows)
    return render(
        request,
        "labeling/jobs.html",
        {
            "project": project,
            "page": page,
            "rows": [(j, *subjects[j.pk], _retryable(j)) for j in rows],
            "kinds": [(kind, KIND_LABELS.get(kind, label)) for kind, label in Job.Kind.choices],
            "chosen": kinds,
            "any_active": any(j.status in ACTIVE for j in rows),
        },
    )


@login_required
@require_GET
def project_job(request, pk: int, job_id: int):
    project, _ = page_project(request, pk, Membership.Role.LEAD)
    job = get_object_or_404(project.jobs.select_related("created_by"), pk=job_id)
    if job.kind == Job.Kind.DERIVATIVES and job.status in ACTIVE:
        job = image_jobs.image_job_refresh(job.pk, alive=False) or job
    title, url = _subjects(project, [job])[job.pk]
    return render(
        request,
        "labeling/job_detail.html",
        {
            "project": project,
            "job": job,
            "title": title,
            "kind_label": KIND_LABELS.get(job.kind, job.get_kind_display()),
            "url": url,
            "retryable": _retryable(job),
            "is_running": job.status in ACTIVE,
        },
    )


@login_required
@require_POST
def project_job_retry(request, pk: int, job_id: int):
    project, _ = page_project(request, pk, Membership.Role.LEAD)
    job = get_object_or_404(project.jobs, pk=job_id)
    if not _retryable(job):
        messages.error(request, "There is nothing to retry in this job.")
        return redirect("project-job", pk=project.pk, job_id=job.pk)
    if job.kind == Job.Kind.BASELINE:
        try:
            new = baseline_services.baseline_retry_failed(job=job, user=request.user)
        except ValidationError as exc:
            messages.error(request, error_text(exc))
            return redirect("project-job", pk=project.pk, job_id=job.pk)
        messages.success(request, f"Retrying the {new.total} failed images of run {job.pk} as run {new.pk}.")
        return redirect("project-job", pk=project.pk, job_id=new.pk)
    try:
        n = image_jobs.image_job_retry(job=job)
    except ValidationError as exc:
        messages.error(request, error_text(exc))
        return redirect("project-job", pk=project.pk, job_id=job.pk)
    if n:
        messages.success(request, f"Retrying {n} images.")
    else:
        messages.info(request, "Every image of this import is finished: nothing to retry.")
    return redirect("project-job", pk=project.pk, job_id=job.pk)
