"""The project's audit log page (leads): who did what to the project's data, when and from where.

Filters by action and by user, paginated, newest first. Never editable (there is nothing to post here).
A request from anyone but a lead of the project gets 404.
"""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import render
from django.views.decorators.http import require_GET

from ..models import Membership
from ..services.audit import audit_actions, audit_entries
from .access import page_project

PER_PAGE = 50


@login_required
@require_GET
def audit_page(request, pk: int):
    project, _ = page_project(request, pk, Membership.Role.LEAD)
    action = request.GET.get("action", "").strip()
    user = request.GET.get("user", "").strip()
    entries = audit_entries(project.pk, action=action, user=user)
    page = Paginator(entries, PER_PAGE).get_page(request.GET.get("page"))
    query = "&".join(f"{k}={v}" for k, v in (("action", action), ("user", user)) if v)
    return render(
        request,
        "labeling/audit.html",
        {
            "project": project,
            "page": page,
            "rows": [(e, json.dumps(e.details, ensure_ascii=False, sort_keys=True)) for e in page],
            "actions": audit_actions(project.pk),
            "chosen_action": action,
            "chosen_user": user,
            "query": query,
        },
    )
