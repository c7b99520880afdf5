"""How pages apply the one access rule (``selectors.project_access``).

Pages never tell anyone that a page they may not see exists: every refusal answers 404
(``hide_from_other_roles``). The answer itself is made in one place for pages and the API,
``errors.http_error``.
"""

from django.shortcuts import get_object_or_404

from .. import selectors
from ..errors import AccessDenied, http_error
from ..models import Membership, Project


def page_access(request, project: Project, *roles: str) -> Membership | None:
    """The requester's membership if they have one of ``roles`` in ``project`` (superusers pass as leads)."""
    try:
        return selectors.project_access(request.user, project, *roles, hide_from_other_roles=True)
    except AccessDenied as exc:
        raise http_error(exc) from None


def page_project(request, pk: int, *roles: str) -> tuple[Project, Membership | None]:
    """The project ``pk`` and the requester's membership, by ``page_access``."""
    project = get_object_or_404(Project.objects.select_related("scale"), pk=pk)
    return project, page_access(request, project, *roles)
