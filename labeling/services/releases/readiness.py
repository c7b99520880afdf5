"""Is the project ready for a release? The images of each category, before the lead decides what to include."""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import Any

import numpy as np
from django.core.cache import cache
from django.db.models import Count, Max
from django.utils import timezone

from ...models import Assignment, ImageExclusion, Phase, Project
from .. import queue
from ..baselines.parameters import BASELINE_CODE_VERSION, baselines_current
from ..consensus.caching import phase_versions
from .finalise import context_load, release_chunks
from .rules import CATEGORIES, rule_clean

#: Readiness is cached per project, rule and version of what it reads (labels, baselines, relabel
#: requests, exclusions, images): 100,000 images x 4 labels take about 2 s to go through.
READINESS_CACHE_PREFIX = "release-readiness:v1"
READINESS_CACHE_TIMEOUT = 7 * 24 * 3600

#: Example images listed per category.
MAX_EXAMPLES = 50


def release_readiness(project: Project, rule: dict[str, Any] | None = None) -> dict[str, Any]:
    """Counts and up to :data:`MAX_EXAMPLES` example images per category, for ``rule`` (defaults filled).

    Returns
    -------
    dict
        ``rule`` (cleaned), ``n_images``, ``n_included``, ``n_excluded`` (by the rule's ``include``),
        ``n_with_labels``, ``categories``: ``{name: {"description", "count", "include",
        "examples": [{"image_id", "external_id"}]}}`` in the order of :data:`CATEGORIES` (an image
        can be in several categories), and ``open_phases`` (:func:`phases_still_open`).

    Raises
    ------
    django.core.exceptions.ValidationError
        A bad rule (see :func:`rule_clean`).
    """
    rule = rule_clean(rule)
    context = context_load(project, rule)
    counts = dict.fromkeys(CATEGORIES, 0)
    examples: dict[str, list[dict]] = {name: [] for name in CATEGORIES}
    n_images = n_excluded = n_with_labels = 0
    excluded_names = [name for name in CATEGORIES if not rule["include"][name]]
    with contextlib.closing(release_chunks(project, rule, context=context)) as chunks:  # see build.release_write
        for chunk in chunks:
            n_images += len(chunk.images)
            n_with_labels += int(((chunk.final["n_labels"] + chunk.final["n_skipped"]) > 0).sum())
            excluded = np.zeros(len(chunk.images), dtype=bool)
            for name in CATEGORIES:
                flags = chunk.categories[name]
                counts[name] += int(flags.sum())
                room = MAX_EXAMPLES - len(examples[name])
                if room > 0:
                    for i in np.flatnonzero(flags)[:room]:
                        row = chunk.images[i]
                        examples[name].append({"image_id": row[0], "external_id": row[1]})
                if name in excluded_names:
                    excluded |= flags
            n_excluded += int(excluded.sum())
    return {
        "rule": rule,
        "n_images": n_images,
        "n_with_labels": n_with_labels,
        "n_included": n_images - n_excluded,
        "n_excluded": n_excluded,
        "categories": {
            name: {
                "description": description,
                "count": counts[name],
                "include": rule["include"][name],
                "examples": examples[name],
            }
            for name, description in CATEGORIES.items()
        },
        "open_phases": phases_still_open(project),
    }


def _readiness_version(project: Project) -> str:
    """Changes when anything :func:`release_readiness` reads changes (a few aggregates, no row scan in Python)."""
    relabels = Assignment.objects.filter(phase__project=project, phase__kind=Phase.Kind.POST_CALIBRATION).aggregate(
        n=Count("id"), done=Count("done_at"), last=Max("id")
    )
    exclusions = ImageExclusion.objects.filter(image__project=project).aggregate(
        n=Count("id"), excluded=Max("excluded_at"), included=Max("included_at"), n_included=Count("included_at")
    )
    images = project.images.aggregate(n=Count("id"), last=Max("id"))
    baselines = baselines_current(project).aggregate(n=Count("id"), t=Max("computed_at"))
    raw = repr(
        (sorted(phase_versions(project).items()), relabels, exclusions, images, baselines, BASELINE_CODE_VERSION)
    )
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def release_readiness_cached(project: Project, rule: dict[str, Any] | None = None, *, compute: bool = False) -> dict:
    """:func:`release_readiness` from the cache, recomputed when what it reads changes.

    With a real worker a changed readiness is served from its last computation with ``freshness.stale``
    while the project's precompute task recomputes it (the default rule; see ``services.precompute``).
    ``compute=True`` always computes a missing one.

    Raises
    ------
    django.core.exceptions.ValidationError
        A bad rule (see :func:`rule_clean`).
    """
    # Which phases are still open is read again at every request (opening or closing a phase changes no label,
    # so the cached readiness would not know).
    return {**_readiness_cached(project, rule, compute=compute), "open_phases": phases_still_open(project)}


def phases_still_open(project: Project) -> list[dict[str, Any]]:
    """The project's phases that are open, with their unfinished assignments and the sentence the releases page
    (and the API's ``open_phases``) says: their labels can still change after a release is made now."""
    rows = []
    for phase in project.phases.filter(status=Phase.Status.OPEN).order_by("id"):
        unfinished = Assignment.objects.filter(phase=phase, done_at__isnull=True).count()
        name = phase.get_kind_display()
        waiting = (
            f"{unfinished} assignment{'s are' if unfinished != 1 else ' is'} unfinished"
            if unfinished
            else ("every assignment is done")
        )
        rows.append(
            {
                "kind": phase.kind,
                "name": name,
                "unfinished": unfinished,
                "message": f"{name} is still open ({waiting}): its labels can still change, and a release made now "
                "takes them as they are. Close it first for a final release.",
            }
        )
    return rows


def _readiness_cached(project: Project, rule: dict[str, Any] | None, *, compute: bool) -> dict:
    cleaned = rule_clean(rule)
    scope = f"{project.pk}:{hashlib.sha256(json.dumps(cleaned, sort_keys=True).encode()).hexdigest()[:16]}"
    version = _readiness_version(project)
    key, latest_key = f"{READINESS_CACHE_PREFIX}:{scope}:{version}", f"{READINESS_CACHE_PREFIX}:latest:{scope}"
    result = cache.get(key)
    if result is not None:
        return result
    if not compute and queue.background_precompute_enabled():
        latest = cache.get(latest_key)
        if latest is not None:
            queue.precompute_schedule(project.pk)
            return {**latest, "freshness": {**latest["freshness"], "stale": True}}
    result = release_readiness(project, cleaned)
    result["freshness"] = {"version": version, "computed_at": timezone.now().isoformat(), "stale": False}
    cache.set_many({key: result, latest_key: result}, READINESS_CACHE_TIMEOUT)
    return result
