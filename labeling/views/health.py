"""Readiness, apart from liveness (``/healthz``, which needs nothing but the process).

``GET /readyz`` checks what the app depends on and answers 503 while it cannot store a label (the
database is down), 200 otherwise, with every dependency's state so an orchestrator or a person can act:

* ``database``: a query answers;
* ``cache``: Redis answers a PING ("not configured" with the in-process cache). Down is degraded,
  not unready: every cached value falls back to the database (``config.cache``);
* ``broker``: a connection to the Celery broker opens ("not configured" when jobs run in-process).
  Down is degraded: tasks are recorded and sent when it is back (``services.queue``);
* ``worker``: a Celery worker answers a ping within a second. Down is degraded: jobs wait.

Each check is bounded by a short timeout; nothing here names a host, a port or a password.
"""

import logging

from django.conf import settings
from django.http import JsonResponse
from django.views.decorators.http import require_safe

logger = logging.getLogger(__name__)

#: Seconds each check may take (the whole answer stays within a few seconds with everything down).
CHECK_TIMEOUT = 1.0


def _database() -> str:
    from django.db import connection

    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any driver error means "down"
        logger.warning("readiness: database down (%s)", type(exc).__name__)
        return "down"
    return "ok"


def _cache() -> str:
    from django.core.cache import caches

    cache = caches["default"]
    reachable = getattr(cache, "reachable", None)
    if reachable is None:
        return "not configured"
    return "ok" if reachable else "down"


def _broker() -> str:
    if not settings.CELERY_BROKER_URL or settings.CELERY_TASK_ALWAYS_EAGER:
        return "not configured"
    from celery import current_app

    try:
        with current_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=CHECK_TIMEOUT)
    except Exception as exc:  # kombu and the transports raise many kinds
        logger.warning("readiness: broker down (%s)", type(exc).__name__)
        return "down"
    return "ok"


def _worker(broker: str) -> str:
    if broker == "not configured":
        return "not configured"
    if broker != "ok":
        return "unknown"
    from celery import current_app

    try:
        replies = current_app.control.ping(timeout=CHECK_TIMEOUT)
    except Exception as exc:
        logger.warning("readiness: worker ping failed (%s)", type(exc).__name__)
        return "down"
    return "ok" if replies else "down"


@require_safe
def readyz(request):
    checks = {"database": _database(), "cache": _cache(), "broker": _broker()}
    checks["worker"] = _worker(checks["broker"])
    ready = checks["database"] == "ok"
    degraded = [name for name, state in checks.items() if state in ("down", "unknown")]
    status = "ready" if ready and not degraded else ("degraded" if ready else "unready")
    response = JsonResponse({"status": status, "checks": checks}, status=200 if ready else 503)
    if not ready:
        response["Retry-After"] = "5"
    response["Cache-Control"] = "no-store"
    return response
