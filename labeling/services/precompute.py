"""Precompute what a lead's pages show, in the background, whenever labels or baselines change.

On a big project the consensus of a phase (100,000 images x 4 labels: about 2 s) and the comparison
of the labels with the baselines take longer than a page may. A change of labels or baselines calls
:func:`labeling.services.queue.precompute_schedule` (debounced: one task per
``FAIRTONE["PRECOMPUTE_DELAY"]`` seconds per project), and the worker runs
:func:`project_precompute`, so the pages find their numbers in the cache; between a change and the
next precompute they serve the last numbers marked as being refreshed (stale-while-revalidate). With
jobs run in-process (the embedded default) nothing is scheduled: the first view computes.
"""

from __future__ import annotations

import time

from ..models import Phase, Project
from .baselines.comparison import baseline_comparison_cached
from .consensus.caching import phase_summary_is_cached, phase_summary_refresh, phase_versions
from .consensus.dashboard import project_consensus
from .releases.readiness import release_readiness_cached
from .review import review_candidate_ids


def project_precompute(project: Project) -> dict[str, float]:
    """Compute into the cache, where missing for the current labels: each phase's consensus summary,
    the dashboard (test-retest), the post-calibration review's candidates, the release readiness of
    the default rule, and the baseline comparison
    the compare page opens with (all phases, flagged images left out, and with them). Returns seconds spent per part."""
    timings: dict[str, float] = {}
    start = time.perf_counter()
    versions = phase_versions(project)
    for phase in project.phases.filter(id__in=list(versions)).select_related("project__scale"):
        if not phase_summary_is_cached(phase.id, versions[phase.id]):
            phase_summary_refresh(phase, versions[phase.id])
    timings["consensus_phases"] = time.perf_counter() - start
    start = time.perf_counter()
    project_consensus(project)
    timings["consensus_dashboard"] = time.perf_counter() - start
    start = time.perf_counter()
    post = project.phases.filter(kind=Phase.Kind.POST_CALIBRATION).first()
    if post is not None:
        review_candidate_ids(post, compute=True)
    timings["review_candidates"] = time.perf_counter() - start
    start = time.perf_counter()
    release_readiness_cached(project, {}, compute=True)
    timings["release_readiness"] = time.perf_counter() - start
    start = time.perf_counter()
    for exclude_flagged in (True, False):
        baseline_comparison_cached(project, None, exclude_flagged, compute=True)
    timings["baseline_comparison"] = time.perf_counter() - start
    return timings
