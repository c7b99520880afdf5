"""Post-calibration review: images whose labels look like mistakes.

Which images are listed is found in the database (:func:`review_candidate_ids`: one grouped query,
about a second at 100,000 images x 4 labels, instead of building 400,000 label objects); the labels
and reasons are read only for the images a page shows (:func:`review_details`).
"""

import hashlib
from collections import defaultdict

from django.core.cache import cache
from django.db import connection

from metrics.agreement import OUTLIER_DISTANCE, outlier_labels

from ..models import Label, Phase
from . import queue
from .consensus.caching import phase_versions

#: Cached candidate lists (per phase, outlier distance and labels' version; see ``consensus.caching``).
CANDIDATES_CACHE_PREFIX = "review:candidates:v1"
CANDIDATES_CACHE_TIMEOUT = 7 * 24 * 3600


def review_label_row(lab) -> dict:
    """One label as the review pages and API show it (``lab`` with its phase, labeler and ``n_revisions``)."""
    return {
        "label_id": lab.pk,
        "phase": lab.phase.get_kind_display(),
        "labeler": lab.labeler.pseudonym,
        "labeler_id": lab.labeler_id,
        "selection": lab.selection_text,
        "tone_low": lab.tone_low,
        "value": lab.value,
        "uncertain": lab.uncertain,
        "is_valid": lab.is_valid,
        "n_revisions": lab.n_revisions,
    }


def review_phases(phase: Phase):
    """The phases whose labels ``phase``'s review looks at: for the post-calibration phase every
    earlier phase, for another phase its own."""
    if phase.kind == Phase.Kind.POST_CALIBRATION:
        return phase.project.phases.exclude(kind=Phase.Kind.POST_CALIBRATION)
    return phase.project.phases.filter(pk=phase.pk)


# One row per listed image with its number of reasons: each outlier label (a value at least the
# distance from every other value of the same image and phase: with the values sorted, from its
# neighbours on both sides; metrics.agreement.outlier_labels), and any skip, uncertain or invalid label.
_CANDIDATES_SQL = """
WITH valued AS (
    SELECT image_id, value,
           LAG(value) OVER w AS below, LEAD(value) OVER w AS above,
           COUNT(*) OVER (PARTITION BY image_id, phase_id) AS n_valued
    FROM labeling_label
    WHERE phase_id IN ({phases}) AND is_repeat = %s AND value IS NOT NULL
    WINDOW w AS (PARTITION BY image_id, phase_id ORDER BY value)
), outliers AS (
    SELECT image_id, COUNT(*) AS n_outliers FROM valued
    WHERE n_valued >= 2 AND (below IS NULL OR value - below >= %s) AND (above IS NULL OR above - value >= %s)
    GROUP BY image_id
), flags AS (
    SELECT image_id,
           MAX(CASE WHEN skip_reason <> '' THEN 1 ELSE 0 END)
           + MAX(CASE WHEN uncertain THEN 1 ELSE 0 END)
           + MAX(CASE WHEN is_valid THEN 0 ELSE 1 END) AS n_flags
    FROM labeling_label
    WHERE phase_id IN ({phases}) AND is_repeat = %s
    GROUP BY image_id
)
SELECT flags.image_id, COALESCE(outliers.n_outliers, 0) + flags.n_flags AS n_reasons
FROM flags LEFT JOIN outliers ON outliers.image_id = flags.image_id
WHERE COALESCE(outliers.n_outliers, 0) + flags.n_flags > 0
ORDER BY n_reasons DESC, flags.image_id
"""


