"""The brake on password guessing, shared by the sign-in page and the API's token endpoint.

After ``MAX_FAILURES`` wrong passwords for one username from one address within
``WINDOW_SECONDS``, further attempts are refused until the window ends (the page
and the API count together: one brake, two doors).
"""

from django.core.cache import cache

MAX_FAILURES = 10
WINDOW_SECONDS = 600


def _key(request, username: str) -> str:
    address = request.META.get("REMOTE_ADDR", "?")
    return f"login-failures:{address}:{(username or '').strip().lower()[:150]}"


def signin_locked(request, username: str) -> bool:
    return cache.get(_key(request, username), 0) >= MAX_FAILURES


def signin_failed(request, username: str) -> None:
    key = _key(request, username)
    cache.add(key, 0, WINDOW_SECONDS)
    try:
        cache.incr(key)
    except ValueError:
        cache.set(key, 1, WINDOW_SECONDS)


def signin_succeeded(request, username: str) -> None:
    cache.delete(_key(request, username))
