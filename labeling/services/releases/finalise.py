"""Final labels of a release: the database streamed in chunks of images, reduced by ``metrics.finalise``.

Each label counts with its CURRENT answer (``Label`` mirrors its latest revision: after a labeler's
change, a post-calibration relabel or a lead's correction). Which labels count for an image:

* calibration-2 repeats (``Label.is_repeat``, the test-retest labels) never count;
* ``rule["phases"] == "latest"``: the labels of the latest phase (by ``Phase.ORDER``) that labelled
  the image; a list of phase kinds: the labels of those phases;
* a labeler counts at most once per image (their label of the latest of the chosen phases).

Nothing here holds the project's labels at once: images are read in chunks of :data:`CHUNK_IMAGES`
(by id); the labels, their revisions and the baselines are each one query ordered by image id, read
through server-side cursors as the chunks advance (plain tuples, no model instances; JSON columns as their
text, decoded once per distinct value by ``tables``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import Q, TextField
from django.db.models.functions import Cast

from metrics.agreement import OUTLIER_DISTANCE
from metrics.finalise import final_tones

from ...models import Assignment, ImageBaseline, ImageExclusion, Label, LabelRevision, Phase, Project
from ..baselines import (
    BASELINE_CODE_VERSION,
    baseline_parameters_effective,
    baseline_parameters_hash,
    baselines_current,
)
from .rules import CATEGORIES

#: Images per chunk (each chunk is one row group of the Parquet files: changing it changes their bytes).
CHUNK_IMAGES = 2000
#: Rows per round trip when the project's images are streamed from the database.
DB_CHUNK = 2000
#: Rows per round trip when the labels, revisions and baselines are streamed from the database (each
#: fetch is held by the driver while it is read: 10,000 added about 10 MB to a build's RSS at 250,000 images).
STREAM_ROWS = 2000

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
IMAGE_FIELDS = ("id", "external_id", "subject_id", "sha256", "box_x", "box_y", "box_width", "box_height")


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
    # label id -> [current revision id, its tone order (JSON text), its client info (JSON text), corrected,
    # the reason of the latest correction or None]
    revisions: dict[int, list] = field(default_factory=dict)
    baselines: dict[int, tuple] = field(default_factory=dict)  # image id -> current baseline row (flags: JSON text)
    # LABEL_FIELDS as columns (tuples, one value per label), and as arrays: labeler ids, values (NaN: none).
    label_columns: list[tuple] = field(default_factory=list)
    label_labeler: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    label_value: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # image id -> the reason a lead gave when excluding it in the data manager (open exclusions only).
    lead_reasons: dict[int, str] = field(default_factory=dict)


@dataclass
class Context:
    """What every chunk needs, read once per release."""

    project: Project
    rule: dict[str, Any]
    phase_kind: dict[int, str]  # phase id -> kind
    phase_rank: dict[int, int]  # phase id -> index in Phase.ORDER
    open_relabels: np.ndarray  # image ids, sorted
    good_baselines: np.ndarray  # image ids, sorted (an array: 2 MB at 250,000 images, a set of ints takes 16)
    n_images: int


def _id_array(ids) -> np.ndarray:
    """Distinct ids of a ``values_list(..., flat=True)``, sorted, streamed into an array."""
    return np.unique(np.fromiter(ids.order_by().iterator(chunk_size=STREAM_ROWS), dtype=np.int64))


def context_load(project: Project, rule: dict[str, Any]) -> Context:
    """The project's phases and the image sets of the categories that are not computed per chunk."""
    phases = list(project.phases.values_list("id", "kind"))
    open_relabels = _id_array(
        Assignment.objects.filter(phase__project=project, phase__kind=Phase.Kind.POST_CALIBRATION, done_at__isnull=True)
        .exclude(kind=Assignment.Kind.LABEL, request_reason="")
        .values_list("image_id", flat=True)
    )
    good = _id_array(
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


def _members(ids: np.ndarray, sorted_ids: np.ndarray) -> np.ndarray:
    """Whether each of ``ids`` is in ``sorted_ids`` (a binary search each: no sort of the whole set per chunk)."""
    if not sorted_ids.size:
        return np.zeros(ids.shape, dtype=bool)
    found = np.minimum(np.searchsorted(sorted_ids, ids), sorted_ids.size - 1)
    return sorted_ids[found] == ids


def lead_exclusions(project: Project, lo: int, hi: int) -> dict[int, str]:
    """The images from id ``lo`` to ``hi`` that a lead excluded (and did not include again), with the
    reason: one small query per chunk, so each chunk's category and reasons are read together."""
    rows = ImageExclusion.objects.filter(
        image__project_id=project.id, image_id__gte=lo, image_id__lte=hi, included_at__isnull=True
    ).values_list("image_id", "reason")
    return dict(rows.order_by())


def _categories(
    final: dict[str, np.ndarray],
    image_ids: np.ndarray,
    outliers: np.ndarray,
    lead_excluded: np.ndarray,
    context: Context,
) -> dict[str, np.ndarray]:
    n_any = final["n_labels"] + final["n_skipped"]
    minimum = context.rule["min_valid_labels"]
    result = {
        "no_labels": n_any == 0,
        "too_few_labels": (n_any > 0) & (final["n_valid"] < minimum),
        "no_near_consensus": (final["n_valid"] >= 2) & ~final["near_consensus"],
        "open_relabels": _members(image_ids, context.open_relabels),
        "outliers": outliers,
        "no_baseline": ~_members(image_ids, context.good_baselines),
        "excluded_by_lead": _members(image_ids, lead_excluded),
    }
    assert list(result) == list(CATEGORIES)
    return result


def excluded_reasons(chunk: Chunk, include: dict[str, bool]) -> list[str]:
    """Per image of the chunk: the excluded categories joined by ";" (empty: included)."""
    excluded = [(name, chunk.categories[name]) for name in CATEGORIES if not include[name]]
    return [";".join(name for name, flags in excluded if flags[i]) for i in range(len(chunk.images))]


class _Stream:
    """Rows ordered by image id (at ``key``), read through a server-side cursor and handed out chunk by chunk."""

    def __init__(self, rows: Iterator[tuple], key: int) -> None:
        self._rows = rows
        self._key = key
        self._next = next(rows, None)

    def until(self, hi: int) -> list[tuple]:
        """The rows up to image id ``hi`` (included)."""
        out = []
        row, key, rows = self._next, self._key, self._rows
        while row is not None and row[key] <= hi:
            out.append(row)
            row = next(rows, None)
        self._next = row
        return out


@contextmanager
def _whole_result_plans() -> Iterator[None]:
    """PostgreSQL plans a server-side cursor for its first rows (``cursor_tuple_fraction`` 0.1: index lookups
    per row); the streams are read to the end, so their cursors are declared planning for every row (one
    sort), then the setting is restored."""
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SHOW cursor_tuple_fraction")
        (previous,) = cursor.fetchone()
        cursor.execute("SET cursor_tuple_fraction = 1.0")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('cursor_tuple_fraction', %s, false)", [previous])


def _label_stream(phase_ids: list[int]) -> _Stream:
    """Every label of the phases, by (image id, label id): one query for the release, streamed."""
    rows = (
        Label.objects.filter(phase_id__in=phase_ids)
        .order_by("image_id", "id")
        .values_list(*LABEL_FIELDS)
        .iterator(chunk_size=STREAM_ROWS)
    )
    return _Stream(rows, 1)


def _revision_stream(phase_ids: list[int]) -> _Stream:
    """Every revision of the phases' labels, by (image id, label id, number), JSON as its text: one query."""
    rows = (
        LabelRevision.objects.filter(label__phase_id__in=phase_ids)
        .order_by("label__image_id", "label_id", "number")
        .annotate(
            tone_order_text=Cast("tone_order", TextField()),
            client_info_text=Cast("client_info", TextField()),
            is_correction=Q(source=LabelRevision.Source.CORRECTION),
            is_own_change=Q(source__in=[LabelRevision.Source.LABELER, LabelRevision.Source.CHANGE]),
        )
        .values_list(
            "label_id",
            "label__image_id",
            "id",
            "tone_order_text",
            "client_info_text",
            "is_correction",
            "reason",
            "is_own_change",
        )
        .iterator(chunk_size=STREAM_ROWS)
    )
    return _Stream(rows, 1)


def _revisions(rows: list[tuple]) -> dict[int, list]:
    """Per label: its current revision's id, tone order and display (as JSON text), and its corrections
    (whether any, the latest one's reason); ``rows`` by label and number. The current revision is the one
    ``Label`` mirrors: a labeler's own change after a correction does not replace it
    (``services.labels.revision_counts``)."""
    out: dict[int, list] = {}
    for label_id, _image_id, revision_id, tone_order, client_info, is_correction, reason, is_own_change in rows:
        facts = out.get(label_id)
        if facts is None:
            facts = out[label_id] = [revision_id, tone_order, client_info, False, None]
        elif not (facts[3] and is_own_change):
            facts[0], facts[1], facts[2] = revision_id, tone_order, client_info
        if is_correction:
            facts[3], facts[4] = True, reason
    return out


BASELINE_FIELDS = (
    "image_id",
    "status",
    "ita_median",
    "ita_class",
    "lightness_median",
    "stats__hue_angle",
    "albedo",
    "albedo_normalized",
    "flags",
    "parameters_hash",
)


def _baseline_stream(project: Project) -> _Stream:
    """The project's current baselines by image id (flags as JSON text): one query for the release, streamed."""
    rows = (
        ImageBaseline.objects.filter(
            image__project=project,
            parameters_hash=baseline_parameters_hash(baseline_parameters_effective(project)),
            code_version=BASELINE_CODE_VERSION,
        )
        .order_by("image_id", "id")
        .annotate(flags_text=Cast("flags", TextField()))
        .values_list(*(("flags_text" if name == "flags" else name) for name in BASELINE_FIELDS))
        .iterator(chunk_size=STREAM_ROWS)
    )
    return _Stream(rows, 0)


def _positions(column: tuple) -> np.ndarray:
    """Tone positions as int64, 0 for none (None or 0)."""
    if not column:
        return np.zeros(0, dtype=np.int64)
    return np.array([0 if t is None else t for t in column], dtype=np.int64)


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
    # The labels and revisions are each one query ordered by image id, read as the chunks of images advance
    # (one sort in the database instead of an index lookup per label).
    with _whole_result_plans():
        label_stream = _label_stream(phase_ids)
        revision_stream = _revision_stream(phase_ids) if details else None
        baseline_stream = _baseline_stream(project) if details else None
    for images in _image_chunks(project, chunk_images or CHUNK_IMAGES):
        image_ids = np.array([row[0] for row in images], dtype=np.int64)
        hi = int(image_ids[-1])
        labels = label_stream.until(hi)
        columns = list(zip(*labels)) if labels else [()] * len(LABEL_FIELDS)
        label_image = np.searchsorted(image_ids, np.array(columns[1], dtype=np.int64))
        labeler = np.array(columns[3], dtype=np.int64)
        rank = np.array([context.phase_rank[phase_id] for phase_id in columns[2]], dtype=np.int64)
        is_repeat = np.array(columns[4], dtype=bool)
        values = np.array(columns[7], dtype=np.float64)  # None -> NaN
        lead_reasons = lead_exclusions(project, int(image_ids[0]), hi)
        counted = counted_labels(label_image, labeler, rank, is_repeat, len(images), context.rule["phases"])
        used = np.flatnonzero(counted)
        final = final_tones(
            label_image[used],
            _positions(columns[5])[used],
            _positions(columns[6])[used],
            np.array(columns[8], dtype=bool)[used],
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
                outlier_images(label_image, rank, values, is_repeat, len(images)),
                np.array(sorted(lead_reasons), dtype=np.int64),
                context,
            ),
            label_columns=columns,
            label_labeler=labeler,
            label_value=values,
            lead_reasons=lead_reasons,
        )
        if details:
            chunk.revisions = _revisions(revision_stream.until(hi))
            chunk.baselines = {row[0]: row for row in baseline_stream.until(hi)}
        yield chunk


def project_has_labels(project: Project) -> bool:
    """Whether any image has a label that a release could count (repeats never count)."""
    return Label.objects.filter(phase__project=project, is_repeat=False).exists()
