"""Final labels of a release: the database streamed in chunks of images, reduced by ``metrics.finalise``.

Each label counts with its CURRENT answer (``Label`` mirrors its latest revision: after a labeler's
change, a post-calibration relabel or a lead's correction). Which labels count for an image:

* calibration-2 repeats (``Label.is_repeat``, the test-retest labels) never count;
* ``rule["phases"] == "latest"``: the labels of the latest phase (by ``Phase.ORDER``) that labelled
  the image; a list of phase kinds: the labels of those phases;
* a labeler counts at most once per image (their label of the latest of the chosen phases).

Nothing here holds the project's labels at once: images are read in chunks of :data:`CHUNK_IMAGES`
(by id), and each chunk's labels with ``values_list(...).iterator()`` over that id range.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from metrics.agreement import OUTLIER_DISTANCE
from metrics.finalise import final_tones

from ...models import Assignment, ImageBaseline, Label, LabelRevision, Phase, Project
from ..baselines import baselines_current
from .rules import CATEGORIES

#: Images per chunk (their labels, revisions and baselines are read per chunk).
CHUNK_IMAGES = 2000
#: Rows per round trip when a chunk's rows are streamed from the database.
DB_CHUNK = 2000

LABEL_FIELDS = (
    "id",
    "image_id",
    "phase_id",
    "labeler_id",
    "is_repeat",
    "tone_low",
    "tone_high",
    "value",
    "uncertain",
    "skip_reason",
    "is_valid",
    "time_spent_ms",
    "n_revisions",
)
IMAGE_FIELDS = ("id", "external_id", "subject_id", "sha256")


@dataclass
class Chunk:
    """One chunk of images (by id) with their labels, which count, the final tones and the categories."""

    images: list[tuple]  # IMAGE_FIELDS, by id
    image_ids: np.ndarray
    labels: list[tuple]  # LABEL_FIELDS, by (image id, label id)
    label_image: np.ndarray  # position of each label's image in ``images``
    counted: np.ndarray  # bool per label
    final: dict[str, np.ndarray]
    categories: dict[str, np.ndarray]  # category -> bool per image
    revisions: dict[int, dict[str, Any]] = field(default_factory=dict)  # label id -> current revision facts
    baselines: dict[int, tuple] = field(default_factory=dict)  # image id -> current baseline row


@dataclass
class Context:
    """What every chunk needs, read once per release."""

    project: Project
    rule: dict[str, Any]
    phase_kind: dict[int, str]  # phase id -> kind
    phase_rank: dict[int, int]  # phase id -> index in Phase.ORDER
    open_relabels: set[int]
    good_baselines: set[int]
    n_images: int


def context_load(project: Project, rule: dict[str, Any]) -> Context:
    """The project's phases and the image sets of the categories that are not computed per chunk."""
    phases = list(project.phases.values_list("id", "kind"))
    open_relabels = set(
        Assignment.objects.filter(phase__project=project, phase__kind=Phase.Kind.POST_CALIBRATION, done_at__isnull=True)
        .exclude(kind=Assignment.Kind.LABEL, request_reason="")
        .values_list("image_id", flat=True)
    )
    good = set(
        baselines_current(project).filter(status=ImageBaseline.Status.OK, flags=[]).values_list("image_id", flat=True)
    )
    return Context(
        project=project,
        rule=rule,
        phase_kind=dict(phases),
        phase_rank={pid: Phase.ORDER.index(kind) for pid, kind in phases},
        open_relabels=open_relabels,
        good_baselines=good,
        n_images=project.images.count(),
    )


def _image_chunks(project: Project, size: int) -> Iterator[list[tuple]]:
    rows: list[tuple] = []
    for row in project.images.order_by("id").values_list(*IMAGE_FIELDS).iterator(chunk_size=DB_CHUNK):
        rows.append(row)
        if len(rows) == size:
            yield rows
            rows = []
    if rows:
        yield rows


