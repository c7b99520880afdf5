"""A person's own account: the email address that a forgotten password is reset through.

A lead may give an address when creating someone's sign-in (``services.projects.labeler_create``); every person
sets or changes their own on their account page. Addresses are not required to be unique: requiring it would
tell whoever types an address that another account already uses it, and Django's reset mails every account with
the address (each mail names its username).
"""

from __future__ import annotations

import logging

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction

logger = logging.getLogger(__name__)

EMAIL_MAX = 254
EMAIL_INVALID = "Give an email address such as name@example.org (or leave it empty)."


def email_clean(raw) -> str:
    """The address as stored: stripped, its domain in lower case; empty for none.

    Raises ``ValidationError`` (on ``email``) for anything that is not an email address.
    """
    email = str(raw or "").strip()
    if not email:
        return ""
    if len(email) > EMAIL_MAX:
        raise ValidationError({"email": f"Use at most {EMAIL_MAX} characters."})
    try:
        validate_email(email)
    except ValidationError:
        raise ValidationError({"email": EMAIL_INVALID}) from None
    return get_user_model().objects.normalize_email(email)


def _notify_old_address(username: str, old: str, new: str) -> None:
    """Tell the previous address that it no longer resets the account (someone else may have changed it)."""
    text = (
        f"The email address of the FairTone account {username} was changed"
        + (f" to {new}" if new else " (it now has none)")
        + ". Password reset links now go to the new address only.\n\n"
        "If you did not change it, ask your project lead or the site's administrator at once.\n"
    )
    try:
        send_mail("Your FairTone email address was changed", text, None, [old])
    except Exception:  # a mail server that is down must not undo the change
        logger.exception("Could not tell the previous address of account %s about the change", username)


def account_email_set(*, user, email) -> str:
    """Set (or remove, with an empty ``email``) the account's own address; returns the stored address.

    The previous address, if any, is told of the change once it is saved.
    """
    new = email_clean(email)
    old = user.email or ""
    if new == old:
        return new
    user.email = new
    user.save(update_fields=["email"])
    if old:
        username = user.get_username()
        transaction.on_commit(lambda: _notify_old_address(username, old, new))
    return new


def _may_manage(*, membership, by) -> bool:
    """Staff, or the lead who created the member's sign-in from FairTone (``AccountOrigin``)."""
    from ..models import AccountOrigin

    return (
        bool(getattr(by, "is_staff", False))
        or AccountOrigin.objects.filter(user_id=membership.user_id, created_by=by).exists()
    )


def member_email_set(*, membership, email, by) -> str:
    """A lead gives an address to a member's sign-in that has none, so that it can reset its password.

    Only for a sign-in the lead created (staff: any), and never replacing an address: a lead must not be
    able to send someone's password resets elsewhere (the person changes their own on their account page).
    """
    user = membership.user
    if user.email:
        raise ValidationError({"email": "This sign-in already has an address: only its owner can change it."})
    if not _may_manage(membership=membership, by=by):
        raise ValidationError(
            {"email": "Only the lead who created this sign-in can give it an address; its owner can add one."}
        )
    new = email_clean(email)
    if not new:
        raise ValidationError({"email": "Give the address the reset link should go to."})
    user.email = new
    user.save(update_fields=["email"])
    return new


def member_reset_link_send(*, membership, by, domain: str, use_https: bool) -> str:
    """Mail the member a password reset link (Django's reset mail and token) to their own address.

    For a sign-in the lead created (staff: any) that has an address. Returns the address it went to.
    """
    from django.contrib.auth.forms import PasswordResetForm
    from django.contrib.auth.tokens import default_token_generator
    from django.utils.encoding import force_bytes
    from django.utils.http import urlsafe_base64_encode

    user = membership.user
    if not user.email:
        raise ValidationError({"email": "This sign-in has no address: give it one first."})
    if not _may_manage(membership=membership, by=by):
        raise ValidationError({"email": "Only the lead who created this sign-in can send it a reset link."})
    if not user.is_active:
        raise ValidationError({"email": "This sign-in is deactivated."})
    context = {
        "email": user.email,
        "domain": domain,
        "site_name": domain,
        "uid": urlsafe_base64_encode(force_bytes(user.pk)),
        "user": user,
        "token": default_token_generator.make_token(user),
        "protocol": "https" if use_https else "http",
    }
    PasswordResetForm().send_mail(
        "registration/password_reset_subject.txt",
        "registration/password_reset_email.txt",
        context,
        None,
        user.email,
    )
    return user.email
