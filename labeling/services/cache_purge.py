"""Removing the cached data of the lead's pages when a subject is erased (issue 26).

The cached summaries (consensus, review candidates, release readiness, baseline comparison and audit, data
manager statistics and orders, progress, rendered plots) hold rows of images, some with their subjects' ids;
they are keyed by a version of the data, so after an erasure they would no longer be served, but they would
stay in Redis (and its append-only file) until they expire, up to 7 days. :func:`project_caches_purge`
removes every entry under these prefixes, for every project (they are recomputed on the next visit): an
erasure is rare and deliberate, and a key's project is not always in it (consensus entries are per phase).
The per-phase counters of deleted labels stay: they hold no rows and the consensus versions count on them.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.cache import cache

from .baselines.comparison import BASELINE_PLOT_CACHE_PREFIX, COMPARISON_CACHE_PREFIX
from .baselines.validation import AUDIT_CACHE_PREFIX
from .consensus.caching import CACHE_PREFIX as CONSENSUS_CACHE_PREFIX
from .data_manager import IDS_CACHE_PREFIX as DATA_IDS_CACHE_PREFIX
from .data_manager import STATS_CACHE_PREFIX as DATA_STATS_CACHE_PREFIX
from .progress import PROGRESS_CACHE_PREFIX
from .releases.readiness import READINESS_CACHE_PREFIX
from .review import CANDIDATES_CACHE_PREFIX

logger = logging.getLogger("fairtone.cache")

#: Every cache prefix whose entries hold a project's image rows (the modules' own constants).
PROJECT_DATA_PREFIXES = (
    CONSENSUS_CACHE_PREFIX,
    CANDIDATES_CACHE_PREFIX,
    READINESS_CACHE_PREFIX,
    COMPARISON_CACHE_PREFIX,
    AUDIT_CACHE_PREFIX,
    BASELINE_PLOT_CACHE_PREFIX,
    DATA_STATS_CACHE_PREFIX,
    DATA_IDS_CACHE_PREFIX,
    PROGRESS_CACHE_PREFIX,
)
_KEPT = f"{CONSENSUS_CACHE_PREFIX}:deleted:"


def _purged(key: str) -> bool:
    return key.startswith(PROJECT_DATA_PREFIXES) and not key.startswith(_KEPT)


def project_caches_purge() -> int:
    """Delete every cached entry under :data:`PROJECT_DATA_PREFIXES`; how many were deleted.

    Redis: the keys found by ``SCAN`` (never ``KEYS``: it would block the server). The in-process cache of the
    embedded default: its own dictionary. Another backend: nothing to do here (``cache.clear()`` is left to
    its operator). A Redis that cannot be reached is logged; its entries then expire with their timeouts.
    """
    made_prefix = cache.make_key("")  # ":1:" by default: the backend's own key prefix and version
    store: Any = cache  # the backends' internals below are not in Django's types
    backend: Any = getattr(store, "_cache", None)
    if hasattr(backend, "get_client"):  # django.core.cache.backends.redis (and config.cache's subclass)
        try:
            client = backend.get_client(None, write=True)
            doomed = [
                key
                for prefix in PROJECT_DATA_PREFIXES
                for key in client.scan_iter(match=f"{cache.make_key(prefix)}*", count=1000)
                if _purged((key.decode() if isinstance(key, bytes) else key).removeprefix(made_prefix))
            ]
        except Exception as exc:  # noqa: BLE001 - any Redis error: logged, entries expire on their own
            logger.warning(
                "Cached project data not purged after an erasure (%s): it expires with its timeout", type(exc).__name__
            )
            return 0
        for start in range(0, len(doomed), 1000):
            client.delete(*doomed[start : start + 1000])
        return len(doomed)
    if isinstance(backend, dict):  # LocMemCache: made keys -> pickled values
        with store._lock:
            doomed = [key for key in list(backend) if _purged(key.removeprefix(made_prefix))]
            for key in doomed:
                store._delete(key)
        return len(doomed)
    return 0