def counted_labels(
    label_image: np.ndarray,
    labeler: np.ndarray,
    rank: np.ndarray,
    is_repeat: np.ndarray,
    n_images: int,
    phases: str | list[str],
) -> np.ndarray:
    """Which labels count (bool per label), by the rule's phase choice; one label per (image, labeler).

    ``rank`` is each label's phase index in ``Phase.ORDER``.
    """
    eligible = ~is_repeat
    if phases != "latest":
        chosen = np.array([Phase.ORDER.index(kind) for kind in phases], dtype=np.int64)
        eligible &= np.isin(rank, chosen)
    counted = eligible.copy()
    if phases == "latest" and eligible.any():
        latest = np.full(n_images, -1, dtype=np.int64)
        np.maximum.at(latest, label_image[eligible], rank[eligible])
        counted &= rank == latest[label_image]
    # A labeler once per image: of their counted labels of the image, the one of the latest phase.
    index = np.flatnonzero(counted)
    if index.size > 1:
        order = index[np.lexsort((rank[index], labeler[index], label_image[index]))]
        same_as_next = (label_image[order][1:] == label_image[order][:-1]) & (labeler[order][1:] == labeler[order][:-1])
        counted[order[:-1][same_as_next]] = False
    return counted


def outlier_images(
    label_image: np.ndarray, rank: np.ndarray, values: np.ndarray, is_repeat: np.ndarray, n_images: int
) -> np.ndarray:
    """Images with a label far from every other label of the same phase: the rule of the post-calibration
    review (``services.review.review_candidates``, ``metrics.agreement.outlier_labels``), vectorised.

    Reviewed like ``review_candidates`` does for the post-calibration phase: the labels of the earlier
    phases, repeats left out, labels without a value neither flagged nor compared with. ``values``: NaN
    for no value; ``rank``: the phase's index in ``Phase.ORDER``.
    """
    flagged = np.zeros(n_images, dtype=bool)
    keep = ~is_repeat & ~np.isnan(values) & (rank != Phase.ORDER.index(Phase.Kind.POST_CALIBRATION))
    image, phase, value = label_image[keep], rank[keep], values[keep]
    if value.size < 2:
        return flagged
    order = np.lexsort((value, phase, image))
    image, phase, value = image[order], phase[order], value[order]
    same = (image[1:] == image[:-1]) & (phase[1:] == phase[:-1])
    to_next = np.append(np.where(same, np.diff(value), np.inf), np.inf)
    to_previous = np.insert(np.where(same, np.diff(value), np.inf), 0, np.inf)
    nearest = np.minimum(to_next, to_previous)  # inf: the only valued label of its image and phase
    flagged[image[np.isfinite(nearest) & (nearest >= OUTLIER_DISTANCE)]] = True
    return flagged


def _categories(
    final: dict[str, np.ndarray], image_ids: np.ndarray, outliers: np.ndarray, context: Context
) -> dict[str, np.ndarray]:
    n_any = final["n_labels"] + final["n_skipped"]
    minimum = context.rule["min_valid_labels"]
    result = {
        "no_labels": n_any == 0,
        "too_few_labels": (n_any > 0) & (final["n_valid"] < minimum),
        "no_near_consensus": (final["n_valid"] >= 2) & ~final["near_consensus"],
        "open_relabels": np.isin(image_ids, np.fromiter(context.open_relabels, dtype=np.int64)),
        "outliers": outliers,
        "no_baseline": ~np.isin(image_ids, np.fromiter(context.good_baselines, dtype=np.int64)),
    }
    assert list(result) == list(CATEGORIES)
    return result


def excluded_reasons(chunk: Chunk, include: dict[str, bool]) -> list[str]:
    """Per image of the chunk: the excluded categories joined by ";" (empty: included)."""
    excluded = [(name, chunk.categories[name]) for name in CATEGORIES if not include[name]]
    return [";".join(name for name, flags in excluded if flags[i]) for i in range(len(chunk.images))]


