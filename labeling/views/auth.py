"""The sign-in page, with the brake on password guessing (``labeling.signin``)."""

from django.contrib.auth.views import LoginView

from ..signin import signin_failed, signin_locked, signin_rate_allows, signin_succeeded


class ThrottledLoginView(LoginView):
    """Django's login page; refused with 429 while ``signin_locked`` (too many wrong passwords for the
    username, from anywhere) or past the per-address ``login`` rate."""

    def post(self, request, *args, **kwargs):
        if signin_locked(request.POST.get("username", "")) or not signin_rate_allows(request):
            form = self.get_form()
            form.errors.clear()
            response = self.render_to_response(self.get_context_data(form=form, locked=True))
            response.status_code = 429
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        signin_failed(self.request.POST.get("username", ""))
        return super().form_invalid(form)

    def form_valid(self, form):
        signin_succeeded(form.get_user().get_username())
        return super().form_valid(form)
