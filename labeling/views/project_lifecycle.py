"""A lead archives, unarchives or deletes a project (``services.project_lifecycle``)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from ..errors import error_text
from ..models import Membership
from ..services import project_lifecycle
from .access import page_project


@login_required
@require_POST
def project_archive_page(request, pk: int):
    project, _ = page_project(request, pk, Membership.Role.LEAD)
    project_lifecycle.project_archive(project=project, user=request.user)
    messages.success(request, f"{project.name} is archived: read-only and out of the project list.")
    return redirect(project)


@login_required
@require_POST
def project_unarchive_page(request, pk: int):
    project, _ = page_project(request, pk, Membership.Role.LEAD)
    project_lifecycle.project_unarchive(project=project, user=request.user)
    messages.success(request, f"{project.name} is active again.")
    return redirect(project)


@login_required
def project_delete_page(request, pk: int):
    """What deleting removes, and the form: the project's name typed again, releases confirmed if there are any."""
    project, _ = page_project(request, pk, Membership.Role.LEAD)
    counts = project_lifecycle.project_delete_counts(project)
    error = ""
    if request.method == "POST":
        if request.POST.get("name", "").strip() != project.name.strip():
            error = "Type the project's name exactly to delete it."
        else:
            try:
                project_lifecycle.project_delete(
                    project=project, user=request.user, confirm=request.POST.get("confirm_releases") == "yes"
                )
            except ValidationError as exc:
                error = error_text(exc)
            else:
                messages.success(request, f"{project.name} and everything in it are deleted.")
                return redirect("home")
    response = render(request, "labeling/project_delete.html", {"project": project, "counts": counts, "error": error})
    if error:
        response.status_code = 400
    return response
