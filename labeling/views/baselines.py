"""Colorimetric baseline pages and API for project leads (never shown to labelers).

Pages: results with filters and the run form, one image's result over its skin
overlay, the comparison with human labels (plots as PNG/SVG), the runs and their
live progress. API: results, starting a run, the comparison numbers. A request
from anyone but a lead of the project gets 404 (the data's existence is not
disclosed).
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db.models import Count, Max, QuerySet
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.decorators import api_view
from rest_framework.exceptions import NotFound
from rest_framework.exceptions import PermissionDenied as DRFPermissionDenied
from rest_framework.exceptions import ValidationError as DRFValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response

from .. import selectors
from ..api.permissions import LEAD, project_role
from ..api.serializers import JobSerializer
from ..models import ImageBaseline, Job, Label, Membership, Phase, Project
from ..services import baselines as svc


def _lead_project(request, pk: int) -> Project:
    project = get_object_or_404(Project.objects.select_related("scale"), pk=pk)
    try:
        selectors.require_role(request.user, project, Membership.Role.LEAD)
    except PermissionDenied:
        raise Http404 from None
    return project


def _api_lead_project(request, pk: int) -> Project:
    project = get_object_or_404(Project, pk=pk)
    try:
        project_role(request, project, LEAD)
    except DRFPermissionDenied:  # a 403 for other roles would disclose the data exists
        raise NotFound() from None
    return project


def _error_text(exc: ValidationError) -> str:
    if hasattr(exc, "error_dict"):
        return "; ".join(f"{k}: {' '.join(m for e in v for m in e.messages)}" for k, v in exc.error_dict.items())
    return " ".join(exc.messages)


def _filtered(project: Project, params) -> tuple[QuerySet[ImageBaseline], dict[str, str]]:
    """Current results filtered by ``flag``, ``ita_class``, ``status`` (and ``parameters_hash``)."""
    if parameters_hash := params.get("parameters_hash", "").strip():
        qs = ImageBaseline.objects.filter(image__project=project, parameters_hash=parameters_hash)
    else:
        qs = svc.baselines_current(project)
    chosen = {}
    flag = params.get("flag", "").strip()
    if flag:
        if flag == "none":
            qs = qs.filter(status=ImageBaseline.Status.OK, flags=[])
        elif flag in svc.FLAG_NAMES:
            # JSON containment is not portable to SQLite: match the serialised name.
            qs = qs.filter(flags__icontains=f'"{flag}"')
        else:
            raise ValidationError({"flag": f"One of: none, {', '.join(svc.FLAG_NAMES)}."})
        chosen["flag"] = flag
    ita_class = params.get("ita_class", "").strip()
    if ita_class:
        if ita_class not in svc.ITA_CLASS_NAMES:
            raise ValidationError({"ita_class": f"One of: {', '.join(svc.ITA_CLASS_NAMES)}."})
        qs = qs.filter(ita_class=ita_class)
        chosen["ita_class"] = ita_class
    row_status = params.get("status", "").strip()
    if row_status:
        if row_status not in ImageBaseline.Status.values:
            raise ValidationError({"status": f"One of: {', '.join(ImageBaseline.Status.values)}."})
        qs = qs.filter(status=row_status)
        chosen["status"] = row_status
    return qs.select_related("image").order_by("image_id", "-computed_at"), chosen


def baseline_as_dict(row: ImageBaseline) -> dict[str, Any]:
    """The API representation of one result ("apparent" albedo, as everywhere)."""
    stats = row.stats or {}
    return {
        "id": row.id,
        "image_id": row.image_id,
        "external_id": row.image.external_id,
        "status": row.status,
        "error": row.error,
        "ita_median": row.ita_median,
        "ita_q25": stats.get("ita_q25"),
        "ita_q75": stats.get("ita_q75"),
        "ita_iqr": stats.get("ita_iqr"),
        "ita_of_medians": stats.get("ita_of_medians"),
        "lightness_median": row.lightness_median,
        "a_median": stats.get("a_median"),
        "b_median": row.b_median,
        "hue_angle": stats.get("hue_angle"),
        "ita_class": row.ita_class or None,
        "fitzpatrick": stats.get("fitzpatrick"),
        "fitzpatrick_mapping": (row.parameters or {}).get("fitzpatrick_mapping"),
        "skin_fraction": row.skin_fraction,
        "apparent_albedo": row.albedo,
        "apparent_albedo_normalized": row.albedo_normalized,
        "white_luminance": stats.get("white_luminance"),
        "flags": row.flags,
        "parameters": row.parameters,
        "parameters_hash": row.parameters_hash,
        "code_version": row.code_version,
        "job_id": row.job_id,
        "computed_at": row.computed_at,
        "overlay_url": reverse("baseline-overlay", args=[row.id]) if row.overlay else None,
    }


def _phase_choice(project: Project, value: str | None) -> Phase | None:
    if value in (None, "", "all"):
        return None
    if not str(value).isdigit():
        raise ValidationError({"phase": "A phase id of this project, or 'all'."})
    phase = project.phases.filter(pk=int(value)).first()
    if phase is None:
        raise ValidationError({"phase": "A phase id of this project, or 'all'."})
    return phase


def _comparison(project: Project, phase: Phase | None, exclude_flagged: bool) -> dict[str, Any]:
    """The comparison, cached until a label or a current result changes."""
    labels = Label.objects.filter(phase__project=project)
    current = svc.baselines_current(project)
    stamp = (
        labels.aggregate(n=Count("id"), t=Max("updated_at")),
        current.aggregate(n=Count("id"), t=Max("computed_at")),
    )
    raw = f"{project.pk}|{phase.pk if phase else 'all'}|{exclude_flagged}|{stamp}|{svc.BASELINE_CODE_VERSION}"
    key = "baseline-comparison:" + hashlib.sha256(raw.encode()).hexdigest()
    result = cache.get(key)
    if result is None:
        result = svc.baseline_comparison(project=project, phase=phase, exclude_flagged=exclude_flagged)
        cache.set(key, result, 600)
    return result


def _mapping_info(parameters: dict[str, Any]):
    mapping = svc.FITZPATRICK_MAPPINGS[parameters["fitzpatrick_mapping"]]
    return {
        "name": mapping.name,
        "source": mapping.source,
        "table": [{"type": fitz, "above": bound if bound > -1e308 else None} for bound, fitz in mapping.lower_bounds],
    }


# --- pages ------------------------------------------------------------------------


@login_required
@require_GET
def baselines_overview(request, pk: int):
    project = _lead_project(request, pk)
    parameters = svc.baseline_parameters_effective(project)
    try:
        qs, chosen = _filtered(project, request.GET)
    except ValidationError as exc:
        messages.error(request, _error_text(exc))
        qs, chosen = _filtered(project, {})
    page = Paginator(qs, 50).get_page(request.GET.get("page"))
    for row in page:
        row.ita_class_label = row.ita_class.replace("_", " ")
        row.flag_labels = [svc.FLAG_NAMES.get(f, f) for f in row.flags or []]
    summary = svc.baseline_summary(project)
    query = "&".join(f"{k}={v}" for k, v in chosen.items())
    fields = [
        {
            "name": name,
            "value": parameters[name],
            "help": spec[3],
            "min": spec[1],
            "max": spec[2],
            "step": "1" if spec[0] is int else "any",
        }
        for name, spec in svc.PARAMETER_SPECS.items()
    ]
    return render(
        request,
        "labeling/baselines.html",
        {
            "project": project,
            "tab": "results",
            "summary": summary,
            "class_rows": [
                {
                    "name": c,
                    "label": c.replace("_", " "),
                    "range": svc.ITA_CLASS_RANGES[c],
                    "n": summary["classes"].get(c, 0),
                }
                for c in svc.ITA_CLASS_NAMES
            ],
            "page": page,
            "chosen": chosen,
            "query": query,
            "flag_names": svc.FLAG_NAMES,
            "ita_classes": svc.ITA_CLASS_NAMES,
            "fields": fields,
            "parameters": parameters,
            "parameters_hash": svc.baseline_parameters_hash(parameters),
            "code_version": svc.BASELINE_CODE_VERSION,
            "mappings": svc.FITZPATRICK_MAPPINGS.values(),
            "mapping": _mapping_info(parameters),
            "jobs": project.jobs.filter(kind=Job.Kind.BASELINE)[:5],
        },
    )


@login_required
@require_POST
def baselines_run(request, pk: int):
    project = _lead_project(request, pk)
    names = [*svc.PARAMETER_SPECS, "fitzpatrick_mapping"]
    overrides = {n: request.POST[n].strip() for n in names if request.POST.get(n, "").strip()}
    try:
        job = svc.baseline_run_start(project=project, parameters=overrides, user=request.user)
    except ValidationError as exc:
        messages.error(request, f"The run was not started: {_error_text(exc)}")
        return redirect("baselines", pk=project.pk)
    messages.success(request, f"Baseline run {job.pk} started over {job.total} images.")
    return redirect("baseline-job", pk=project.pk, job_id=job.pk)


@login_required
@require_GET
def baseline_image(request, pk: int, image_id: int):
    project = _lead_project(request, pk)
    image = get_object_or_404(project.images.select_related("subject"), pk=image_id)
    current_hash = svc.baseline_parameters_hash(svc.baseline_parameters_effective(project))
    rows = list(image.baselines.order_by("-computed_at"))
    current = next(
        (r for r in rows if r.parameters_hash == current_hash and r.code_version == svc.BASELINE_CODE_VERSION),
        None,
    )
    mapping = _mapping_info(current.parameters) if current and current.parameters.get("fitzpatrick_mapping") else None
    return render(
        request,
        "labeling/baselines_image.html",
        {
            "project": project,
            "tab": "results",
            "image": image,
            "current": current,
            "data": baseline_as_dict(current) if current else None,
            "others": [r for r in rows if r is not current],
            "mapping": mapping,
            "flag_names": svc.FLAG_NAMES,
        },
    )


@login_required
@require_GET
def baseline_overlay(request, pk: int):
    row = get_object_or_404(ImageBaseline.objects.select_related("image"), pk=pk)
    _lead_project(request, row.image.project_id)
    if not row.overlay:
        raise Http404
    try:
        handle = row.overlay.open("rb")
    except FileNotFoundError:
        raise Http404 from None
    response = FileResponse(handle, content_type="image/png")
    response["Cache-Control"] = "private, max-age=3600"
    response["X-Content-Type-Options"] = "nosniff"
    return response


@login_required
@require_GET
def baselines_compare(request, pk: int):
    project = _lead_project(request, pk)
    phases = list(project.phases.order_by("id"))
    try:
        phase = _phase_choice(project, request.GET.get("phase"))
    except ValidationError as exc:
        messages.error(request, _error_text(exc))
        phase = None
    exclude_flagged = request.GET.get("exclude_flagged") == "1"
    comparison = _comparison(project, phase, exclude_flagged)
    flag_labels = {p["image_id"]: [svc.FLAG_NAMES.get(f, f) for f in p["flags"]] for p in comparison["disagreements"]}
    query = f"phase={phase.pk if phase else 'all'}&exclude_flagged={int(exclude_flagged)}"
    measures = [
        ("ITA (median over skin pixels)", comparison["correlations"]["ita"]),
        ("Apparent albedo (mean relative luminance Y of skin)", comparison["correlations"]["apparent_albedo"]),
        ("Apparent albedo normalised by the image white", comparison["correlations"]["apparent_albedo_normalized"]),
    ]
    by_tone = []
    for tone, values in comparison["by_tone"].items():
        ordered = sorted(values)
        by_tone.append(
            {
                "tone": tone,
                "n": len(values),
                "median": ordered[len(ordered) // 2]
                if len(ordered) % 2
                else (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2,
                "min": ordered[0],
                "max": ordered[-1],
            }
        )
    return render(
        request,
        "labeling/baselines_compare.html",
        {
            "project": project,
            "tab": "compare",
            "phases": phases,
            "phase": phase,
            "exclude_flagged": exclude_flagged,
            "comparison": comparison,
            "measures": measures,
            "by_tone": by_tone,
            "disagreements": [{**p, "flag_labels": flag_labels[p["image_id"]]} for p in comparison["disagreements"]],
            "query": query,
            "summary": svc.baseline_summary(project),
        },
    )


@login_required
@require_GET
def baselines_plot(request, pk: int, plot: str, fmt: str):
    project = _lead_project(request, pk)
    if plot not in svc.PLOT_KINDS or fmt not in svc.PLOT_FORMATS:
        raise Http404
    try:
        phase = _phase_choice(project, request.GET.get("phase"))
    except ValidationError:
        raise Http404 from None
    exclude_flagged = request.GET.get("exclude_flagged") == "1"
    comparison = _comparison(project, phase, exclude_flagged)
    content = svc.baseline_plot(comparison, kind=plot, fmt=fmt, scale_name=project.scale.name)
    response = HttpResponse(content, content_type=svc.PLOT_FORMATS[fmt])
    name = f"fairtone-project{project.pk}-{'phase' + str(phase.pk) if phase else 'all'}-{plot}.{fmt}"
    disposition = "attachment" if request.GET.get("download") else "inline"
    response["Content-Disposition"] = f'{disposition}; filename="{name}"'
    response["Cache-Control"] = "private, no-cache"
    response["X-Content-Type-Options"] = "nosniff"
    return response


@login_required
@require_GET
def baseline_jobs(request, pk: int):
    project = _lead_project(request, pk)
    page = Paginator(project.jobs.filter(kind=Job.Kind.BASELINE), 25).get_page(request.GET.get("page"))
    return render(request, "labeling/baselines_jobs.html", {"project": project, "page": page, "tab": "jobs"})


@login_required
@require_GET
def baseline_job(request, pk: int, job_id: int):
    project = _lead_project(request, pk)
    job = get_object_or_404(project.jobs.filter(kind=Job.Kind.BASELINE), pk=job_id)
    options = job.parameters.get("options", {})
    return render(
        request,
        "labeling/baselines_job.html",
        {
            "project": project,
            "tab": "jobs",
            "job": job,
            "options": options,
            "is_running": job.status in (Job.Status.QUEUED, Job.Status.RUNNING),
        },
    )


@login_required
@require_POST
def baseline_job_retry(request, pk: int, job_id: int):
    project = _lead_project(request, pk)
    job = get_object_or_404(project.jobs.filter(kind=Job.Kind.BASELINE), pk=job_id)
    try:
        new = svc.baseline_retry_failed(job=job, user=request.user)
    except ValidationError as exc:
        messages.error(request, _error_text(exc))
        return redirect("baseline-job", pk=project.pk, job_id=job.pk)
    messages.success(request, f"Retrying the {new.total} failed images of run {job.pk} as run {new.pk}.")
    return redirect("baseline-job", pk=project.pk, job_id=new.pk)


# --- API --------------------------------------------------------------------------


@extend_schema(
    parameters=[
        OpenApiParameter("flag", str, description="Only results with this quality flag"),
        OpenApiParameter("ita_class", str, description="Only results of this ITA class"),
    ],
    responses=OpenApiTypes.OBJECT,
)
@api_view(["GET"])
def api_baselines(request, pk: int):
    """Results for the project's current parameters (or ``?parameters_hash=``).

    Filters: ``flag`` (a flag name, or ``none``), ``ita_class``, ``status`` (ok/failed).
    """
    project = _api_lead_project(request, pk)
    try:
        qs, _chosen = _filtered(project, request.query_params)
    except ValidationError as exc:
        raise DRFValidationError(exc.message_dict) from None
    paginator = PageNumberPagination()
    page = paginator.paginate_queryset(qs, request)
    response = paginator.get_paginated_response([baseline_as_dict(r) for r in page])
    parameters = svc.baseline_parameters_effective(project)
    response.data["parameters"] = parameters
    response.data["parameters_hash"] = svc.baseline_parameters_hash(parameters)
    response.data["code_version"] = svc.BASELINE_CODE_VERSION
    response.data["fitzpatrick_mapping_source"] = svc.FITZPATRICK_MAPPINGS[parameters["fitzpatrick_mapping"]].source
    return response


@extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT)
@api_view(["POST"])
def api_baselines_run(request, pk: int):
    """Start a run: ``{"parameters": {...}, "image_ids": [...]}`` (both optional). 202 with the job."""
    project = _api_lead_project(request, pk)
    data = request.data if isinstance(request.data, dict) else None
    if data is None:
        raise DRFValidationError({"detail": "Send a JSON object."})
    unknown = set(data) - {"parameters", "image_ids"}
    if unknown:
        raise DRFValidationError({k: "Unknown field (use parameters, image_ids)." for k in sorted(unknown)})
    image_ids = data.get("image_ids")
    if image_ids is not None and (
        not isinstance(image_ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in image_ids)
    ):
        raise DRFValidationError({"image_ids": "A list of image ids (integers)."})
    try:
        job = svc.baseline_run_start(
            project=project, parameters=data.get("parameters"), image_ids=image_ids, user=request.user
        )
    except ValidationError as exc:
        raise DRFValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages) from None
    job.refresh_from_db()
    payload = JobSerializer(job).data
    payload["url"] = reverse("job-detail", args=[job.pk])
    return Response(payload, status=status.HTTP_202_ACCEPTED)


@extend_schema(
    parameters=[OpenApiParameter("phase", str, description="Phase id, or all (default)")],
    responses=OpenApiTypes.OBJECT,
)
@api_view(["GET"])
def api_baselines_comparison(request, pk: int):
    """Mean human label vs ITA and apparent albedo: ``?phase=<id>|all&exclude_flagged=1``."""
    project = _api_lead_project(request, pk)
    try:
        phase = _phase_choice(project, request.query_params.get("phase"))
    except ValidationError as exc:
        raise DRFValidationError(exc.message_dict) from None
    exclude_flagged = request.query_params.get("exclude_flagged") in ("1", "true")
    return Response(_comparison(project, phase, exclude_flagged))
