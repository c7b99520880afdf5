"""Sign-in with a brake on password guessing (per address and username), for pages and API tokens."""

from django.contrib.auth.views import LoginView
from django.core.cache import cache
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.throttling import ScopedRateThrottle

MAX_FAILURES = 10
WINDOW_SECONDS = 600


def _client_address(request) -> str:
    return request.META.get("REMOTE_ADDR", "?")


def _key(request, username: str) -> str:
    return f"login-failures:{_client_address(request)}:{(username or '').strip().lower()[:150]}"


class ThrottledLoginView(LoginView):
    """Django's login page; after MAX_FAILURES wrong passwords for one username from one
    address within WINDOW_SECONDS, further attempts are refused until the window ends."""

    def post(self, request, *args, **kwargs):
        key = _key(request, request.POST.get("username", ""))
        if cache.get(key, 0) >= MAX_FAILURES:
            form = self.get_form()
            form.errors.clear()
            response = self.render_to_response(self.get_context_data(form=form, locked=True))
            response.status_code = 429
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        key = _key(self.request, self.request.POST.get("username", ""))
        cache.add(key, 0, WINDOW_SECONDS)
        try:
            cache.incr(key)
        except ValueError:
            cache.set(key, 1, WINDOW_SECONDS)
        return super().form_invalid(form)

    def form_valid(self, form):
        cache.delete(_key(self.request, form.get_user().get_username()))
        return super().form_valid(form)


class ThrottledObtainAuthToken(ObtainAuthToken):
    """``POST /api/auth/token/`` with the ``login`` rate (settings: DEFAULT_THROTTLE_RATES)."""

    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "login"
