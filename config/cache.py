"""The Redis cache, made optional: when Redis cannot be reached, a cache call is a miss, not an error.

Everything FairTone keeps in the cache (the user behind an API token, memberships, consensus
summaries, rates) can be recomputed from PostgreSQL, so storing a label never needs Redis. Django's
``RedisCache`` raises on a connection error; this one logs the kind of error (never the URL), answers
as if the key were absent, and leaves Redis alone for ``RETRY_AFTER_SECONDS`` so that a Redis that
hangs costs one socket timeout per process and interval, not one per cache call.

Settings: ``CACHES["default"]["OPTIONS"]`` as for Django's backend (``socket_connect_timeout`` and
``socket_timeout`` are set in ``config.settings.base``).
https://docs.djangoproject.com/en/5.2/topics/cache/#redis
"""

import logging
import time

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache

logger = logging.getLogger("fairtone.cache")

#: After a failure, calls skip Redis (answer as a miss) for this long, then try again.
RETRY_AFTER_SECONDS = 5.0


class ResilientRedisCache(RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._down_until = 0.0

    def _call(self, method: str, fallback, *args, **kwargs):
        import redis

        if time.monotonic() < self._down_until:
            return fallback
        try:
            return getattr(super(), method)(*args, **kwargs)
        except redis.exceptions.RedisError as exc:
            if self._down_until == 0.0 or time.monotonic() >= self._down_until:
                logger.warning("cache unreachable (%s): falling back to the database", type(exc).__name__)
            self._down_until = time.monotonic() + RETRY_AFTER_SECONDS
            return fallback

    @property
    def reachable(self) -> bool:
        """Whether Redis answers a PING now (the readiness check)."""
        import redis

        try:
            return bool(self._cache.get_client(write=True).ping())
        except redis.exceptions.RedisError:
            return False

    def add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        return self._call("add", False, key, value, timeout, version)

    def get(self, key, default=None, version=None):
        return self._call("get", default, key, default, version)

    def set(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        return self._call("set", None, key, value, timeout, version)

    def touch(self, key, timeout=DEFAULT_TIMEOUT, version=None):
        return self._call("touch", False, key, timeout, version)

    def delete(self, key, version=None):
        return self._call("delete", False, key, version)

    def get_many(self, keys, version=None):
        return self._call("get_many", {}, keys, version)

    def has_key(self, key, version=None):
        return self._call("has_key", False, key, version)

    def incr(self, key, delta=1, version=None):
        value = self._call("incr", None, key, delta, version)
        if value is None:
            raise ValueError(f"Key {key!r} not found (the cache is unreachable).")
        return value

    def set_many(self, data, timeout=DEFAULT_TIMEOUT, version=None):
        return self._call("set_many", list(data), data, timeout, version)

    def delete_many(self, keys, version=None):
        return self._call("delete_many", None, keys, version)

    def clear(self):
        return self._call("clear", False)
