"""Token authentication with a short cache, for the labeling hot path.

DRF's ``TokenAuthentication`` costs a query (token joined with user) on every
request. Labelers submit every few seconds for hours, so the user behind a token
is cached for ``TOKEN_CACHE_SECONDS``: a deleted token or a deactivated user
stops working within that delay (deleting a token also clears its cache entry).
"""

from django.core.cache import cache
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token

#: The most a deleted token or a deactivated user can still pass, even when the clearing of its entry did not
#: reach Redis (an outage; ``config.cache`` also replays the clearing once Redis answers). At most 30 s.
TOKEN_CACHE_SECONDS = 30


def _key(token_key: str) -> str:
    return f"api-token:{token_key}"


class CachedTokenAuthentication(TokenAuthentication):
    def authenticate_credentials(self, key):
        cached = cache.get(_key(key))
        if cached is not None and cached.is_active:
            return cached, None
        user, token = super().authenticate_credentials(key)
        cache.set(_key(key), user, TOKEN_CACHE_SECONDS)
        return user, token


def token_cache_clear(sender, instance: Token, **kwargs) -> None:
    from django.db import transaction

    key = _key(instance.key)
    cache.delete(key)
    transaction.on_commit(lambda: cache.delete(key))  # a request before the commit may have cached it