def _revisions(phase_ids: list[int], lo: int, hi: int) -> dict[int, dict[str, Any]]:
    """Per label of the image id range: its current revision's id, tone order and display, and its corrections."""
    out: dict[int, dict[str, Any]] = {}
    rows = (
        LabelRevision.objects.filter(label__phase_id__in=phase_ids, label__image_id__gte=lo, label__image_id__lte=hi)
        .order_by("label_id", "number")
        .values_list("label_id", "id", "source", "reason", "tone_order", "client_info")
        .iterator(chunk_size=DB_CHUNK)
    )
    for label_id, revision_id, source, reason, tone_order, client_info in rows:
        facts = out.setdefault(label_id, {"corrected": False, "correction_reason": None})
        facts.update(revision_id=revision_id, tone_order=tone_order or [], client_info=client_info or {})
        if source == LabelRevision.Source.CORRECTION:
            facts["corrected"] = True
            facts["correction_reason"] = reason
    return out


BASELINE_FIELDS = (
    "image_id",
    "status",
    "ita_median",
    "ita_class",
    "albedo",
    "albedo_normalized",
    "flags",
    "parameters_hash",
)


def _baselines(project: Project, lo: int, hi: int) -> dict[int, tuple]:
    rows = (
        baselines_current(project)
        .filter(image_id__gte=lo, image_id__lte=hi)
        .order_by("image_id", "id")
        .values_list(*BASELINE_FIELDS)
    )
    return {row[0]: row for row in rows}


def release_chunks(
    project: Project,
    rule: dict[str, Any],
    *,
    context: Context | None = None,
    details: bool = False,
    chunk_images: int | None = None,
) -> Iterator[Chunk]:
    """The project's images in chunks (by id), each with its labels, what counts and the final tones.

    ``details``: also each label's current revision facts and each image's current baseline (for the files).
    """
    context = context or context_load(project, rule)
    phase_ids = sorted(context.phase_kind)
    for images in _image_chunks(project, chunk_images or CHUNK_IMAGES):
        image_ids = np.array([row[0] for row in images], dtype=np.int64)
        lo, hi = int(image_ids[0]), int(image_ids[-1])
        labels = list(
            Label.objects.filter(phase_id__in=phase_ids, image_id__gte=lo, image_id__lte=hi)
            .order_by("image_id", "id")
            .values_list(*LABEL_FIELDS)
            .iterator(chunk_size=DB_CHUNK)
        )
        label_image = np.searchsorted(image_ids, np.array([row[1] for row in labels], dtype=np.int64))
        labeler = np.array([row[3] for row in labels], dtype=np.int64)
        rank = np.array([context.phase_rank[row[2]] for row in labels], dtype=np.int64)
        is_repeat = np.array([row[4] for row in labels], dtype=bool)
        counted = counted_labels(label_image, labeler, rank, is_repeat, len(images), context.rule["phases"])
        used = np.flatnonzero(counted)
        final = final_tones(
            label_image[used],
            np.array([labels[i][5] or 0 for i in used], dtype=np.int64),
            np.array([labels[i][6] or 0 for i in used], dtype=np.int64),
            np.array([labels[i][8] for i in used], dtype=bool),
            n_images=len(images),
            aggregation=context.rule["aggregation"],
            tie=context.rule["tie"],
        )
        chunk = Chunk(
            images=images,
            image_ids=image_ids,
            labels=labels,
            label_image=label_image,
            counted=counted,
            final=final,
            categories=_categories(
                final,
                image_ids,
                outlier_images(
                    label_image,
                    rank,
                    np.array([np.nan if row[7] is None else row[7] for row in labels], dtype=np.float64),
                    is_repeat,
                    len(images),
                ),
                context,
            ),
        )
        if details:
            chunk.revisions = _revisions(phase_ids, lo, hi)
            chunk.baselines = _baselines(project, lo, hi)
        yield chunk


def project_has_labels(project: Project) -> bool:
    """Whether any image has a label that a release could count (repeats never count)."""
    return Label.objects.filter(phase__project=project, is_repeat=False).exists()
