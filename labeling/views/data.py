"""The data manager page: every image of a project in one table (``services.data_manager``)."""

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render

from .. import selectors
from ..errors import error_text
from ..forms.data_manager import bulk_filters, data_request
from ..models import Membership, Phase
from ..services import baselines as baseline_services
from ..services import data_manager as dm
from .access import page_project

#: The page keeps these in its links: the service's filter parameters and the page size.
FILTER_NAMES = (*dm.FILTER_PARAMETERS, "page_size")
COLUMNS = [
    ("external_id", "Image"),
    (None, "Subject and attributes"),
    (None, "Phase"),
    (None, "Labelers (✓ done)"),
    ("n_labels", "Labels"),
    ("mean", "Mean"),
    (None, "Std"),
    ("range", "Range"),
    (None, "Near consensus"),
    ("ita", "ITA°"),
    (None, "Baseline flags"),
    (None, "Review"),
    (None, "Dataset"),
]


@login_required
def data_manager(request, pk: int):
    project, _ = page_project(request, pk, Membership.Role.LEAD, Membership.Role.REVIEWER)
    is_lead = selectors.is_lead(request.user, project)
    if request.method == "POST":
        return _bulk(request, project, is_lead)
    params = request.GET
    try:
        asked = data_request(project, params)
        page = dm.data_page(project, asked.filters, page=asked.page, page_size=asked.page_size, ignored=asked.ignored)
        error = None
    except ValidationError as exc:
        page, error = None, error_text(exc)
    kept = [(k, v) for k in FILTER_NAMES if k not in ("ordering",) for v in params.getlist(k) if v]
    query = urlencode(kept)
    ordering = params.get("ordering", "external_id")
    columns = [
        {
            "key": key,
            "title": title,
            "sorted": ordering.removeprefix("-") == key,
            "descending": ordering.startswith("-"),
            "link": f"?{query}&ordering={'-' if ordering == key else ''}{key}" if key else None,
        }
        for key, title in COLUMNS
    ]
    return render(
        request,
        "labeling/data_manager.html",
        {
            "project": project,
            "is_lead": is_lead,
            "page": page,
            "error": error,
            "params": params,
            "query": urlencode([*kept, ("ordering", ordering)]),
            "columns": columns,
            "phases": project.phases.order_by("id"),
            # The filter lists everyone who labelled (the inactive marked); relabel requests go to active people only.
            "labelers": project.memberships.filter(role=Membership.Role.LABELER).order_by("pseudonym"),
            "relabel_labelers": project.memberships.filter(role=Membership.Role.LABELER, is_active=True).order_by(
                "pseudonym"
            ),
            "flags": baseline_services.FLAG_NAMES,
            "actions": dm.BULK_ACTIONS,
            "confirm_above": dm.BULK_CONFIRM_ABOVE,
            "post_open": project.phases.filter(kind=Phase.Kind.POST_CALIBRATION, status=Phase.Status.OPEN).exists(),
        },
    )


def _bulk(request, project, is_lead: bool):
    back = request.POST.get("back", "")
    target = f"{request.path}?{back}" if back and "\n" not in back else request.path
    if not is_lead:
        messages.error(request, "Only the project's leads can change images.")
        return redirect(target)
    from django.http import QueryDict

    everything = request.POST.get("scope") == "all"
    try:
        result = dm.data_bulk(
            project=project,
            action=request.POST.get("action", ""),
            user=request.user,
            image_ids=None if everything else request.POST.getlist("image_ids"),
            filters=bulk_filters(project, QueryDict(back)) if everything else None,
            reason=request.POST.get("reason", ""),
            labeler_ids=request.POST.getlist("labeler_ids"),
            attribute=request.POST.get("attribute", ""),
            value=request.POST.get("value", ""),
            confirm=request.POST.get("confirm"),
        )
    except ValidationError as exc:
        messages.error(request, error_text(exc))
    else:
        messages.success(request, result["message"])
    return redirect(target)
