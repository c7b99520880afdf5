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
