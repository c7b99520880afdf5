"""The app's domain errors, and the one place they become answers for pages and for the API.

Access: ``selectors.project_access`` decides who may do what on a project and raises
``NotAMember`` or ``WrongRole``; ``http_error`` turns them into Django's ``Http404`` /
``PermissionDenied``. Pages get there through ``views.access.page_project``, the API
through its exception handler (``api.errors``): neither decides 404 or 403 itself.

Validation: a ``ValidationError`` is shown on a page as one line (``error_text``) and
sent by the API per field (``error_fields``).
"""

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404


class AccessDenied(Exception):
    """The requester may not do this on the project."""

    hidden = True


class NotAMember(AccessDenied):
    """Not a member of the project (or no such project): answered as if it did not exist."""


class WrongRole(AccessDenied):
    """A member whose role is not one of ``roles``: 403, or 404 where the rule hides the page from other roles."""

    def __init__(self, roles: tuple[str, ...], *, hidden: bool = False):
        super().__init__(f"This needs the role: {' or '.join(roles)}.")
        self.roles = roles
        self.hidden = hidden


def http_error(exc: AccessDenied) -> Http404 | PermissionDenied:
    """The answer to a refusal: 404 where the project's existence is not disclosed, else 403."""
    if exc.hidden:
        return Http404()
    return PermissionDenied(str(exc))


def error_fields(exc: ValidationError) -> dict[str, list[str]] | dict[str, str]:
    """Per field (``{"field": ["message", ...]}``), or ``{"detail": "..."}`` when no field is named."""
    if hasattr(exc, "error_dict"):
        return {k: [str(m) for e in v for m in e.messages] for k, v in exc.error_dict.items()}
    return {"detail": " ".join(exc.messages)}


def error_text(exc: ValidationError) -> str:
    """One line for a page, in plain words: the messages only, never the internal field names
    (services name the problem in the message itself)."""
    return " ".join(exc.messages)


def form_add_error(form, exc: ValidationError) -> None:
    """Put a service's ``ValidationError`` on a page's form: next to the field it names when the form
    has that field, otherwise at the top; the message in plain words either way."""
    if hasattr(exc, "error_dict"):
        for key, messages in error_fields(exc).items():
            form.add_error(key if key in form.fields else None, " ".join(messages))
    else:
        form.add_error(None, error_text(exc))
