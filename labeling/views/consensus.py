"""The lead's consensus and labeler-quality dashboard: pages and plots (the API: ``api.views.dashboards``).

Leads only (superusers pass). Everyone else gets 404, labelers included: they
never see agreement or other labelers' statistics. What the pages show is built
in ``consensus_display``.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import render

from .. import plots, selectors
from ..models import Membership
from ..services import consensus as svc
from . import consensus_display as display
from .access import page_project

PAGE_SIZE = 50


@login_required
def consensus_page(request, pk: int):
    project, _ = page_project(request, pk, Membership.Role.LEAD)
    phase = selectors.consensus_phase(project, request.GET.get("phase"))
    dashboard = svc.project_consensus(project, phase)
    return render(request, "labeling/consensus.html", {"project": project, **display.dashboard_context(dashboard)})


@login_required
def consensus_images_page(request, pk: int):
    project, _ = page_project(request, pk, Membership.Role.LEAD)
    phase = selectors.consensus_phase(project, request.GET.get("phase"), default_selected=True)
    data, rows = selectors.consensus_image_rows(phase, request.GET)
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    summary = data["summary"]
    return render(
        request,
        "labeling/consensus_images.html",
        {
            "project": project,
            "phase": phase,
            "summary": summary,
            "page": page,
            "records": selectors.consensus_image_records(project, data, page.object_list),
            "labelers": summary["labelers"],
            "phases": project.phases.order_by("id"),
            **display.images_page_context(request.GET, phase),
        },
    )


@login_required
def consensus_plot(request, pk: int, name: str, fmt: str):
    """A plot as PNG or SVG (``?download=1`` to save it as a file)."""
    project, _ = page_project(request, pk, Membership.Role.LEAD)
    if name not in plots.PLOTS or fmt not in plots.FORMATS:
        raise Http404("No such plot.")
    phase = selectors.consensus_phase(project, request.GET.get("phase"))
    dashboard = svc.project_consensus(project, phase)
    phase_id = dashboard["selected"]["phase"]["id"] if dashboard["selected"] else ""
    key = f"{svc.CACHE_PREFIX}:plot:{project.id}:{name}.{fmt}:{phase_id}:{dashboard['version']}"
    body = cache.get(key)
    if body is None:
        body = plots.plot_render(dashboard, name, fmt)
        cache.set(key, body, svc.CACHE_TIMEOUT)
    response = HttpResponse(body, content_type=plots.FORMATS[fmt])
    if request.GET.get("download"):
        phase_part = f"-{dashboard['selected']['phase']['kind']}" if dashboard["selected"] else ""
        response["Content-Disposition"] = f'attachment; filename="project{project.id}-{name}{phase_part}.{fmt}"'
    return response
