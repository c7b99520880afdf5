"""The lead's consensus and labeler-quality dashboard: pages, plots and API.

Leads only (superusers pass). Everyone else gets 404, labelers included: they
never see agreement or other labelers' statistics.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, render
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import selectors
from ..models import Membership, Phase, Project
from ..services import consensus as svc

LEAD = Membership.Role.LEAD
PAGE_SIZE = 50


def _lead_project(user, pk: int) -> Project:
    """The project if ``user`` leads it; ``Http404`` otherwise (its existence is not disclosed)."""
    project = get_object_or_404(Project.objects.select_related("scale"), pk=pk)
    try:
        selectors.require_role(user, project, LEAD)
    except PermissionDenied:
        raise Http404 from None
    return project


def _phase(project: Project, raw: str | None) -> Phase | None:
    if not raw:
        return None
    try:
        return project.phases.get(pk=int(raw))
    except (ValueError, Phase.DoesNotExist):
        raise Http404("No such phase in this project.") from None


def _names(project: Project) -> dict[int, str]:
    return dict(Membership.objects.filter(project=project).values_list("id", "pseudonym"))


def _images_page(project: Project, phase: Phase, params, page_number) -> tuple[dict, object, list[dict]]:
    data = svc.phase_summary(phase, with_images=True)
    rows = svc.consensus_images(data["images"], params)
    page = Paginator(rows, PAGE_SIZE).get_page(page_number)
    records = svc.image_rows(data["images"], page.object_list, _names(project))
    return data["summary"], page, records


# --------------------------------------------------------------------------
# Display helpers: numbers formatted here so templates only print text
# --------------------------------------------------------------------------


def _display(obj):
    """Copy of a dashboard dict where every ``{"value", "reason"}`` gets ``pct``, ``num`` and ``signed`` texts."""
    if isinstance(obj, list):
        return [_display(x) for x in obj]
    if not isinstance(obj, dict):
        return obj
    out = {k: _display(v) for k, v in obj.items()}
    if "value" in obj and "reason" in obj:
        value = obj["value"]
        out["pct"] = None if value is None else f"{value * 100:.1f}%"
        out["num"] = None if value is None else f"{value:.3f}"
        out["signed"] = None if value is None else f"{value:+.2f}"
    return out


_COMPARISON_ROWS = [
    ("Near consensus (all values within one tone)", ("near_consensus",), "pct"),
    ("Overlap consensus (all selections share a tone)", ("overlap_consensus",), "pct"),
    ("Complete consensus (identical selections)", ("complete_consensus",), "pct"),
    ("Pairs of labels that agree exactly", ("percent_exact",), "pct"),
    ("Pairs of labels within one tone", ("percent_within_one",), "pct"),
    ("Krippendorff's alpha, ordinal", ("alpha", "ordinal"), "alpha"),
    ("Krippendorff's alpha, interval", ("alpha", "interval"), "num"),
    ("Fleiss' kappa (nominal)", ("fleiss_kappa",), "num"),
]


def _dashboard_context(dashboard: dict) -> dict:
    dashboard = _display(dashboard)
    phases = dashboard["phases"]
    comparison = []
    for label, path, fmt in _COMPARISON_ROWS:
        cells = []
        for summary in phases:
            cell = summary["agreement"]
            for key in path:
                cell = cell[key]
            cells.append(cell)
        comparison.append({"label": label, "cells": cells, "fmt": fmt})
    tones = {t["position"]: t for t in dashboard["project"]["tones"]}
    distribution = []
    if phases:
        values = phases[0]["label_distribution"]["values"]
        for index, value in enumerate(values):
            cells = []
            for summary in phases:
                dist = summary["label_distribution"]
                total = sum(dist["counts"]) or 1
                count = dist["counts"][index]
                cells.append(
                    {
                        "count": count,
                        "pct": f"{count / total * 100:.1f}%",
                        "few": value % 1 == 0 and int(value) in dist["under_represented"],
                    }
                )
            if value % 1 and not any(c["count"] for c in cells):
                continue  # half-steps nobody used
            tone = tones.get(int(value)) if value % 1 == 0 else None
            distribution.append(
                {
                    "label": f"{value:g}" if tone is None else f"{tone['code']}",
                    "hex": tone and tone["hex"],
                    "pair": bool(value % 1),
                    "cells": cells,
                }
            )
    drift_rows = [
        {
            "labeler": row["labeler"],
            "cells": [next((b for b in row["baseline"] if b["phase_id"] == s["phase"]["id"]), None) for s in phases],
        }
        for row in dashboard["labelers"]
    ]
    selected = dashboard["selected"]
    kappa_rows, band_rows, bands = [], [], []
    if selected:
        kappa = selected["kappa"]
        for name, row, common in zip(kappa["labelers"], kappa["matrix"], kappa["n_common"], strict=True):
            kappa_rows.append(
                {
                    "labeler": name,
                    "cells": [
                        {"text": "—" if k is None else f"{k:.2f}", "n": n} for k, n in zip(row, common, strict=True)
                    ],
                }
            )
        bands = sorted({b["band"] for row in selected["per_labeler"] for b in row["bias_by_band"]})
        for row in selected["per_labeler"]:
            by_band = {b["band"]: b for b in row["bias_by_band"]}
            band_rows.append({"labeler": row["labeler"], "cells": [by_band.get(band) for band in bands]})
    return {
        "dashboard": dashboard,
        "selected": selected,
        "kappa_rows": kappa_rows,
        "band_rows": band_rows,
        "bands": bands,
        "phases": phases,
        "comparison": comparison,
        "distribution": distribution,
        "drift_rows": drift_rows,
        "plot_names": svc.PLOTS,
        "min_images": svc.MIN_IMAGES,
        "wide_range": svc.WIDE_RANGE,
    }


_IMAGE_COLUMNS = [
    ("image_id", "Image"),
    ("n_valid", "Valid"),
    ("mean", "Mean"),
    ("std", "Std"),
    ("median", "Median"),
    ("mode", "Mode"),
    ("min", "Min"),
    ("max", "Max"),
    ("range", "Range"),
    ("complete_consensus", "Complete"),
    ("overlap_consensus", "Overlap"),
    ("near_consensus", "Near"),
    ("n_unique_values", "Unique"),
    ("n_connected_groups", "Groups"),
    ("any_uncertainty", "Uncertain"),
]


# --------------------------------------------------------------------------
# Pages
# --------------------------------------------------------------------------


@login_required
def consensus_page(request, pk: int):
    project = _lead_project(request.user, pk)
    phase = _phase(project, request.GET.get("phase"))
    dashboard = svc.project_consensus(project, phase)
    return render(request, "labeling/consensus.html", {"project": project, **_dashboard_context(dashboard)})


@login_required
def consensus_images_page(request, pk: int):
    project = _lead_project(request.user, pk)
    phase = _phase(project, request.GET.get("phase"))
    if phase is None:
        dashboard = svc.project_consensus(project)
        if dashboard["selected"] is None:
            raise Http404("No labels yet.")
        phase = project.phases.get(pk=dashboard["selected"]["phase"]["id"])
    summary, page, records = _images_page(project, phase, request.GET, request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    query.setdefault("phase", str(phase.pk))
    unordered = query.copy()
    unordered.pop("ordering", None)
    titles = {
        "complete_consensus": "Complete",
        "overlap_consensus": "Overlap",
        "near_consensus": "Near",
        "any_uncertainty": "Uncertain",
        "wide_range": f"Range ≥ {svc.WIDE_RANGE}",
    }
    return render(
        request,
        "labeling/consensus_images.html",
        {
            "project": project,
            "phase": phase,
            "summary": summary,
            "page": page,
            "records": records,
            "params": request.GET,
            "query": query.urlencode(),
            "query_without_ordering": unordered.urlencode(),
            "columns": _IMAGE_COLUMNS,
            "labelers": summary["labelers"],
            "boolean_filters": [(n, titles[n], request.GET.get(n, "")) for n in svc.BOOLEAN_FILTERS],
            "phases": project.phases.order_by("id"),
            "wide_range": svc.WIDE_RANGE,
        },
    )


@login_required
def consensus_plot(request, pk: int, name: str, fmt: str):
    """A plot as PNG or SVG (``?download=1`` to save it as a file)."""
    project = _lead_project(request.user, pk)
    if name not in svc.PLOTS or fmt not in svc.FORMATS:
        raise Http404("No such plot.")
    phase = _phase(project, request.GET.get("phase"))
    dashboard = svc.project_consensus(project, phase)
    phase_id = dashboard["selected"]["phase"]["id"] if dashboard["selected"] else ""
    key = f"{svc.CACHE_PREFIX}:plot:{project.id}:{name}.{fmt}:{phase_id}:{dashboard['version']}"
    body = cache.get(key)
    if body is None:
        body = svc.plot_render(dashboard, name, fmt)
        cache.set(key, body, svc.CACHE_TIMEOUT)
    response = HttpResponse(body, content_type=svc.FORMATS[fmt])
    if request.GET.get("download"):
        phase_part = f"-{dashboard['selected']['phase']['kind']}" if dashboard["selected"] else ""
        response["Content-Disposition"] = f'attachment; filename="project{project.id}-{name}{phase_part}.{fmt}"'
    return response


# --------------------------------------------------------------------------
# API
# --------------------------------------------------------------------------


def _api_project(request, pk: int) -> Project:
    try:
        return _lead_project(request.user, pk)
    except Http404:
        raise NotFound() from None


_PHASE = OpenApiParameter("phase", int, description="Phase id (default: main, else the latest phase with labels).")


class ConsensusAPIView(APIView):
    """Consensus and labeler quality of a project, with one phase in detail (leads only)."""

    @extend_schema(
        parameters=[_PHASE],
        responses={200: OpenApiTypes.OBJECT},
        description=(
            "Per phase: consensus rates, % exact / within one tone, Krippendorff's alpha (ordinal with a "
            f"95% image-bootstrap CI, interval alongside), Fleiss' kappa, k-of-n agreement, unique values "
            "per image, label distribution, labeler x labeler quadratic-weighted kappa; per labeler: "
            "workload, baseline and its drift, bias against the other labelers, alpha without them, "
            "test-retest. A number computed from too little data is null with a `reason` "
            f"(fewer than {svc.MIN_IMAGES} images with 2+ labels). Labelers by pseudonym."
        ),
    )
    def get(self, request, pk: int):
        project = _api_project(request, pk)
        try:
            phase = _phase(project, request.query_params.get("phase"))
        except Http404:
            raise NotFound("No such phase in this project.") from None
        return Response(svc.project_consensus(project, phase))


class ConsensusImagesAPIView(APIView):
    """Per-image consensus (the data-card fields) of one phase, filtered, sorted and paginated."""

    @extend_schema(
        parameters=[
            _PHASE,
            OpenApiParameter("flag", str, enum=["wide_range", "invalid", "any"]),
            *[OpenApiParameter(name, bool) for name in svc.BOOLEAN_FILTERS],
            OpenApiParameter("min_range", float),
            OpenApiParameter("max_range", float),
            OpenApiParameter("n_unique", int),
            OpenApiParameter("min_labels", int, description="valid labels"),
            OpenApiParameter("ordering", str, description=f"One of {', '.join(svc.SORTABLE)}; '-' for descending."),
            OpenApiParameter("page", int),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request, pk: int):
        project = _api_project(request, pk)
        try:
            phase = _phase(project, request.query_params.get("phase"))
            if phase is None:
                selected = svc.project_consensus(project)["selected"]
                if selected is None:
                    raise Http404
                phase = project.phases.get(pk=selected["phase"]["id"])
        except Http404:
            raise NotFound("No such phase, or no labels yet.") from None
        summary, page, records = _images_page(project, phase, request.query_params, request.query_params.get("page"))
        return Response(
            {
                "phase": summary["phase"],
                "count": page.paginator.count,
                "page": page.number,
                "n_pages": page.paginator.num_pages,
                "page_size": PAGE_SIZE,
                "results": records,
            }
        )
