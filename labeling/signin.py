"""The brake on password guessing, shared by the sign-in page and the API's token endpoint.

After ``MAX_FAILURES`` wrong passwords for one account within ``WINDOW_SECONDS``,
further attempts for it are refused (even with the right password) until the window
ends: one counter per account (keyed by its user id: the name as typed is NFKC-normalised
first, as Django does before authenticating, so fullwidth or other variants of a name count
for the account they sign in to, and another account whose name differs in case keeps its
own counter), one per folded name for a name with no account; whichever door (page or API)
and whichever address the guesses come from, kept in the database (``models.SigninFailure``) so it
holds while the cache is down. Per address, both doors also share the ``login`` rate
(``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``), with the client address taken from
``X-Forwarded-For`` only as far as ``NUM_PROXIES`` trusted proxies vouch for it.
"""

import unicodedata
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from .models.accounts import SigninFailure, username_fold

MAX_FAILURES = 10
WINDOW_SECONDS = 600


def username_key(username) -> str:
    """The brake's counter for a sign-in attempt: ``#<id>`` of the account the name means, else the name's
    fold (NFKC, case-folded); empty for no name.

    The account: the one Django authenticates (the exact NFKC-normalised name), else the only account whose
    name has the same fold (``Victim`` guesses count for ``victim``). Two accounts that differ only in case
    (possible before new names had to differ by more) each keep their own counter.
    """
    if not isinstance(username, str):
        return ""
    name = unicodedata.normalize("NFKC", username).strip()
    if not name:
        return ""
    fold = username_fold(name)
    user_model = get_user_model()
    field = user_model.USERNAME_FIELD
    manager = user_model._default_manager
    user_id = manager.filter(**{field: name}).values_list("pk", flat=True).first()
    if user_id is None:
        same = [
            pk
            for pk, other in manager.filter(**{f"{field}__iexact": name}).values_list("pk", field)
            if username_fold(other) == fold
        ]
        user_id = same[0] if len(same) == 1 else None
    if user_id is not None:
        return f"#{user_id}"
    return fold[:150]


def _window_start():
    return timezone.now() - timedelta(seconds=WINDOW_SECONDS)


def signin_locked(username: str) -> bool:
    return SigninFailure.objects.filter(
        username=username_key(username), window_started_at__gte=_window_start(), failures__gte=MAX_FAILURES
    ).exists()


def signin_failed(username: str) -> None:
    key = username_key(username)
    if not key:
        return
    with transaction.atomic():
        counted = SigninFailure.objects.filter(username=key, window_started_at__gte=_window_start()).update(
            failures=F("failures") + 1
        )
        if counted:
            return
        row, created = SigninFailure.objects.select_for_update().get_or_create(
            username=key, defaults={"failures": 1, "window_started_at": timezone.now()}
        )
        if not created:  # an expired window: start a new one
            SigninFailure.objects.filter(pk=row.pk).update(failures=1, window_started_at=timezone.now())


def signin_succeeded(username: str) -> None:
    SigninFailure.objects.filter(username=username_key(username)).delete()


def client_address(request) -> str:
    """The client's address: ``REMOTE_ADDR``, or the ``X-Forwarded-For`` entry ``NUM_PROXIES`` trusted proxies
    added (DRF's rule, ``REST_FRAMEWORK["NUM_PROXIES"]``); entries a client wrote itself are never used."""
    from rest_framework.throttling import BaseThrottle

    return BaseThrottle().get_ident(request)


class _SigninDoor:
    throttle_scope = "login"


def signin_rate_allows(request) -> bool:
    """The per-address ``login`` rate, shared by both doors (the token endpoint applies it through DRF too)."""
    from rest_framework.throttling import ScopedRateThrottle

    return ScopedRateThrottle().allow_request(request, _SigninDoor())
