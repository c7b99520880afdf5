"""The Redis cache, made optional: when Redis cannot be reached, a cache call is a miss, not an error.

Everything FairTone keeps in the cache (the user behind an API token, memberships, consensus
summaries, rates) can be recomputed from PostgreSQL, so storing a label never needs Redis. Django's
``RedisCache`` raises on a connection error; this one logs the kind of error (never the URL), answers
as if the key were absent, and leaves Redis alone for ``RETRY_AFTER_SECONDS`` so that a Redis that
hangs costs one socket timeout per process and interval, not one per cache call.

An invalidation that could not reach Redis is not forgotten: a ``delete`` that failed, or was skipped
while Redis counted as down, is recorded in the process (:data:`MAX_MISSED_DELETES` keys at most) and
replayed before the next call that reaches Redis again; a membership deactivated during an outage is
not served from a stale entry once Redis is back. Should the replay itself be lost (the process exits
first), the entries that matter for access (the user behind a token, a membership) expire within 30
seconds (``labeling.api.authentication.TOKEN_CACHE_SECONDS``, ``labeling.selectors.MEMBERSHIP_CACHE_SECONDS``):
the staleness is bounded by that either way (tests/labeling/test_faults.py).

Settings: ``CACHES["default"]["OPTIONS"]`` as for Django's backend (``socket_connect_timeout`` and
``socket_timeout`` are set in ``config.settings.base``).
https://docs.djangoproject.com/en/5.2/topics/cache/#redis
"""

import logging
import threading
import time

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache

logger = logging.getLogger("fairtone.cache")

#: After a failure, calls skip Redis (answer as a miss) for this long, then try again.
RETRY_AFTER_SECONDS = 5.0
#: Deletes that could not reach Redis kept for replay, per process and server; beyond that they are dropped
#: (logged) and only the entries' timeouts bound their staleness.
MAX_MISSED_DELETES = 10_000

# Process-wide (Django makes a cache object per thread): server -> keys (made) whose delete did not reach it.
_missed: dict[tuple[str, ...], set[str]] = {}
_missed_lock = threading.Lock()


def _remember(server: tuple[str, ...], keys) -> None:
    if not keys:
        return
    with _missed_lock:
        pending = _missed.setdefault(server, set())
        room = MAX_MISSED_DELETES - len(pending)
        if room < len(keys):
            logger.warning("cache: %d missed deletes dropped (their timeouts bound them)", len(keys) - max(room, 0))
        pending.update(list(keys)[: max(room, 0)])


def missed_deletes(server: tuple[str, ...]) -> int:
    """How many deletes wait for ``server`` to answer again (for tests and checks)."""
    with _missed_lock:
        return len(_missed.get(server, ()))


class ResilientRedisCache(RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._down_until = 0.0

    @property
    def server_id(self) -> tuple[str, ...]:
        return tuple(self._servers)

    def _replay_missed(self) -> None:
        """Send the deletes that did not reach Redis (raises RedisError, keeping them, if it still fails)."""
        server = self.server_id
        if not _missed.get(server):  # the usual case: a dict lookup, no lock
            return
        with _missed_lock:
            keys = _missed.pop(server, set())
        if not keys:
            return
        try:
            self._cache.delete_many(sorted(keys))
        except BaseException:
            _remember(server, keys)
            raise
        logger.info("cache reachable again: %d missed deletes replayed", len(keys))

    def _call(self, method: str, fallback, *args, missed=(), **kwargs):
        """``super().method(*args)``, or ``fallback`` when Redis fails; ``missed``: the made keys of a delete,
        kept for replay when it does not reach Redis."""
        import redis

        if time.monotonic() < self._down_until:
            _remember(self.server_id, missed)
            return fallback
        try:
            self._replay_missed()
            return getattr(super(), method)(*args, **kwargs)
        except redis.exceptions.RedisError as exc:
            if self._down_until == 0.0 or time.monotonic() >= self._down_until:
                logger.warning("cache unreachable (%s): falling back to the database", type(exc).__name__)
            self._down_until = time.monotonic() + RETRY_AFTER_SECONDS
            _remember(self.server_id, missed)
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
        return self._call("delete", False, key, version, missed=[self.make_and_validate_key(key, version=version)])

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
        keys = list(keys)
        made = [self.make_and_validate_key(key, version=version) for key in keys]
        return self._call("delete_many", None, keys, version, missed=made)

    def clear(self):
        return self._call("clear", False)
