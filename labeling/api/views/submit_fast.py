"""``POST /api/phases/{id}/labels/``, the labeling hot path: a labeler's first answer, stored and answered
in one SQL statement (``services.submit_fast``), in front of the general view (``PhaseViewSet.labels``).

The route, its schema and its answers are the general view's: this only answers, with the same bytes,
the requests it can answer alone (a plain first answer by an active labeler, or a replay of one, JSON
in and out, a token or a session with its CSRF token). Everything else, including every refusal, goes
to the general view untouched, before anything is written. ``bench/bench_soak.py`` measures the difference under load.
"""

from __future__ import annotations

import functools
import json

from django.conf import settings
from django.http import HttpResponse
from django.utils.cache import patch_vary_headers
from rest_framework.authentication import CSRFCheck
from rest_framework.renderers import JSONRenderer

from ...services.submit_fast import fast_answer, submit_fast
from .common import MAX_ID
from .phases import assignment_fields

#: A plain answer is a few hundred bytes; anything much larger takes the general path.
MAX_BODY = 16 * 1024


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")  # NaN and Infinity, as DRF's strict JSON parser


def _json_only(accept: str) -> bool:
    """Whether DRF would answer JSON for this ``Accept`` (the browsable API answers HTML to browsers)."""
    if not accept:
        return True
    types = {part.split(";", 1)[0].strip().lower() for part in accept.split(",")}
    return bool(types) and types <= {"application/json", "*/*"}


def _who(request) -> tuple[str | None, int | None] | None:
    """``(token, None)`` or ``(None, user_id)`` as DRF's authentication would find them, or None (let it)."""
    header = request.META.get("HTTP_AUTHORIZATION")
    if header is not None:
        parts = header.split()
        if len(parts) == 2 and parts[0].lower() == "token" and parts[1].isascii() and parts[1].isalnum():
            return parts[1], None
        return None
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    # DRF's SessionAuthentication.enforce_csrf: a session needs its CSRF token.
    check = CSRFCheck(lambda r: None)
    check.process_request(request)
    if check.process_view(request, None, (), {}) is not None:
        return None
    return None, user.pk


def answer_fast(request, pk) -> HttpResponse | None:
    """The answer to a plain first answer, or None (nothing written) for the general view to give."""
    if (
        request.content_type != "application/json"
        or (request.encoding or "utf-8").lower() not in ("utf-8", "utf8")
        or "format" in request.GET
        or not _json_only(request.META.get("HTTP_ACCEPT", ""))
    ):
        return None
    try:
        phase_id = int(pk)
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except (TypeError, ValueError):
        return None
    if not 0 < phase_id <= MAX_ID or not 0 < length <= MAX_BODY:
        return None
    who = _who(request)
    if who is None:
        return None
    try:
        data = json.loads(request.body.decode("utf-8"), parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None
    answer = fast_answer(data)
    if answer is None:
        return None
    token, user_id = who
    stored = submit_fast(phase_id=phase_id, answer=answer, token=token, user_id=user_id)
    if stored is None:
        return None
    queue = [assignment_fields(**row) for row in stored.next_two]
    payload = {
        # The general view's answer (PhaseViewSet.labels): a first answer is the labeler's revision 1.
        "label": stored.label,
        "revision": stored.label["n_revisions"],
        "next": queue[0] if queue else None,
        "preload": queue[1] if len(queue) > 1 else None,
    }
    # 201: a new label; 200: a replay of a submit already stored (as the general view).
    status = 200 if stored.replayed else 201
    response = HttpResponse(JSONRenderer().render(payload), status=status, content_type="application/json")
    response["Allow"] = "GET, POST, HEAD, OPTIONS"
    patch_vary_headers(response, ["Accept"])
    return response


def with_fast_submit(general):
    """The general view (``PhaseViewSet`` with ``{"get": "labels", "post": "labels"}``) with the fast
    path in front of its POST. Keeps the general view's attributes (``cls``, ``actions``, ``csrf_exempt``),
    so the schema, the routes and the authorization matrix see the same view."""

    @functools.wraps(general)
    def view(request, *args, **kwargs):
        if request.method == "POST" and set(kwargs) == {"pk"} and settings.FAIRTONE.get("FAST_SUBMIT", True):
            response = answer_fast(request, kwargs["pk"])
            if response is not None:
                return response
        return general(request, *args, **kwargs)

    return view