def review_candidate_ids(
    phase: Phase, *, outlier_distance: float = OUTLIER_DISTANCE, compute: bool = False
) -> list[tuple[int, int]]:
    """``(image id, number of reasons)`` of every image :func:`review_candidates` lists, most reasons first.

    Cached until a label of the project changes (new, changed or deleted: the consensus cache's phase
    versions); the worker's precompute fills it (``services.precompute``, ``compute=True``), and with a
    worker a changed list is served from the last one until then.
    """
    versions = sorted(phase_versions(phase.project).items())
    digest = hashlib.sha256(repr(versions).encode()).hexdigest()[:32]
    key = f"{CANDIDATES_CACHE_PREFIX}:{phase.pk}:{float(outlier_distance)}:{digest}"
    latest_key = f"{CANDIDATES_CACHE_PREFIX}:{phase.pk}:{float(outlier_distance)}:latest"
    ids = cache.get(key)
    if ids is None and not compute and queue.background_precompute_enabled():
        # With a worker: the last list while the precompute task makes the new one (the labels shown
        # for each listed image are always read fresh).
        ids = cache.get(latest_key)
        if ids is not None:
            queue.precompute_schedule(phase.project_id)
    if ids is None:
        ids = _candidate_ids_query(phase, float(outlier_distance))
        cache.set_many({key: ids, latest_key: ids}, CANDIDATES_CACHE_TIMEOUT)
    return ids


def _candidate_ids_query(phase: Phase, outlier_distance: float) -> list[tuple[int, int]]:
    phase_ids = [int(i) for i in review_phases(phase).values_list("id", flat=True)]
    if not phase_ids:
        return []
    sql = _CANDIDATES_SQL.format(phases=", ".join(["%s"] * len(phase_ids)))
    params = [*phase_ids, False, float(outlier_distance), float(outlier_distance), *phase_ids, False]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(int(i), int(n)) for i, n in cursor.fetchall()]


def review_details(phase: Phase, image_ids, *, outlier_distance: float = OUTLIER_DISTANCE) -> dict[int, dict]:
    """Per image of ``image_ids``: ``{"image_id", "reasons", "labels"}`` (reasons empty when none)."""
    labels = (
        Label.objects.filter(phase__in=review_phases(phase), is_repeat=False, image_id__in=list(image_ids))
        .select_related("labeler", "phase")
        .order_by("image_id", "phase_id", "labeler__pseudonym")
    )
    by_image: dict[int, list[Label]] = defaultdict(list)
    for label in labels:
        by_image[label.image_id].append(label)
    details = {}
    for image_id, image_labels in by_image.items():
        reasons = []
        by_phase = defaultdict(list)
        for label in image_labels:
            by_phase[label.phase_id].append(label)
        for phase_labels in by_phase.values():
            valued = [lab for lab in phase_labels if lab.value is not None]
            far = outlier_labels([lab.value for lab in valued], distance=outlier_distance)
            for lab, is_outlier in zip(valued, far, strict=True):
                if is_outlier:
                    reasons.append(f"{lab.labeler.pseudonym}'s {lab.selection_text} is far from every other label")
        if any(lab.skip_reason for lab in image_labels):
            reasons.append("skipped by " + ", ".join(lab.labeler.pseudonym for lab in image_labels if lab.skip_reason))
        if any(lab.uncertain for lab in image_labels):
            reasons.append("uncertain: " + ", ".join(lab.labeler.pseudonym for lab in image_labels if lab.uncertain))
        if any(not lab.is_valid for lab in image_labels):
            reasons.append("invalid (non-adjacent) selection")
        details[image_id] = {
            "image_id": image_id,
            "reasons": reasons,
            "labels": [review_label_row(lab) for lab in image_labels],
        }
    return details


def review_candidates(phase: Phase, *, outlier_distance: float = OUTLIER_DISTANCE, limit: int = 500) -> dict:
    """Images that look like mistakes.

    For the post-calibration phase, every earlier phase's labels are reviewed;
    for another phase, its own. Repeated (test-retest) labels are left out. An
    image is listed when a selection is at least ``outlier_distance`` tones from
    every other labeler's value in the same phase (the rule of
    :func:`metrics.agreement.outlier_labels`), or it has skips, uncertain or
    invalid labels. Most reasons first; the first ``limit`` with their labels.
    """
    ids = review_candidate_ids(phase, outlier_distance=outlier_distance)
    shown = [i for i, _ in ids[:limit]]
    details = review_details(phase, shown, outlier_distance=outlier_distance)
    return {"n_candidates": len(ids), "candidates": [details[i] for i in shown]}
