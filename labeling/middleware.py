"""The database is unreachable: answer 503 with ``Retry-After``, not 500.

A PostgreSQL restart or failover makes every query fail for a few seconds with ``OperationalError``
(or ``InterfaceError`` on a connection that died). That is not a bug in the request: the client
should retry, and the labeling page does. The answer is built without touching the database (no
session, no user): JSON for the API, a small self-refreshing page otherwise.

Only an unreachable database is a 503 (``database_unreachable``); any other ``OperationalError`` is
an error of the app and answers 500 (logged with its traceback). In particular SQLite's "database is
locked": with the settings' busy timeout a writer waits up to 20 s for the lock, so the error means a
transaction held the write lock that long (a stuck process or a bug to find), not a database that is
away for a moment; before issue 23 it was raised at once under ordinary concurrency and shown to
labelers as "database unavailable".
"""

import logging

from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.template.loader import render_to_string

logger = logging.getLogger(__name__)

#: Seconds a client is asked to wait before retrying.
RETRY_AFTER_SECONDS = 5


#: PostgreSQL's SQLSTATEs of a server that is away or refuses connections for now: class 08 (connection
#: exception) and these (admin_shutdown, crash_shutdown, cannot_connect_now, too_many_connections).
#: https://www.postgresql.org/docs/current/errcodes-appendix.html
POSTGRES_UNREACHABLE = {"57P01", "57P02", "57P03", "53300"}
#: SQLite's messages of a database file that cannot be reached (its folder gone, unmounted or unreadable).
SQLITE_UNREACHABLE = ("unable to open database file", "disk i/o error")


def database_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot be reached just now (so 503 and a retry), rather than
    an error of the request or the app (500).

    A connection that died (``InterfaceError``); on PostgreSQL an error with no SQLSTATE (the driver could
    not connect, or the server closed the connection) or one of ``POSTGRES_UNREACHABLE`` / class 08; on
    SQLite a file that cannot be opened or read. Not: "database is locked" (contention past the busy
    timeout), "no such table" (migrations not applied), deadlocks, statement timeouts.
    """
    if isinstance(exc, InterfaceError):
        return True
    if not isinstance(exc, OperationalError):
        return False
    cause = exc.__cause__ or exc
    module = type(cause).__module__ or ""
    if module.startswith(("psycopg", "psycopg2")):
        code = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
        return code is None or code.startswith("08") or code in POSTGRES_UNREACHABLE
    message = str(cause).lower()
    return any(text in message for text in SQLITE_UNREACHABLE)


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
        if database_unreachable(exception):
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


NUL = "\x00"


def _nul_in_json(value) -> bool:
    """Whether a decoded JSON document holds NUL in any string, key or value (walked without recursion)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if NUL in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _nul_in_fields(fields, what: str) -> str | None:
    for key, values in fields.lists():
        if NUL in key or any(isinstance(v, str) and NUL in v for v in values):
            return f"{what} '{key.replace(NUL, '')}'"
    return None


def _nul_in_body(request) -> str | None:
    from django.conf import settings
    from django.http import QueryDict

    content_type = request.content_type or ""
    if request.method == "POST" and content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
        found = _nul_in_fields(request.POST, "the form field")
        if found is None:
            found = next((f"the file name '{k}'" for k, f in request.FILES.items() if NUL in (f.name or "")), None)
        return found
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if length <= 0 or (limit is not None and length > limit):
        return None  # nothing to read here, or the view's own limits apply
    if content_type == "application/x-www-form-urlencoded":  # a PUT or PATCH form, which request.POST skips
        return _nul_in_fields(QueryDict(request.body, encoding=request.encoding), "the form field")
    if content_type == "application/json" or content_type.endswith("+json"):
        body = request.body
        if b"\x00" in body:
            return "the JSON body"
        if b"\\u0000" in body:  # the only other way a JSON string holds NUL
            import json

            try:
                document = json.loads(body)
            except (ValueError, RecursionError):
                return None  # the parser answers 400 for what is not JSON
            if _nul_in_json(document):
                return "a string of the JSON body"
    return None


def nul_where(request) -> str | None:
    """Where a request carries a NUL character (U+0000), or None: the path, a query parameter, a form field
    or file name, a string of a JSON body. PostgreSQL cannot store NUL in text, so it is refused here, once."""
    if NUL in request.path_info or NUL in request.path:
        return "the path"
    found = _nul_in_fields(request.GET, "the query parameter")
    if found is None and request.method not in ("GET", "HEAD", "OPTIONS"):
        found = _nul_in_body(request)
    return found


class NulRefusedMiddleware:
    """400 for a request with NUL in any text it sends (``labeling.middleware.nul_where``), anonymous or not,
    before a view, a session or a query sees it: PostgreSQL refuses NUL in text with an error (a 500)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        from django.http.multipartparser import MultiPartParserError

        try:
            where = nul_where(request)
        except MultiPartParserError as exc:  # read here, so answered here (the parser would say the same)
            return _bad_request(request, f"The multipart body cannot be read: {exc}")
        if where is None:
            return self.get_response(request)
        return _bad_request(request, f"NUL characters (U+0000) are not allowed: {where} holds one.")


def _bad_request(request, message: str) -> HttpResponse:
    if request.path.startswith("/api/") or "application/json" in request.headers.get("Accept", ""):
        return JsonResponse({"detail": message}, status=400)
    return HttpResponse(message, status=400, content_type="text/plain; charset=utf-8")
