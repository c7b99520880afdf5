"""The database is unreachable: answer 503 with ``Retry-After``, not 500.

A PostgreSQL restart or failover makes every query fail for a few seconds with ``OperationalError``
(or ``InterfaceError`` on a connection that died). That is not a bug in the request: the client
should retry, and the labeling page does. The answer is built without touching the database (no
session, no user): JSON for the API, a small self-refreshing page otherwise.
"""

import logging

from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.template.loader import render_to_string

logger = logging.getLogger(__name__)

#: Seconds a client is asked to wait before retrying.
RETRY_AFTER_SECONDS = 5


def database_unavailable(request) -> HttpResponse:
    if request.path.startswith("/api/") or "application/json" in request.headers.get("Accept", ""):
        response = JsonResponse({"detail": "The database is unavailable just now; retry shortly."}, status=503)
    else:
        response = HttpResponse(render_to_string("errors/503.html"), status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    response["Cache-Control"] = "no-store"
    return response


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, OperationalError | InterfaceError):
            # The kind of error only: a driver's message can name the host and the user.
            logger.warning("database unavailable (%s): %s answered 503", type(exception).__name__, request.path)
            return database_unavailable(request)
        return None


#: What a page may load: this app's own scripts, styles, images and requests, nothing from elsewhere
#: (no CDN; photos of people must not leak to third parties). ``style-src 'unsafe-inline'``: templates
#: use ``style="..."`` attributes; no inline script is allowed (every script is a static file).
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
#: Swagger UI (drf-spectacular's page) starts itself with an inline script.
CONTENT_SECURITY_POLICY_DOCS = CONTENT_SECURITY_POLICY.replace("script-src 'self'", "script-src 'self' 'unsafe-inline'")


class ContentSecurityPolicyMiddleware:
    """Sets ``Content-Security-Policy`` on every response that does not set its own."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if "Content-Security-Policy" not in response:
            docs = request.path.startswith("/api/docs/")
            response["Content-Security-Policy"] = CONTENT_SECURITY_POLICY_DOCS if docs else CONTENT_SECURITY_POLICY
        return response


class AuditContextMiddleware:
    """Lets services record who did something and from where (``labeling.services.audit``) without seeing the
    request: sets the audit context for the request's duration. The user is read when an entry is written, so
    the API's token user (set by DRF on the request later) is the one recorded."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        from .services.audit import audit_request_begin, audit_request_end
        from .signin import client_address

        token = audit_request_begin(lambda: getattr(request, "user", None), client_address(request))
        try:
            return self.get_response(request)
        finally:
            audit_request_end(token)
