"""Cached phase summaries: versions, stale-while-revalidate, the background refresh.

A summary is cached under (phase id, version), where the version is the phase's
latest ``Label.updated_at`` plus a counter of deleted labels: a new, changed or
deleted label gives a new version, so a stale summary is never served as fresh.
"""

from __future__ import annotations

from django.core.cache import cache
from django.utils import timezone

from ...models import Label, Phase, Project
from .. import queue
from .summary import phase_summary_compute

CACHE_TIMEOUT = 7 * 24 * 3600
#: v2: every rate carries its interval (issue 12); v3: summaries carry agreement per tone band (issue 22).
#: Summaries cached in an old layout are not read.
CACHE_PREFIX = "consensus:v3"
#: A phase is refreshed by one task at a time; the lock expires if a worker dies.
REFRESH_LOCK_SECONDS = 300


def _key(kind: str, phase_id: int, version: str) -> str:
    return f"{CACHE_PREFIX}:{kind}:{phase_id}:{version}"


def phase_versions(project: Project) -> dict[int, str]:
    """Cache version of each phase of ``project`` that has labels.

    The version is the phase's latest ``Label.updated_at`` (one index lookup per
    phase on ``(phase, updated_at)``, about a millisecond even with 400,000 labels;
    a ``COUNT`` would scan them all) plus a counter of deleted labels kept by a
    ``post_delete`` signal, so a new, changed or deleted label gives a new version.
    """
    versions = {}
    for phase_id in project.phases.values_list("id", flat=True):
        last = (
            Label.objects.filter(phase_id=phase_id).order_by("-updated_at").values_list("updated_at", flat=True).first()
        )
        if last is not None:
            deleted = cache.get(f"{CACHE_PREFIX}:deleted:{phase_id}", 0)
            versions[phase_id] = f"{last.isoformat()}/{deleted}"
    return versions


def label_deleted_count(sender, instance: Label, **kwargs) -> None:
    """``post_delete`` handler of ``Label`` (connected in ``labeling.signals``): a new version for its phase."""
    key = f"{CACHE_PREFIX}:deleted:{instance.phase_id}"
    cache.add(key, 0, None)
    try:
        cache.incr(key)
    except ValueError:  # evicted between add and incr
        cache.set(key, 1, None)


def _background_refresh() -> bool:
    """Serve the last summary while a worker recomputes (needs a real worker; see settings)."""
    return queue.background_precompute_enabled()


def phase_summary_is_cached(phase_id: int, version: str) -> bool:
    """Whether the summary of ``phase_id`` for ``version`` (from :func:`phase_versions`) is in the cache."""
    return cache.get(_key("summary", phase_id, version)) is not None


def phase_refresh_unlock(phase_id: int) -> None:
    """Let the next changed view of the phase enqueue a refresh again (the refresh task calls it when done)."""
    cache.delete(_key("refreshing", phase_id, "any"))


def phase_summary_refresh(phase: Phase, version: str | None = None) -> tuple[dict, dict]:
    """Compute a phase's summary for its current labels and cache it (also as the phase's latest)."""
    if version is None:
        version = phase_versions(phase.project).get(phase.id, "empty")
    project = phase.project
    summary, images = phase_summary_compute(
        phase, n_tones=project.scale.tones.count(), allow_pairs=project.allow_adjacent_pairs
    )
    summary = {**summary, "freshness": {"version": version, "computed_at": timezone.now().isoformat(), "stale": False}}
    cache.set_many(
        {
            _key("summary", phase.id, version): summary,
            _key("images", phase.id, version): images,
            _key("latest", phase.id, "any"): (version, summary, images),
        },
        CACHE_TIMEOUT,
    )
    return summary, images


def phase_summary(phase: Phase, *, version: str | None = None, with_images: bool = False) -> dict:
    """A phase's summary from the cache, computed (and cached) when the labels changed.

    On a big project the computation takes seconds (100,000 images x 4 labels:
    about 1.5 s of SQL and 3 s of statistics on a loaded 2-core machine), so with a
    real worker (``FAIRTONE["CONSENSUS_BACKGROUND_REFRESH"]``) a changed phase is
    served from its last computation, marked ``freshness.stale``, while a Celery
    task recomputes it (stale-while-revalidate): the dashboard always answers from
    the cache. Only the very first view of a phase computes in the request.

    Parameters
    ----------
    phase : Phase
    version : str, optional
        From ``phase_versions`` (saves the aggregate query when known).
    with_images : bool
        Return ``{"summary": ..., "images": ...}`` with the per-image table.
    """
    if version is None:
        version = phase_versions(phase.project).get(phase.id, "empty")
    summary_key, images_key = _key("summary", phase.id, version), _key("images", phase.id, version)
    summary = cache.get(summary_key)
    images = cache.get(images_key) if with_images and summary is not None else None
    if summary is None or (with_images and images is None):
        latest = cache.get(_key("latest", phase.id, "any")) if _background_refresh() else None
        if latest is not None:
            _, summary, images = latest
            summary = {**summary, "freshness": {**summary["freshness"], "stale": True}}
            if cache.add(_key("refreshing", phase.id, "any"), True, REFRESH_LOCK_SECONDS):
                # Sent at once (not on commit): it reads committed labels only, and a
                # callback lost with a rolled-back transaction would keep the lock.
                queue.enqueue(queue.CONSENSUS_REFRESH, phase.id)
        else:
            summary, images = phase_summary_refresh(phase, version)
    return {"summary": summary, "images": images} if with_images else summary
