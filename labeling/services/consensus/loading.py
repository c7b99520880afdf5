"""Loading a phase's labels: one query into NumPy columns, pivoted to images x labelers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from django.db import connection

from metrics import agreement

from ...models import Image, Label, Phase

_LABEL_FIELDS = (
    "image_id",
    "labeler_id",
    "tone_low",
    "tone_high",
    "uncertain",
    "is_repeat",
    "time_spent_ms",
)


@dataclass
class PhaseLabels:
    """The labels of one phase as arrays (between-labeler part pivoted images x labelers)."""

    image_ids: np.ndarray  # (n_images,) images with a non-repeat label
    labeler_ids: np.ndarray  # (n_labelers,) every labeler with a label in the phase
    first: np.ndarray  # (n_images, n_labelers) tone_low, NaN if no label or a skip
    second: np.ndarray  # (n_images, n_labelers) tone_high, NaN if a single tone
    uncertain: np.ndarray  # (n_images, n_labelers) bool
    labelled: np.ndarray  # (n_images, n_labelers) bool: a label exists (skips included)
    # One entry per label row (repeats included): workload statistics.
    row_labeler: np.ndarray
    row_skip: np.ndarray
    row_uncertain: np.ndarray
    row_repeat: np.ndarray
    row_seconds: np.ndarray

    @property
    def values(self) -> np.ndarray:
        """Images x labelers numeric values (NaN for no label, a skip or an invalid pair)."""
        return agreement.selection_values(self.first, self.second)


# PostgreSQL: the seven columns come back as one bytea value, fixed-width big-endian rows read by NumPy
# without a Python object per value: about 5x less client CPU than the previous
# ``array_agg`` query's arrays of 400,000 Python ints each (bench/bench_dashboard.py). Each row is three
# int8 values: the image id, the labeler id, and the five small columns packed into one (``_PACKED``:
# fewer sends and concatenations per row, about a quarter less server time than a send per column at
# 400,000 labels). Widths: the ids are bigint; tones are smallint and checked non-negative (15 bits),
# the flags booleans, the time a non-negative integer (31 bits): 63 bits, so no value is cut.
_PACKED = (
    ("low", 48, 0x7FFF),
    ("high", 33, 0x7FFF),
    ("uncertain", 32, 1),
    ("repeat", 31, 1),
    ("ms", 0, 0x7FFFFFFF),
)
_BYTES_SQL = """
SELECT string_agg(
    int8send(image_id::int8) || int8send(labeler_id::int8)
    || int8send((COALESCE(tone_low, 0)::int8 << 48) | (COALESCE(tone_high, 0)::int8 << 33)
        | (uncertain::int::int8 << 32) | (is_repeat::int::int8 << 31) | time_spent_ms::int8),
    ''::bytea)
FROM labeling_label WHERE phase_id = %s
"""
_ROW_DTYPE = np.dtype([("image", ">i8"), ("labeler", ">i8"), ("packed", ">i8")])


def _bytes_columns(payload: bytes | None) -> list[np.ndarray]:
    """The seven int64 columns of ``_BYTES_SQL``'s answer (None: no label)."""
    if payload is None:
        return [np.zeros(0, dtype=np.int64) for _ in range(7)]
    if len(payload) % _ROW_DTYPE.itemsize:
        raise ValueError("unexpected label bytes")
    rows = np.frombuffer(payload, dtype=_ROW_DTYPE)
    packed = rows["packed"].astype(np.int64)
    return [rows["image"].astype(np.int64), rows["labeler"].astype(np.int64)] + [
        (packed >> shift) & mask for _, shift, mask in _PACKED
    ]


def _binary_cursor():  # noqa: ANN202
    """A Django cursor (``connection.cursor()``'s wrapper: logging, counting, execute wrappers) whose answers
    come in PostgreSQL's binary format (psycopg 3); Django's own cursors bind on the client, which psycopg
    only lets answer in text."""
    import psycopg
    from psycopg.pq import Format

    connection.ensure_connection()
    raw = psycopg.Cursor(connection.connection)
    raw.format = Format.BINARY
    return connection.make_debug_cursor(raw) if connection.queries_logged else connection.make_cursor(raw)


def _label_columns(phase: Phase) -> list[np.ndarray]:
    if connection.vendor == "postgresql":
        # Through Django's cursor wrapper (logged and counted like every query, execute wrappers applied)
        # around a psycopg cursor that binds on the server, so that the answer can come in PostgreSQL's binary
        # format: the bytea as it is, not hex-encoded by the server (twice the bytes) and decoded here. At
        # 400,000 labels 0.36 s against 0.43 s, 45 against 84 ms of CPU (warm, alternated, median of 12).
        with _binary_cursor() as cursor:
            cursor.execute(_BYTES_SQL, [phase.id])
            row = cursor.fetchone()
        return _bytes_columns(None if row is None or row[0] is None else bytes(row[0]))
    return _orm_columns(phase)


