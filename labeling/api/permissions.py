from rest_framework.exceptions import NotFound, PermissionDenied

from ..models import Membership, Project
from ..selectors import membership_for


def project_role(request, project: Project, *roles: str) -> Membership | None:
    """Return the requester's membership if it has one of ``roles``.

    Non-members get 404 (a project's existence is not disclosed); members with
    another role get 403. Superusers pass as leads.
    """
    user = request.user
    if user.is_superuser:
        return membership_for(user, project)
    m = membership_for(user, project)
    if m is None:
        raise NotFound()
    if roles and m.role not in roles:
        raise PermissionDenied(f"This needs the role: {' or '.join(roles)}.")
    return m


LEAD = Membership.Role.LEAD
LABELER = Membership.Role.LABELER
REVIEWER = Membership.Role.REVIEWER
