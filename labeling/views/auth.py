"""Sign-in, password change and password reset, all behind the brake on password guessing (``labeling.signin``)."""

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render

from ..errors import form_add_error
from ..forms import AccountEmailForm
from ..services.accounts import account_email_set
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


class ThrottledPasswordChangeView(auth_views.PasswordChangeView):
    """Django's password change. Its "current password" is a password check like signing in: a wrong one counts
    against the account's username (one counter with the sign-in page and the API), and while the username is
    locked, or past the per-address ``login`` rate, the form is refused with 429 even with the right password,
    so a stolen session cannot be used to guess the password."""

    def post(self, request, *args, **kwargs):
        if signin_locked(request.user.get_username()) or not signin_rate_allows(request):
            form = self.get_form_class()(user=request.user)
            response = self.render_to_response(self.get_context_data(form=form, locked=True))
            response.status_code = 429
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        if "old_password" in form.errors:
            signin_failed(self.request.user.get_username())
        return super().form_invalid(form)

    def form_valid(self, form):
        signin_succeeded(self.request.user.get_username())
        return super().form_valid(form)


class ThrottledPasswordResetView(auth_views.PasswordResetView):
    """Django's password reset request: the same answer whether the address belongs to an account or not (Django
    mails only accounts with that address and a usable password, and says nothing either way). Requests share the
    per-address ``login`` rate, so the form cannot be used to flood someone's mailbox from one address; the rate
    applies before the address is looked up, so its refusal says nothing about accounts either."""

    email_template_name = "registration/password_reset_email.txt"

    def post(self, request, *args, **kwargs):
        if not signin_rate_allows(request):
            response = self.render_to_response(self.get_context_data(form=self.get_form_class()(), locked=True))
            response.status_code = 429
            return response
        return super().post(request, *args, **kwargs)


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    """Django's "choose a new password" page from the mailed link. The new password does not sign the person in
    and does not lift the brake: a username locked by wrong guesses stays locked until its window ends (the page
    says so), so resetting is never a way around the brake."""

    post_reset_login = False


@login_required
def account_page(request):
    """The signed-in person's account: the email address password resets go to (set, changed or removed with the
    current password, which is a password check like signing in: a wrong one counts against the brake, and while
    the username is locked or past the per-address rate the form is refused with 429), and the password change."""
    user = request.user
    form = AccountEmailForm(user, request.POST or None, initial={"email": user.email})
    if request.method == "POST":
        if signin_locked(user.get_username()) or not signin_rate_allows(request):
            form = AccountEmailForm(user, initial={"email": user.email})
            return render(request, "registration/account.html", {"form": form, "locked": True}, status=429)
        if form.is_valid():
            signin_succeeded(user.get_username())
            try:
                email = account_email_set(user=user, email=form.cleaned_data["email"])
            except ValidationError as exc:
                form_add_error(form, exc)
            else:
                messages.success(
                    request,
                    f"Saved: reset links now go to {email}." if email else "Saved: your account has no email address.",
                )
                return redirect("account")
        elif getattr(form, "wrong_password", False):
            signin_failed(user.get_username())
    return render(request, "registration/account.html", {"form": form})
