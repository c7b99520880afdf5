import unicodedata

from django.conf import settings
from django.db import models


def username_fold(username) -> str:
    """A username as people read it: Unicode NFKC (as Django normalises usernames before authenticating:
    fullwidth letters become ASCII), stripped and case-folded. Two usernames with the same fold are the same
    name to a person; new accounts may not collide with an existing one (``services.projects``) and the
    password brake keys unknown names by it (``labeling.signin``)."""
    text = username if isinstance(username, str) else ""
    return unicodedata.normalize("NFKC", text).strip().casefold()


class SigninFailure(models.Model):
    """Wrong passwords for one username in the current window: the brake on password guessing.

    One counter per username, whichever way in (the sign-in page, the API's token endpoint) and
    from whatever address: an attacker who rotates addresses or forwarded-for headers gets no more
    guesses. Kept in the database, not the cache, so the brake holds while Redis is down.
    """

    # ``labeling.signin.username_key``: ``#<user id>`` for an existing account, else the name's fold.
    username = models.CharField(max_length=150, unique=True)
    failures = models.PositiveIntegerField(default=0)
    window_started_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.failures} failures for {self.username!r}"


class AccountOrigin(models.Model):
    """Who created a sign-in from FairTone's members page or API (``services.projects.labeler_create``).

    A lead may enrol an existing account only if they created it (staff: any): a lead cannot put
    someone else's account into their project without its owner's knowledge.
    """

    user = models.OneToOneField(settings.AUTH_USER_MODEL, related_name="origin", on_delete=models.CASCADE)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, related_name="+", on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"account {self.user_id} created by {self.created_by_id}"
