"""Erasing a subject on request (leads): a confirmation page listing what goes and which releases contain them.

``GET`` shows the counts and the releases (which are not rewritten); ``POST`` with the subject's id typed again
erases (``services.erasure``) and goes to the audit log, where the erasure is the newest entry.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from ..errors import error_text
from ..models import Membership
from ..services import erasure as erasure_services
from .access import page_project


@login_required
@require_http_methods(["GET", "POST"])
def subject_erase_page(request, pk: int, external_id: str):
    project, _ = page_project(request, pk, Membership.Role.LEAD)
    try:
        preview = erasure_services.subject_erase_preview(project=project, external_id=external_id)
    except ValidationError:
        raise Http404("No such subject in this project.") from None
    status = 200
    if request.method == "POST":
        try:
            record = erasure_services.subject_erase(
                project=project,
                external_id=external_id,
                user=request.user,
                confirm=request.POST.get("confirm", ""),
                reason=request.POST.get("reason", ""),
            )
        except ValidationError as exc:
            messages.error(request, f"Nothing was erased: {error_text(exc)}")
            status = 400
        else:
            n = record.counts["images"]
            messages.success(
                request,
                f"Subject {record.subject_external_id} erased: {n} image(s), their files, labels and baselines.",
            )
            return redirect("project-audit", pk=project.pk)
    return render(request, "labeling/subject_erase.html", {"project": project, "preview": preview}, status=status)
