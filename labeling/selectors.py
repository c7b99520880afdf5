"""Read-side queries shared by pages and the API."""

from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet

from .models import Assignment, Image, Label, Membership, Phase, Project

MEMBERSHIP_CACHE_SECONDS = 30


def _membership_key(user_id: int, project_id: int) -> str:
    return f"membership:{user_id}:{project_id}"


def membership_for(user, project: Project) -> Membership | None:
    """The user's active membership in ``project``, or None.

    Asked on every request of a labeling session, so it is cached briefly; a
    change of role or membership clears the entry (``post_save``/``post_delete``;
    with a per-process cache, other processes see it within the cache time).
    """
    if not user.is_authenticated:
        return None
    from django.core.cache import cache

    key = _membership_key(user.id, project.id)
    fields = cache.get(key)
    if fields is None:
        m = project.memberships.filter(user=user, is_active=True).order_by().first()
        fields = {f.attname: getattr(m, f.attname) for f in Membership._meta.concrete_fields} if m else {}
        cache.set(key, fields, MEMBERSHIP_CACHE_SECONDS)
    if not fields:
        return None
    m = Membership(**fields)
    m._state.adding = False
    m._state.db = "default"
    m.project = project
    return m


def membership_cache_clear(sender, instance: Membership, **kwargs) -> None:
    from django.core.cache import cache
    from django.db import transaction

    key = _membership_key(instance.user_id, instance.project_id)
    cache.delete(key)
    # Again after commit: a request between the save and the commit may have cached the old row.
    transaction.on_commit(lambda: cache.delete(key))


def is_lead(user, project: Project) -> bool:
    if user.is_authenticated and user.is_superuser:
        return True
    m = membership_for(user, project)
    return m is not None and m.role == Membership.Role.LEAD


def require_role(user, project: Project, *roles: str) -> Membership | None:
    """The user's membership if it has one of ``roles`` (superusers pass as leads)."""
    if user.is_authenticated and user.is_superuser:
        return membership_for(user, project)
    m = membership_for(user, project)
    if m is None or (roles and m.role not in roles):
        raise PermissionDenied("You do not have access to this.")
    return m


def can_create_projects(user) -> bool:
    """Staff, or people given the ``labeling.add_project`` permission (e.g. in the admin).

    Creating a project makes its creator the lead, who can create sign-ins and import
    photos: a labeler must not be able to give themselves that role.
    """
    return user.is_authenticated and (user.is_staff or user.has_perm("labeling.add_project"))


def can_import_from_server(user) -> bool:
    """Importing from a server folder reads files outside any project: staff only."""
    return user.is_authenticated and user.is_staff


def projects_for(user) -> QuerySet[Project]:
    if user.is_superuser:
        return Project.objects.all()
    return Project.objects.filter(memberships__user=user, memberships__is_active=True).distinct()


def images_visible_to(user, project: Project) -> QuerySet[Image]:
    """Leads and reviewers see every image; a labeler only the images of their own queues."""
    m = membership_for(user, project)
    if user.is_superuser or (m and m.role in (Membership.Role.LEAD, Membership.Role.REVIEWER)):
        return project.images.all()
    if m is None:
        return project.images.none()
    return project.images.filter(
        Q(assignments__labeler=m, assignments__phase__status__in=[Phase.Status.OPEN, Phase.Status.CLOSED])
        | Q(id__in=project.tone_examples.values("image_id"))  # example images shown with the instructions
    ).distinct()


def labeler_can_view_image(m: Membership, image_id: int) -> bool:
    """A labeler sees an image of their own queues (phases opened) or a tone example of the project."""
    return (
        Assignment.objects.filter(
            labeler_id=m.id, image_id=image_id, phase__status__in=[Phase.Status.OPEN, Phase.Status.CLOSED]
        ).exists()
        or m.project.tone_examples.filter(image_id=image_id).exists()
    )


def image_filter_by_attributes(qs: QuerySet[Image], filters: dict[str, str]) -> QuerySet[Image]:
    """Filter images by subject attribute or image attribute (exact, compared as text)."""
    for key, value in filters.items():
        cond = Q(**{f"subject__attributes__{key}": value}) | Q(**{f"attributes__{key}": value})
        # Numbers are stored as numbers in JSON; match them too.
        for cast in (int, float):
            try:
                number = cast(value)
            except ValueError:
                continue
            cond |= Q(**{f"subject__attributes__{key}": number}) | Q(**{f"attributes__{key}": number})
        qs = qs.filter(cond)
    return qs


def assignment_next(*, phase: Phase, labeler: Membership) -> Assignment | None:
    return (
        phase.assignments.filter(labeler=labeler, done_at__isnull=True)
        .select_related("image")
        .order_by("position")
        .first()
    )


def assignment_queue(*, phase: Phase, labeler: Membership, after_position: int = 0, limit: int = 2):
    return list(
        # Not ``phase.assignments``: the related manager would assign the phase to each row
        # and so load the deferred ``phase_id`` with one query per row.
        Assignment.objects.filter(
            phase_id=phase.id, labeler_id=labeler.id, done_at__isnull=True, position__gt=after_position
        )
        .select_related("image")
        .only("id", "position", "kind", "image__id", "image__width", "image__height")
        .order_by("position")[:limit]
    )


def labeler_history(*, phase: Phase, labeler: Membership) -> list[dict]:
    """The labeler's answered images in this phase, in the order they were shown."""
    rows = phase.assignments.filter(labeler=labeler, done_at__isnull=False).order_by("position")
    labels = {lab.assignment_id: lab for lab in Label.objects.filter(phase=phase, labeler=labeler)}
    relabels = {lab.id: lab for lab in Label.objects.filter(id__in=[a.relabel_of_id for a in rows if a.relabel_of_id])}
    history = []
    for a in rows:
        label = relabels.get(a.relabel_of_id) if a.relabel_of_id else labels.get(a.id)
        if label is None:
            continue
        history.append({"assignment": a, "label": label})
    return history


def labeler_phases(user) -> QuerySet[Phase]:
    return (
        Phase.objects.filter(assignments__labeler__user=user, assignments__labeler__is_active=True)
        .exclude(status=Phase.Status.DRAFT)
        .distinct()
        .select_related("project")
    )
