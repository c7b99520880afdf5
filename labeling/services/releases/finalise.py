"""Final labels of a release: the database streamed in chunks of images, reduced by ``metrics.finalise``.

Each label counts with its CURRENT answer (``Label`` mirrors its latest revision: after a labeler's
change, a post-calibration relabel or a lead's correction). Which labels count for an image:

* calibration-2 repeats (``Label.is_repeat``, the test-retest labels) never count;
* ``rule["phases"] == "latest"``: the labels of the latest phase (by ``Phase.ORDER``) that labelled
  the image; a list of phase kinds: the labels of those phases;
* a labeler counts at most once per image (their label of the latest of the chosen phases).

Nothing here holds the project's labels at once: images are read in chunks of :data:`CHUNK_IMAGES`
(by id); the labels (joined with their revisions when the files need them) and the baselines are each one
query ordered by image id, read through server-side cursors as the chunks advance (plain tuples, no model
instances; JSON columns as their text, decoded once per distinct value by ``tables``).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import TextField
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
#: Rows per round trip when the labels (with their revisions) and baselines are streamed from the database (each
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
    "time_spent_ms",
    "n_revisions",
)
IMAGE_FIELDS = ("id", "external_id", "subject_id", "sha256", "box_x", "box_y", "box_width", "box_height")


@dataclass
class Chunk:
    """One chunk of images (by id) with their labels, which count, the final tones and the categories."""

    images: list[tuple]  # IMAGE_FIELDS, by id
    image_ids: np.ndarray
    label_image: np.ndarray  # position of each label's image in ``images``
    counted: np.ndarray  # bool per label
    final: dict[str, np.ndarray]
    categories: dict[str, np.ndarray]  # category -> bool per image
    # Per label (as ``label_columns``): its current revision's id, tone order (JSON text) and client info (JSON
    # text) (None for a label without a revision), whether it was corrected (a bool array), the reason of
    # its latest correction (None: none). Empty without ``details``.
    revision_columns: list = field(default_factory=list)
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


#: The revision columns joined to each label row when the files need them (after ``LABEL_FIELDS``).
REVISION_FIELDS = (
    "revisions__id",
    "revision_tone_order",
    "revision_client_info",
    "revisions__source",
    "revisions__reason",
)
_OWN_CHANGES = (LabelRevision.Source.LABELER.value, LabelRevision.Source.CHANGE.value)


def _label_stream(phase_ids: list[int], *, with_revisions: bool) -> _Stream:
    """Every label of the phases, by (image id, label id): one query for the release, streamed.

    ``with_revisions``: one row per revision of each label instead (by number; a label without a revision
    once, its revision columns None), the revision's JSON as its text: the labels and their revisions in
    one sort instead of two merged streams."""
    labels = Label.objects.filter(phase_id__in=phase_ids)
    if not with_revisions:
        rows = labels.order_by("image_id", "id").values_list(*LABEL_FIELDS)
    else:
        rows = (
            labels.order_by("image_id", "id", "revisions__number")
            .annotate(
                revision_tone_order=Cast("revisions__tone_order", TextField()),
                revision_client_info=Cast("revisions__client_info", TextField()),
            )
            .values_list(*LABEL_FIELDS, *REVISION_FIELDS)
        )
    return _Stream(rows.iterator(chunk_size=STREAM_ROWS), 1)


def revision_facts(
    label_ids: np.ndarray, is_correction: np.ndarray, is_own_change: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which revision is each label's current one, and which its latest correction; rows by label and number.

    Returns per label (in the rows' order): its first row, the row of its current revision, the row of its
    latest correction (-1: never corrected). The current revision is the one ``Label`` mirrors: the latest,
    except that a labeler's own change after a correction does not replace it
    (``services.labels.revision_counts``)."""
    n = label_ids.size
    if not n:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    starts = np.flatnonzero(np.concatenate(([True], label_ids[1:] != label_ids[:-1])))
    corrections = is_correction.astype(np.int64)
    before = np.cumsum(corrections) - corrections  # corrections in the rows before each row
    group = np.repeat(np.arange(starts.size), np.diff(np.append(starts, n)))
    earlier_corrections = before - before[starts][group]  # ... of the same label
    row = np.arange(n, dtype=np.int64)
    current = np.maximum.reduceat(np.where(is_own_change & (earlier_corrections > 0), -1, row), starts)
    latest_correction = np.maximum.reduceat(np.where(is_correction, row, -1), starts)
    return starts, current, latest_correction


