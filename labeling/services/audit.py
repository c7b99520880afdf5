"""Recording the audit log (``models.AuditEntry``): one call per thing a lead or staff does to data.

Design: services do not see requests, so *who* and *from where* come from a context variable that
``labeling.middleware.AuditContextMiddleware`` sets for the duration of each request (the user, read lazily so
that an API token authenticated by DRF later in the request is the one recorded, and the client address as
``labeling.signin.client_address`` derives it from ``NUM_PROXIES`` trusted proxies). A service that is given
its ``user`` passes it and that one wins. Outside a request (the worker, management commands) the entry has no
origin, and no user unless the service names one (e.g. the release's requester when it is published).

An entry is written in the caller's transaction: an action that rolls back leaves no entry, and an entry is
never written for something that did not happen. ``details`` is kept small (long lists are cut, with their
length recorded) and must never hold a labeler's tone values or profile fields: callers pass counts, ids,
pseudonyms, reasons. The database refuses to change or delete an entry too (triggers of migration 0015).

Labelers' own actions are not in this log, by decision: what a lead would need traced of them is traced already,
where it lives, and is append-only there. Each answer, change of answer, skip (with its reason), relabel and
correction is an immutable ``LabelRevision`` with its author, time, source and the client's own id
(``services.labels``; never deleted except by an erasure, ``tests/labeling/test_labels_never_deleted.py``);
copying them here would put labelers' tone values in the log, which it must never hold. A labeler's profile is
set by a lead (``membership.*`` entries: which fields, never their values) and a labeler's password is an
account's, not a project's data. Their calibration reflections are their own words to the lead, kept as the
latest answer only (a release counts them, nothing more): their edits are not traced, on purpose.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from ..models import AuditEntry, Project

#: (a callable giving the request's user, the client address) while a request is being answered.
_request: contextvars.ContextVar[tuple[Callable[[], Any], str] | None] = contextvars.ContextVar(
    "fairtone_audit_request", default=None
)

MAX_LIST = 50
MAX_TEXT = 500


def audit_request_begin(get_user: Callable[[], Any], origin: str) -> contextvars.Token:
    """Called by the middleware as a request starts; pass the token to :func:`audit_request_end`."""
    return _request.set((get_user, (origin or "")[:64]))


def audit_request_end(token: contextvars.Token) -> None:
    _request.reset(token)


def _small(value: Any, depth: int = 0) -> Any:
    """``value`` made JSON-ready and bounded: lists cut to MAX_LIST items, texts to MAX_TEXT characters."""
    if depth > 4:
        return None
    if isinstance(value, dict):
        return {str(k)[:60]: _small(v, depth + 1) for k, v in list(value.items())[:MAX_LIST]}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value) if isinstance(value, set | frozenset) else list(value)
        return [_small(v, depth + 1) for v in items[:MAX_LIST]]
    if value is None or isinstance(value, bool | int | float):
        return value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)[:MAX_TEXT]


def _actor(user) -> tuple[int | None, str]:
    if user is not None and getattr(user, "is_authenticated", False):
        return user.pk, user.get_username()
    return None, ""


def audit(project: Project | int | None, action: str, obj: Any = None, *, user=None, **details) -> AuditEntry:
    """Record ``action`` (e.g. ``"phase.open"``) on ``obj`` (a model instance, or ``(type, id)``) of ``project``.

    ``user``: who did it, if the caller knows; else the current request's user. Long lists in ``details`` are
    cut to their first MAX_LIST items with ``n_<name>`` recording how many there were.
    """
    current = _request.get()
    if user is None and current is not None:
        user = current[0]()
    user_id, username = _actor(user)
    if isinstance(project, Project):
        project_id, project_name = project.pk, project.name
    elif project is not None:
        project_id = int(project)
        project_name = Project.objects.filter(pk=project_id).values_list("name", flat=True).first() or ""
    else:
        project_id, project_name = None, ""
    if obj is None:
        object_type, object_id = "", ""
    elif isinstance(obj, tuple):
        object_type, object_id = str(obj[0]), str(obj[1])
    else:
        object_type, object_id = obj._meta.model_name, str(obj.pk)
    for name, value in list(details.items()):
        if isinstance(value, list | tuple | set) and len(value) > MAX_LIST:
            details.setdefault(f"n_{name}", len(value))
    return AuditEntry.objects.create(
        project_id=project_id,
        project_name=project_name[:200],
        user_id=user_id,
        username=username[:150],
        action=action[:60],
        object_type=object_type[:60],
        object_id=object_id[:64],
        details=_small(details),
        origin=current[1] if current is not None else "",
    )


def audit_model_saved(sender, instance, created: bool, **kwargs) -> None:
    """``post_save`` of the rows whose changes are audited where they are saved from several places (connected in
    ``labeling.signals``): a release published (by the worker), an evaluation run created, and memberships
    added or changed (pages, API, admin). Profile fields are never recorded, only which fields changed."""
    from ..models import EvaluationRun, Membership, Release

    if kwargs.get("raw"):  # loaddata
        return
    if sender is Release and instance.status == Release.Status.PUBLISHED:
        # A published release is never saved again (``Release.save`` refuses): this is its publication.
        audit(instance.project_id, "release.publish", instance, user=instance.created_by, version=instance.version)
    elif sender is EvaluationRun and created:
        release = instance.release.version if instance.release_id else None
        audit(instance.project_id, "evaluation.create", instance, name=instance.name, release=release)
    elif sender is Membership:
        before = getattr(instance, "_audit_before", None)
        if created:
            audit(instance.project_id, "membership.add", instance, pseudonym=instance.pseudonym, role=instance.role)
        elif before is not None:
            role, is_active, pseudonym = before
            if role != instance.role:
                audit(
                    instance.project_id,
                    "membership.role",
                    instance,
                    pseudonym=instance.pseudonym,
                    old=role,
                    new=instance.role,
                )
            if is_active != instance.is_active:
                action = "membership.reactivate" if instance.is_active else "membership.deactivate"
                audit(instance.project_id, action, instance, pseudonym=instance.pseudonym)
            if pseudonym != instance.pseudonym:
                audit(instance.project_id, "membership.pseudonym", instance, old=pseudonym, new=instance.pseudonym)


def audit_membership_saving(sender, instance, **kwargs) -> None:
    """``pre_save`` of a membership: remember what :func:`audit_model_saved` compares with."""
    from ..models import Membership

    if instance.pk is not None:
        instance._audit_before = (
            Membership.objects.filter(pk=instance.pk).values_list("role", "is_active", "pseudonym").first()
        )


def audit_entries(project_id: int, *, action: str = "", user: str = ""):
    """A project's audit entries, newest first; ``action``: an action name or its prefix ending in ``.``
    (``"phase."``); ``user``: a username, or a user id."""
    entries = AuditEntry.objects.filter(project_id=project_id)
    action = (action or "").strip()
    if action:
        entries = entries.filter(action__startswith=action) if action.endswith(".") else entries.filter(action=action)
    user = (user or "").strip()
    if user:
        # A user id is a number of at most 10 digits (an IntegerField); anything else is a username.
        is_id = user.isascii() and user.isdigit() and len(user) <= 10
        entries = entries.filter(user_id=int(user)) if is_id else entries.filter(username=user)
    return entries.order_by("-created_at", "-id")


def audit_actions(project_id: int) -> list[str]:
    """The action names a project's log holds (for the page's filter)."""
    return sorted(set(AuditEntry.objects.filter(project_id=project_id).values_list("action", flat=True)))


def audit_admin_logged(sender, instance, created: bool, **kwargs) -> None:
    """``post_save`` of Django's admin log (``LogEntry``): what staff add, change or delete in the admin is in the
    audit log too, with the project the object belongs to when it has one. Recorded: the model, the object's id
    and the admin's change message (field names, never values); not the object's text, which may hold tones."""
    from django.contrib.admin.models import ADDITION, CHANGE, DELETION

    if not created or kwargs.get("raw"):
        return
    model = instance.content_type.model_class() if instance.content_type_id else None
    if model is AuditEntry:
        return
    project_id = None
    if model is Project:
        project_id = int(instance.object_id) if str(instance.object_id).isdigit() else None
    elif model is not None and instance.action_flag != DELETION:
        try:
            project_id = getattr(instance.get_edited_object(), "project_id", None)
        except Exception:  # the object is gone, or its model has no default manager lookup by pk
            project_id = None
    action = {ADDITION: "admin.add", CHANGE: "admin.change", DELETION: "admin.delete"}.get(instance.action_flag)
    name = model._meta.model_name if model is not None else "unknown"
    audit(
        project_id,
        action or "admin.other",
        (name, instance.object_id),
        user=instance.user,
        change=instance.get_change_message(),
    )