def _orm_columns(phase: Phase) -> list[np.ndarray]:
    """The seven columns through the ORM (SQLite; on PostgreSQL the reference the packed query is held
    equal to, tests/labeling/test_consensus_speed.py)."""
    rows = list(Label.objects.filter(phase=phase).order_by().values_list(*_LABEL_FIELDS))
    if not rows:
        return [np.zeros(0, dtype=np.int64) for _ in range(7)]
    return [np.asarray([0 if v is None else int(v) for v in col], dtype=np.int64) for col in zip(*rows, strict=True)]


def phase_labels_load(phase: Phase, *, include_repeats: bool = False) -> PhaseLabels:
    """Pull a phase's labels with one query into arrays.

    Repeated calibration-2 labels are left out of the images x labelers matrix
    unless ``include_repeats`` (the "all images" version of calibration 2's
    between-labeler statistics, comparable with the data card's).
    """
    image, labeler, low, high, uncertain, repeat, ms = _label_columns(phase)
    low = np.where(low > 0, low, np.nan).astype(np.float64)  # 0 = no tone (a skip)
    high = np.where(high > 0, high, np.nan).astype(np.float64)
    uncertain = uncertain.astype(bool)
    repeat = repeat.astype(bool)
    seconds = ms.astype(np.float64) / 1000.0

    # ``np.unique`` by a hash: a few labelers and at most one code per image among many label rows.
    labeler_ids = np.sort(pd.unique(labeler))
    keep = np.ones_like(repeat) if include_repeats else ~repeat
    image_code, image_ids = pd.factorize(image[keep], sort=True)
    labeler_code = np.searchsorted(labeler_ids, labeler[keep])
    shape = (image_ids.size, labeler_ids.size)
    first = np.full(shape, np.nan)
    second = np.full(shape, np.nan)
    cell_uncertain = np.zeros(shape, dtype=bool)
    labelled = np.zeros(shape, dtype=bool)
    first[image_code, labeler_code] = low[keep]
    second[image_code, labeler_code] = high[keep]
    cell_uncertain[image_code, labeler_code] = uncertain[keep]
    labelled[image_code, labeler_code] = True
    return PhaseLabels(
        image_ids=image_ids,
        labeler_ids=labeler_ids,
        first=first,
        second=second,
        uncertain=cell_uncertain,
        labelled=labelled,
        row_labeler=labeler,
        row_skip=np.isnan(low),
        row_uncertain=uncertain,
        row_repeat=repeat,
        row_seconds=seconds,
    )


def value_categories(n_tones: int, half_steps: bool) -> np.ndarray:
    """All possible values: tones 1..n, with half-steps (adjacent pairs) if allowed."""
    if half_steps:
        return np.arange(2, 2 * n_tones + 1) / 2
    return np.arange(1, n_tones + 1, dtype=np.float64)


def distribution(values: np.ndarray, categories: np.ndarray) -> list[int]:
    """Counts of ``values`` per category (NaN left out)."""
    values = values[~np.isnan(values)]
    positions = np.searchsorted(categories, values)
    positions = positions[(positions < categories.size)]
    return np.bincount(positions, minlength=categories.size).tolist()


def image_subject_units(project_id: int, image_ids: np.ndarray) -> np.ndarray | None:
    """The bootstrap unit of each image: its subject, or the image itself when the subject is unknown,
    as codes ``0..G-1`` (one per unit).

    None when no subject has two of these images: the image bootstrap is then the subject bootstrap
    (and keeps its numbers). Several photos of one person are not independent (issue 22).
    """
    pairs = Image.objects.filter(project_id=project_id, subject__isnull=False).order_by("id")
    with_subject = np.fromiter(
        (value for pair in pairs.values_list("id", "subject_id").iterator(chunk_size=10_000) for value in pair),
        dtype=np.int64,
    ).reshape(-1, 2)
    # Images without a subject get a unit of their own: negative, so never a subject's id.
    image_ids = np.asarray(image_ids, dtype=np.int64)
    units = -image_ids
    if with_subject.size:
        where = np.minimum(np.searchsorted(with_subject[:, 0], image_ids), len(with_subject) - 1)
        found = with_subject[where, 0] == image_ids
        units[found] = with_subject[where[found], 1]
    # Codes 0..G-1 (one sort here; the statistics then group people by counting, not sorting again).
    keys, codes = np.unique(units, return_inverse=True)
    if keys.size == units.size:
        return None
    return codes.ravel().astype(np.int64)
