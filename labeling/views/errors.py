"""Error pages: JSON for API requests, a plain page otherwise."""

from django.http import JsonResponse
from django.shortcuts import render


def _wants_json(request) -> bool:
    return request.path.startswith("/api/") or "application/json" in request.headers.get("Accept", "")


def bad_request(request, exception=None):
    """Django's own 400s (a ``SuspiciousOperation``: too many form fields, a malformed multipart body...)."""
    if _wants_json(request):
        return JsonResponse({"detail": "Bad request."}, status=400)
    from django.views.defaults import bad_request as default

    return default(request, exception)


def not_found(request, exception=None):
    if _wants_json(request):
        return JsonResponse({"detail": "Not found."}, status=404)
    return render(request, "errors/404.html", status=404)


def server_error(request):
    if _wants_json(request):
        return JsonResponse({"detail": "Server error. It has been logged."}, status=500)
    return render(request, "errors/500.html", status=500)
