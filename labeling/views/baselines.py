"""Colorimetric baseline pages for project leads (never shown to labelers; the API: ``api.views.dashboards``).

Results with filters and the run form, one image's result over its skin overlay,
the comparison with human labels (plots as PNG/SVG), the runs and their live
progress. A request from anyone but a lead of the project gets 404 (the data's
existence is not disclosed).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from .. import plots, selectors
from ..colorimetry import skin_detector_evaluation
from ..errors import error_text
from ..models import ImageBaseline, Job, Membership
from ..services import baselines as svc
from ..services.baselines.comparison import BASELINE_PLOT_CACHE_PREFIX
from .access import page_project


def _lead_project(request, pk: int):
    project, _ = page_project(request, pk, Membership.Role.LEAD)
    return project


def _mapping_info(parameters: dict[str, Any]):
    mapping = svc.FITZPATRICK_MAPPINGS[parameters["fitzpatrick_mapping"]]
    return {
        "name": mapping.name,
        "source": mapping.source,
        "table": [{"type": fitz, "above": bound if bound > -1e308 else None} for bound, fitz in mapping.lower_bounds],
    }


#: The evaluation sets shown on the baselines page, in order, and what each is.
EVALUATION_SETS = {
    "development": "development (astronaut)",
    "held_out": "held out",
    "held_out_2": "second held-out set",
    "camera": "second recolouring model",
}
#: The detectors compared on the page: the default, then the cascades (its fallback).
EVALUATION_DETECTORS = ("landmarks_or_face", "face")


def _detector_evaluation() -> dict[str, Any]:
    """The stored per-tone figures of the landmark model and the cascades, every set side by side."""
    figures = skin_detector_evaluation()
    sets = figures["sets"]
    rows = []
    for tone in range(1, 11):
        cells = []
        for name in EVALUATION_SETS:
            for detector in EVALUATION_DETECTORS:
                (found,) = [r for r in sets[name][detector] if r["tone"] == tone]
                cells.append({"set": name, "detector": detector, **found})
        rows.append({"tone": tone, "cells": cells})
    totals = []
    for name, title in EVALUATION_SETS.items():
        for detector in EVALUATION_DETECTORS:
            tone_rows = sets[name][detector]
            totals.append(
                {
                    "set": name,
                    "title": title,
                    "detector": detector,
                    "cases": sum(r["cases"] for r in tone_rows),
                    "measured": sum(r["measured"] for r in tone_rows),
                    "within": sum(r["within"] for r in tone_rows),
                }
            )
    return {**figures, "rows": rows, "totals": totals, "set_titles": EVALUATION_SETS}


# --- pages ------------------------------------------------------------------------


@login_required
@require_GET
def baselines_overview(request, pk: int):
    project = _lead_project(request, pk)
    parameters = svc.baseline_parameters_effective(project)
    try:
        qs, chosen = selectors.baseline_rows(project, request.GET)
    except ValidationError as exc:
        messages.error(request, error_text(exc))
        qs, chosen = selectors.baseline_rows(project, {})
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
            "skin_detectors": svc.SKIN_DETECTOR_CHOICES,
            "mapping": _mapping_info(parameters),
            "evaluation": _detector_evaluation(),
            "audit": selectors.baseline_audit_cached(project),
            "jobs": project.jobs.filter(kind=Job.Kind.BASELINE)[:5],
        },
    )


@login_required
@require_POST
def baselines_run(request, pk: int):
    project = _lead_project(request, pk)
    if request.POST.get("only_without_current") == "1":
        try:
            job = svc.baseline_run_outdated(project=project, user=request.user)
        except ValidationError as exc:
            messages.error(request, f"The run was not started: {error_text(exc)}")
            return redirect("baselines", pk=project.pk)
        if job is None:
            messages.info(request, "Every image already has a result for the current method and parameters.")
            return redirect("baselines", pk=project.pk)
        messages.success(
            request, f"Baseline run {job.pk} started over the {job.total} images without a current result."
        )
        return redirect("baseline-job", pk=project.pk, job_id=job.pk)
    names = [*svc.PARAMETER_SPECS, "fitzpatrick_mapping", "skin_detector"]
    overrides = {n: request.POST[n].strip() for n in names if request.POST.get(n, "").strip()}
    try:
        job = svc.baseline_run_start(project=project, parameters=overrides, user=request.user)
    except ValidationError as exc:
        messages.error(request, f"The run was not started: {error_text(exc)}")
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
            "data": selectors.baseline_record(current) if current else None,
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
        phase = selectors.baseline_phase_choice(project, request.GET.get("phase"))
    except ValidationError as exc:
        messages.error(request, error_text(exc))
        phase = None
    # Flagged images are left out unless asked for (a flagged number may not be skin).
    exclude_flagged = request.GET.get("exclude_flagged", "1") != "0"
    comparison = selectors.baseline_comparison_cached(project, phase, exclude_flagged, with_points=False)
    other = selectors.baseline_comparison_cached(project, phase, not exclude_flagged, with_points=False)
    flag_labels = {p["image_id"]: [svc.FLAG_NAMES.get(f, f) for f in p["flags"]] for p in comparison["disagreements"]}
    query = f"phase={phase.pk if phase else 'all'}&exclude_flagged={int(exclude_flagged)}"
    names = {
        "ita": "ITA (median over skin pixels)",
        "apparent_albedo": "Apparent albedo (mean relative luminance Y of skin)",
        "apparent_albedo_normalized": "Apparent albedo normalised by the image white",
    }
    measures = [(names[m], comparison["correlations"][m], other["correlations"][m]) for m in svc.COMPARISON_MEASURES]
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
            "other": other,
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
    if plot not in plots.PLOT_KINDS or fmt not in plots.PLOT_FORMATS:
        raise Http404
    try:
        phase = selectors.baseline_phase_choice(project, request.GET.get("phase"))
    except ValidationError:
        raise Http404 from None
    exclude_flagged = request.GET.get("exclude_flagged", "1") != "0"
    # The plot of a 100,000-image comparison takes seconds to draw: cached with the comparison's version.
    slim = selectors.baseline_comparison_cached(project, phase, exclude_flagged, with_points=False)
    key = (
        f"{BASELINE_PLOT_CACHE_PREFIX}:{project.pk}:{phase.pk if phase else 'all'}:{int(exclude_flagged)}:{plot}.{fmt}"
    )
    key += f":{slim['freshness']['version']}"
    content = cache.get(key)
    if content is None:
        comparison = selectors.baseline_comparison_cached(project, phase, exclude_flagged)
        content = plots.baseline_plot(comparison, kind=plot, fmt=fmt, scale_name=project.scale.name)
        cache.set(key, content, 7 * 24 * 3600)
    response = HttpResponse(content, content_type=plots.PLOT_FORMATS[fmt])
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
        messages.error(request, error_text(exc))
        return redirect("baseline-job", pk=project.pk, job_id=job.pk)
    messages.success(request, f"Retrying the {new.total} failed images of run {job.pk} as run {new.pk}.")
    return redirect("baseline-job", pk=project.pk, job_id=new.pk)


# --- the audit on the project's own photos and the mask sample (issue 21) --------------------------


def _percent(share: dict[str, Any] | None) -> str:
    """ "61% [48, 73] (37/61)" from a share with its interval; "—" without images."""
    if not share or share.get("value") is None:
        return "—"
    return (
        f"{round(100 * share['value'])}% [{round(100 * share['ci_low'])}, {round(100 * share['ci_high'])}] "
        f"({share['k']}/{share['n']})"
    )


def _rho(result: dict[str, Any]) -> str:
    if result.get("rho") is None:
        return f"— (n = {result.get('n', 0)})"
    if result.get("ci_low") is None:
        return f"{result['rho']:.2f} (n = {result['n']})"
    return f"{result['rho']:.2f} [{result['ci_low']:.2f}, {result['ci_high']:.2f}] (n = {result['n']})"


@login_required
@require_GET
def baselines_audit(request, pk: int):
    project, membership = page_project(request, pk, Membership.Role.LEAD, Membership.Role.REVIEWER)
    audit = selectors.baseline_audit_cached(project)
    for row in audit["by_tone"]:
        row["coverage_text"] = _percent(row["coverage"])
    for band in audit["by_band"]:
        band["coverage_text"] = _percent(band["coverage"])
        band["rho_text"] = _rho(band["rank_agreement"])
    validation = audit["mask_validation"]
    if validation:
        for row in validation["by_tone"]:
            row["coverage_text"] = _percent(row["coverage"])
            row["within_text"] = _percent(row["within"])
    is_lead = request.user.is_superuser or (membership is not None and membership.role == Membership.Role.LEAD)
    return render(
        request,
        "labeling/baselines_audit.html",
        {
            "project": project,
            "tab": "audit",
            "audit": audit,
            "gap": audit["gap"],
            "gap_light": _percent(audit["gap"]["light"]),
            "gap_deep": _percent(audit["gap"]["deep"]),
            "rho_all": _rho(audit["rank_agreement"]),
            "validation": validation,
            "is_lead": is_lead,
            "default_per_tone": svc.DEFAULT_PER_TONE,
            "max_per_tone": svc.MAX_PER_TONE,
        },
    )


@login_required
@require_POST
def baselines_mask_sample(request, pk: int):
    project = _lead_project(request, pk)
    try:
        sample = svc.mask_sample_propose(
            project=project,
            user=request.user,
            per_tone=request.POST.get("per_tone", svc.DEFAULT_PER_TONE),
            seed=request.POST.get("seed") or None,
        )
    except ValidationError as exc:
        messages.error(request, f"No sample was drawn: {error_text(exc)}")
        return redirect("baselines-audit", pk=project.pk)
    messages.success(
        request,
        f"Mask sample {sample.pk}: {sample.items.count()} images, up to {sample.per_tone} per labelled tone "
        f"(seed {sample.seed}). Draw a skin polygon on each, or import their skin masks.",
    )
    return redirect("baselines-audit", pk=project.pk)


@login_required
@require_GET
def baselines_mask_item(request, pk: int, item_id: int):
    project = _lead_project(request, pk)
    item = selectors.mask_sample_item(project, item_id)
    items = list(item.sample.items.order_by("tone", "id").values_list("id", flat=True))
    position = items.index(item.pk)
    return render(
        request,
        "labeling/baselines_mask.html",
        {
            "project": project,
            "tab": "audit",
            "item": item,
            "image": item.image,
            "polygon_json": item.polygon or [],
            "has_silhouette": bool(item.image.mask) and item.image.mask_kind != "skin",
            "previous_id": items[position - 1] if position > 0 else None,
            "next_id": items[position + 1] if position + 1 < len(items) else None,
            "position": position + 1,
            "n_items": len(items),
        },
    )
