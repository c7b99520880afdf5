"""Evaluation pages: upload a model's results against a release, the runs and a model's history, the gates,
one run's report with the seed's figures, and two runs compared.

Leads and reviewers see and create runs; labelers and anyone else get 404 (the pages' access rule); only
leads edit gates. The API of the same: ``api.views.evaluations``.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import FileResponse, Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from metrics.gate import FAIL_ON_TEXT

from ..errors import error_fields, error_text
from ..models import EvaluationRun, Membership, Release
from ..services import evaluations as svc
from ..services.media_files import storage_reader
from .access import page_access, page_project

READERS = (Membership.Role.LEAD, Membership.Role.REVIEWER)
OPTION_FIELDS = [
    ("threshold", "Error threshold", "Seed 000: 2 (mm of boundary error); 0.1 for a classification's error rate."),
    ("alpha", "Significance level", "0.05"),
    ("cluster_error_threshold", "Cluster error threshold", "Empty: the error threshold."),
    ("min_samples", "DBSCAN min_samples", "Not given by seed 000; 10 here, with the flagged count at 5 and 20."),
    ("permutations", "Permutations of the intersectional null", "199; 0 for none."),
    ("gender_column", "Gender attribute", "Empty: 'gender' if the release has it; 'none' to leave it out."),
    (
        "body_shape_column",
        "Body-shape attribute",
        "Empty: the first attribute named like 'body'; 'none' to leave it out. Numbers are scored along their "
        "range, text as groups.",
    ),
    (
        "cluster",
        "Cluster by (people)",
        "auto: by subject whenever a subject has several photos; none; or a text attribute naming each person.",
    ),
    ("groups", "Disaggregate by", "Text attributes, comma-separated; empty: gender and up to two more."),
]


def _run_get(project, pk: int) -> EvaluationRun:
    run = project.evaluations.select_related("release", "job", "project__scale").filter(pk=pk).first()
    if run is None:
        raise Http404("No such evaluation run.")
    return run


def _list_context(project, membership, form: dict | None = None) -> dict:
    runs = list(project.evaluations.select_related("release", "job").order_by("-created_at", "-id")[:200])
    releases = list(project.releases.filter(status=Release.Status.PUBLISHED).order_by("-version"))
    models = sorted({r.model_name for r in runs if r.model_name})
    categorical, numeric = svc.release_attributes(releases[0]) if releases else ([], [])
    return {
        "project": project,
        "is_lead": membership is None or membership.role == Membership.Role.LEAD,
        "runs": runs,
        "done_runs": [r for r in runs if r.status == EvaluationRun.Status.DONE],
        "releases": releases,
        "models": models,
        "gates": list(project.evaluation_gates.all()),
        "fail_on_choices": list(FAIL_ON_TEXT.items()),
        "option_fields": OPTION_FIELDS,
        "form": form or {},
        "attributes": {"text": categorical, "numeric": numeric},
        "match_columns": svc.MATCH_COLUMNS,
    }


@login_required
@require_http_methods(["GET", "POST"])
def evaluations_page(request, pk: int):
    """The runs, the upload form, a model's history and the project's gates."""
    project, membership = page_project(request, pk, *READERS)
    if request.method == "GET":
        context = _list_context(project, membership)
        model = request.GET.get("model")
        if model:
            context["history_model"] = model
            context["history"] = svc.model_history(project, model)
        return render(request, "labeling/evaluations.html", context)
    data = request.POST
    form = {k: data.get(k, "") for k in data}
    release = None
    if data.get("release", "").isdigit():
        release = project.releases.filter(version=int(data["release"])).first()
    options = {name: data.get(name, "") for name, _, _ in OPTION_FIELDS if data.get(name, "") != ""}
    spec = svc.JoinSpec(
        id_column=data.get("id_column", "").strip(),
        match_on=data.get("match_on", "").strip(),
        error_column=data.get("error_column", "").strip() or "error",
        prediction_column=data.get("prediction_column", "").strip() if data.get("error_from") == "derived" else "",
        truth_column=data.get("truth_column", "").strip() if data.get("error_from") == "derived" else "",
        error_kind=data.get("error_kind", "regression"),
        min_matched=int(data["min_matched"]) if data.get("min_matched", "").isdigit() else 20,
    )
    try:
        run = svc.evaluation_create(
            project=project,
            user=request.user,
            release=release,
            upload=request.FILES.get("file"),
            name=data.get("name", ""),
            model_name=data.get("model_name", ""),
            spec=spec,
            options=options,
        )
    except ValidationError as exc:
        context = _list_context(project, membership, form)
        context["errors"] = error_fields(exc)
        context["join"] = getattr(exc, "join", None)
        messages.error(request, "Nothing was stored: " + error_text(exc))
        return render(
            request, "labeling/evaluations.html", context, status=413 if getattr(exc, "too_large", False) else 400
        )
    run.refresh_from_db()
    messages.success(
        request,
        f"{run.join['matched']} of {run.join['n_results']} results matched release v{run.release.version}; "
        + ("the report is ready." if run.status == EvaluationRun.Status.DONE else "the report is being computed."),
    )
    return redirect("evaluation-page", pk=project.pk, run_id=run.pk)


@login_required
@require_POST
def evaluation_gate_create_page(request, pk: int):
    project, _ = page_project(request, pk, Membership.Role.LEAD)
    max_score = {a: request.POST.get(f"max_{a}", "") for a in ("gender", "body_shape", "skin_tone", "intersectional")}
    try:
        gate = svc.gate_create(
            project,
            request.user,
            request.POST.get("gate_name", ""),
            {"fail_on": request.POST.getlist("fail_on"), "max_score": max_score},
        )
    except ValidationError as exc:
        messages.error(request, "No gate was added: " + error_text(exc))
    else:
        messages.success(request, f"Gate {gate.name!r} added: every run is now checked against it.")
    return redirect("evaluations", pk=project.pk)


@login_required
@require_POST
def evaluation_gate_delete_page(request, pk: int, gate_id: int):
    project, _ = page_project(request, pk, Membership.Role.LEAD)
    try:
        svc.gate_delete(project, gate_id)
    except ValidationError as exc:
        messages.error(request, "The gate was kept: " + error_text(exc))
    else:
        messages.success(request, "Gate removed.")
    return redirect("evaluations", pk=project.pk)


_VERDICT_TITLES = (
    ("gender", "Gender"),
    ("skin_tone", "Skin tone"),
    ("body_shape", "Body shape"),
    ("intersectional", "Intersectional grid"),
)


def _verdicts(report: dict) -> list[dict]:
    """Each attribute of a finished report with its verdict and its band or group rows (page order)."""
    found = []
    for key, title in _VERDICT_TITLES:
        part = report.get(key) or {}
        if not part.get("verdict"):
            continue
        treatment = part.get("treatment")
        rows = part["bands"]["bands"] if treatment == "continuous" else part.get("groups") if treatment else None
        found.append({"key": key, "title": title, "part": part, "rows": rows})
    return found


@login_required
@require_http_methods(["GET"])
def evaluation_page(request, pk: int, run_id: int):
    """One run: status, the join report, the verdict per score, the figures, worst images, gates, downloads."""
    project, membership = page_project(request, pk, *READERS)
    run = _run_get(project, run_id)
    report = run.report or {}
    gates = None
    worst = []
    if run.status == EvaluationRun.Status.DONE:
        try:
            gates = svc.gates_check(run)
        except ValidationError:
            gates = None
        worst = svc.worst_images(run)
    others = project.evaluations.filter(release=run.release, status=EvaluationRun.Status.DONE).exclude(pk=run.pk)
    return render(
        request,
        "labeling/evaluation_detail.html",
        {
            "project": project,
            "run": run,
            "report": report,
            "is_active": run.status in (EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING),
            "gates": gates,
            "worst": worst,
            "others": others.order_by("-created_at")[:50],
            "figures": report.get("figures", []),
            "verdicts": _verdicts(report),
            "settings_json": json.dumps(report.get("settings", {}), indent=1),
            "release_composition": report.get("release_composition"),
        },
    )


@login_required
@require_http_methods(["GET"])
def evaluation_file_page(request, pk: int, run_id: int, path: str):
    project, _ = page_project(request, pk, *READERS)
    run = _run_get(project, run_id)
    found = svc.evaluation_file_name(run, path)
    if found is None:
        raise Http404("No such file in this run's report.")
    inline = path.endswith((".png", ".svg")) and request.GET.get("download") != "1"
    types = {".png": "image/png", ".svg": "image/svg+xml", ".json": "application/json", ".html": "text/html"}
    response = FileResponse(
        storage_reader(found),  # streamed after the role check (see api.views.releases._file_response)
        as_attachment=not inline,
        filename=f"evaluation-{run.pk}-" + path.replace("/", "-"),
        content_type=types.get(PurePosixPath(found).suffix, "application/octet-stream"),
    )
    response["X-Content-Type-Options"] = "nosniff"
    # A report file opened directly (HTML, SVG) runs no script and loads nothing from outside.
    response["Content-Security-Policy"] = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; sandbox"
    return response


@login_required
@require_http_methods(["GET"])
def evaluation_compare_page(request, pk: int):
    """Two runs on the same release: each score side by side, the change, its interval and a paired test."""
    project, membership = page_project(request, pk, *READERS)
    a, b = request.GET.get("a", ""), request.GET.get("b", "")
    comparison = error = None
    if a.isdigit() and b.isdigit():
        try:
            comparison = svc.evaluation_compare(_run_get(project, int(a)), _run_get(project, int(b)))
        except ValidationError as exc:
            error = error_text(exc)
    elif a or b:
        error = "Choose two runs."
    runs = (
        project.evaluations.filter(status=EvaluationRun.Status.DONE).select_related("release").order_by("-created_at")
    )
    return render(
        request,
        "labeling/evaluation_compare.html",
        {"project": project, "comparison": comparison, "error": error, "runs": runs[:200], "a": a, "b": b},
        status=400 if error else 200,
    )


__all__ = [
    "evaluation_compare_page",
    "evaluation_file_page",
    "evaluation_gate_create_page",
    "evaluation_gate_delete_page",
    "evaluation_page",
    "evaluations_page",
    "page_access",
]