def _take(rows: list[tuple], index: np.ndarray) -> list[tuple] | tuple[tuple, ...]:
    """The rows at ``index`` (one C call, not a Python loop)."""
    if index.size == len(rows):  # every row (``index`` is then 0, 1, 2, ...)
        return rows
    if index.size == 1:
        return (rows[int(index[0])],)
    return operator.itemgetter(*index.tolist())(rows)


def _column(rows: list[tuple] | tuple[tuple, ...], k: int) -> tuple:
    """The ``k``-th value of each row (``map`` in C: ``zip(*rows)`` makes an iterator per row, 2x slower)."""
    return tuple(map(operator.itemgetter(k), rows))


def _split_revisions(rows: list[tuple]) -> tuple[list[tuple], list]:
    """Label rows joined with their revisions (``LABEL_FIELDS`` + ``REVISION_FIELDS``, by label and number)
    -> the label columns (one value per label) and the revision columns of ``Chunk.revision_columns``."""
    n_fields = len(LABEL_FIELDS)
    if not rows:
        return [()] * n_fields, [(), (), (), np.zeros(0, dtype=bool), []]
    label_ids = np.fromiter(map(operator.itemgetter(0), rows), dtype=np.int64, count=len(rows))
    # Each revision's source as 1 (a correction), 2 (the labeler's own answer or change) or 0.
    kinds = dict.fromkeys(_OWN_CHANGES, 2) | {LabelRevision.Source.CORRECTION.value: 1}
    sources = map(operator.itemgetter(n_fields + 3), rows)
    kind = np.fromiter(map(kinds.get, sources, itertools.repeat(0)), dtype=np.int8, count=len(rows))
    starts, current, correction = revision_facts(label_ids, kind == 1, kind == 2)
    first_rows = _take(rows, starts)
    current_rows = first_rows if np.array_equal(current, starts) else _take(rows, current)
    corrected = correction >= 0
    reasons: list[str | None] = [None] * starts.size
    for position, row in zip(np.flatnonzero(corrected).tolist(), correction[corrected].tolist(), strict=True):
        reasons[position] = rows[row][n_fields + 4]
    return [_column(first_rows, k) for k in range(n_fields)], [
        *(_column(current_rows, n_fields + k) for k in range(3)),
        corrected,
        reasons,
    ]


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
    baselines: bool | None = None,
    chunk_images: int | None = None,
) -> Generator[Chunk, None, None]:
    """The project's images in chunks (by id), each with its labels, what counts and the final tones.

    ``details``: also each label's current revision facts and (unless ``baselines`` is False) each image's
    current baseline (for the files; the labels table alone does not need the baselines).
    """
    context = context or context_load(project, rule)
    phase_ids = sorted(context.phase_kind)
    with_baselines = details if baselines is None else baselines
    # The labels (with their revisions) and the baselines are each one query ordered by image id, read as the
    # chunks of images advance (one sort in the database instead of an index lookup per label).
    with _whole_result_plans():
        label_stream = _label_stream(phase_ids, with_revisions=details)
        baseline_stream = _baseline_stream(project) if with_baselines else None
    for images in _image_chunks(project, chunk_images or CHUNK_IMAGES):
        image_ids = np.array([row[0] for row in images], dtype=np.int64)
        hi = int(image_ids[-1])
        rows = label_stream.until(hi)
        revision_columns: list = []
        if details:
            columns, revision_columns = _split_revisions(rows)
        else:
            columns = [_column(rows, k) for k in range(len(LABEL_FIELDS))]
        del rows
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
            revision_columns=revision_columns,
            label_labeler=labeler,
            label_value=values,
            lead_reasons=lead_reasons,
        )
        if baseline_stream is not None:
            chunk.baselines = {row[0]: row for row in baseline_stream.until(hi)}
        yield chunk


def project_has_labels(project: Project) -> bool:
    """Whether any image has a label that a release could count (repeats never count)."""
    return Label.objects.filter(phase__project=project, is_repeat=False).exists()
