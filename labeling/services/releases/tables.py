"""The release's three tables (images, labels, labelers): their schemas and their rows, chunk by chunk.

One row of the images table per labelling item: a whole photo, or one person's box in a photo of several
(``box_x``, ``box_y``, ``box_width``, ``box_height``; empty for a whole photo). Labelers appear by pseudonym only. Every subject attribute is its own column of the images table
(the union of the keys of the project's subjects, in sorted order): a column whose values are all
numbers is float64, any other is text; a key that clashes with a fixed column gets the prefix
``subject_``.
"""

from __future__ import annotations

import functools
import json
import math
from collections import defaultdict
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from metrics import agreement

from ...models import Project, Subject
from ..consensus import MIN_IMAGES, test_retest_compute
from .finalise import BASELINE_FIELDS, Chunk, Context, excluded_reasons

FINAL_COLUMNS: list[tuple[str, pa.DataType]] = [
    ("final_value", pa.float64()),
    ("final_tone", pa.int64()),
    ("final_tone_name", pa.string()),
    ("mean", pa.float64()),
    ("median", pa.float64()),
    ("mode", pa.float64()),
    ("mode_count", pa.int64()),
    ("std", pa.float64()),
    ("min", pa.float64()),
    ("max", pa.float64()),
    ("n_labels", pa.int64()),
    ("n_valid", pa.int64()),
    ("n_skipped", pa.int64()),
    ("n_uncertain", pa.int64()),
    ("complete_consensus", pa.bool_()),
    ("overlap_consensus", pa.bool_()),
    ("near_consensus", pa.bool_()),
    ("n_unique_values", pa.int64()),
    ("n_connected_groups", pa.int64()),
    ("any_uncertainty", pa.bool_()),
    ("has_invalid_annotation", pa.bool_()),
]
BASELINE_COLUMNS: list[tuple[str, pa.DataType]] = [
    ("ita", pa.float64()),
    ("ita_class", pa.string()),
    ("lightness", pa.float64()),
    ("hue_angle", pa.float64()),
    ("apparent_albedo", pa.float64()),
    ("apparent_albedo_normalized", pa.float64()),
    ("baseline_flags", pa.list_(pa.string())),
    ("baseline_parameters_hash", pa.string()),
]
HEAD_COLUMNS: list[tuple[str, pa.DataType]] = [
    ("image_id", pa.int64()),
    ("external_id", pa.string()),
    ("subject_id", pa.string()),
    ("sha256", pa.string()),
    # One person's box in a photo of several (pixels after the photo's EXIF orientation); empty for a whole photo.
    # The boxes of one photo are rows of their own sharing its sha256.
    ("box_x", pa.int64()),
    ("box_y", pa.int64()),
    ("box_width", pa.int64()),
    ("box_height", pa.int64()),
]
#: The box columns, in ``finalise.IMAGE_FIELDS`` order (the chunk's image rows hold them after sha256).
BOX_COLUMNS = ("box_x", "box_y", "box_width", "box_height")
TAIL_COLUMNS: list[tuple[str, pa.DataType]] = [
    ("excluded", pa.bool_()),
    ("excluded_reason", pa.string()),
    ("lead_exclusion_reason", pa.string()),
]
FIXED_IMAGE_COLUMNS = {name for name, _ in HEAD_COLUMNS + FINAL_COLUMNS + BASELINE_COLUMNS + TAIL_COLUMNS}

LABELS_SCHEMA = pa.schema(
    [
        pa.field("label_id", pa.int64(), nullable=False),
        ("revision_id", pa.int64()),
        pa.field("image_id", pa.int64(), nullable=False),
        ("labeler", pa.string()),
        ("phase", pa.string()),
        ("tones", pa.list_(pa.int64())),
        ("tone_names", pa.list_(pa.string())),
        ("value", pa.float64()),
        ("valid", pa.bool_()),
        ("uncertain", pa.bool_()),
        ("skipped", pa.bool_()),
        ("skip_reason", pa.string()),
        ("time_spent_s", pa.float64()),
        ("n_revisions", pa.int64()),
        ("corrected", pa.bool_()),
        ("correction_reason", pa.string()),
        ("is_repeat", pa.bool_()),
        ("counted", pa.bool_()),
        ("tone_order", pa.list_(pa.int64())),
        ("display", pa.string()),
    ]
)
#: Test-retest statistics of the labelers table, each with its 95% interval (``_ci_low``, ``_ci_high``).
RETEST_STATS = ("exact", "within_one", "weighted_kappa", "mean_shift")
LABELERS_SCHEMA = pa.schema(
    [
        pa.field("labeler", pa.string(), nullable=False),
        ("n_labels", pa.int64()),
        ("n_counted", pa.int64()),
        ("n_images", pa.int64()),
        ("bias_n", pa.int64()),
        ("bias_mean_diff", pa.float64()),
        ("bias_ci_low", pa.float64()),
        ("bias_ci_high", pa.float64()),
        ("bias_mean_abs_diff", pa.float64()),
        ("retest_n", pa.int64()),
        *((f"retest_{name}{part}", pa.float64()) for name in RETEST_STATS for part in ("", "_ci_low", "_ci_high")),
        ("profile_shared", pa.bool_()),
        ("expertise", pa.string()),
        ("region_of_upbringing", pa.string()),
        ("gender", pa.string()),
    ]
)
#: Profile fields written next to a pseudonym only when the labeler agreed (``Membership.share_profile``).
PROFILE_COLUMNS = ("expertise", "region_of_upbringing", "gender")


# --------------------------------------------------------------------------- subject attributes


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def attribute_columns(project: Project) -> list[tuple[str, str, pa.DataType]]:
    """(attribute key, column name, type) of every subject attribute of the project, by key."""
    numeric: dict[str, bool] = {}
    rows = Subject.objects.filter(project=project).order_by("id").values_list("attributes", flat=True)
    for attributes in rows.iterator(chunk_size=2000):
        for key, value in (attributes or {}).items():
            if value is None:
                numeric.setdefault(key, True)
            else:
                numeric[key] = numeric.get(key, True) and _is_number(value)
    columns = []
    taken = set(FIXED_IMAGE_COLUMNS)
    for key in sorted(numeric):
        name = key
        while name in taken:
            name = f"subject_{name}"
        taken.add(name)
        columns.append((key, name, pa.float64() if numeric[key] else pa.string()))
    return columns


def _attribute_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if _is_number(value):
        return repr(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _attribute_number(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def images_schema(attributes: list[tuple[str, str, pa.DataType]]) -> pa.Schema:
    fields = [pa.field("image_id", pa.int64(), nullable=False), *HEAD_COLUMNS[1:]]
    fields += [(name, data_type) for _key, name, data_type in attributes]
    fields += FINAL_COLUMNS + BASELINE_COLUMNS + TAIL_COLUMNS
    return pa.schema(fields)


# --------------------------------------------------------------------------- images


def _floats(values: np.ndarray) -> list[float | None]:
    return [None if math.isnan(v) else float(v) for v in values.tolist()]


def image_table(
    chunk: Chunk,
    context: Context,
    schema: pa.Schema,
    attributes: list[tuple[str, str, pa.DataType]],
    tone_names: dict[int, str],
) -> tuple[pa.Table, list[str]]:
    """The chunk's rows of the images table, and each image's excluded reasons."""
    subject_ids = {row[2] for row in chunk.images if row[2] is not None}
    subjects = {
        sid: (external_id, attrs or {})
        for sid, external_id, attrs in Subject.objects.filter(id__in=subject_ids).values_list(
            "id", "external_id", "attributes"
        )
    }
    final = chunk.final
    columns: dict[str, list] = {
        "image_id": chunk.image_ids.tolist(),
        "external_id": [row[1] for row in chunk.images],
        "subject_id": [subjects[row[2]][0] if row[2] in subjects else None for row in chunk.images],
        "sha256": [row[3] for row in chunk.images],
    }
    for offset, name in enumerate(BOX_COLUMNS, start=4):
        columns[name] = [row[offset] for row in chunk.images]
    for key, name, data_type in attributes:
        convert = _attribute_number if pa.types.is_floating(data_type) else _attribute_text
        columns[name] = [convert(subjects[row[2]][1].get(key)) if row[2] in subjects else None for row in chunk.images]
    tones = final["final_tone"].tolist()
    for name, data_type in FINAL_COLUMNS:
        if name == "final_tone":
            columns[name] = [t if t >= 0 else None for t in tones]
        elif name == "final_tone_name":
            columns[name] = [tone_names.get(t) if t >= 0 else None for t in tones]
        elif pa.types.is_floating(data_type):
            columns[name] = _floats(final[name])
        else:
            columns[name] = final[name].tolist()
    baselines = [chunk.baselines.get(image_id) for image_id in columns["image_id"]]
    fields = {name: i for i, name in enumerate(BASELINE_FIELDS)}

    def baseline(name: str) -> list:
        return [b[fields[name]] if b is not None and b[fields["status"]] == "ok" else None for b in baselines]

    columns["ita"] = baseline("ita_median")
    columns["ita_class"] = [c or None for c in baseline("ita_class")]
    columns["lightness"] = baseline("lightness_median")
    columns["hue_angle"] = [None if h is None else float(h) for h in baseline("stats__hue_angle")]
    columns["apparent_albedo"] = baseline("albedo")
    columns["apparent_albedo_normalized"] = baseline("albedo_normalized")
    columns["baseline_flags"] = [list(_json(b[fields["flags"]]) or []) if b is not None else None for b in baselines]
    columns["baseline_parameters_hash"] = [b[fields["parameters_hash"]] if b is not None else None for b in baselines]
    reasons = excluded_reasons(chunk, context.rule["include"])
    columns["excluded"] = [bool(r) for r in reasons]
    columns["excluded_reason"] = reasons
    columns["lead_exclusion_reason"] = [chunk.lead_reasons.get(image_id, "") for image_id in columns["image_id"]]
    return pa.table(columns, schema=schema), reasons


# --------------------------------------------------------------------------- labels


@functools.lru_cache(maxsize=4096)
def _json(text: str | None) -> Any:
    """A JSON column read as text, decoded once per distinct text (do not change the result: it is shared)."""
    return json.loads(text) if text is not None else None


@functools.lru_cache(maxsize=4096)
def _tone_order(text: str | None) -> tuple | None:
    """A revision's tone order from its JSON text (None: none recorded); one decoding per distinct text."""
    value = json.loads(text) if text is not None else None
    return tuple(value) if value else None


@functools.lru_cache(maxsize=4096)
def _display(text: str | None) -> str | None:
    """A revision's client info from its JSON text as canonical compact JSON (None: none recorded)."""
    value = json.loads(text) if text is not None else None
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")) if value else None


def _list_array(offsets: np.ndarray, values: pa.Array) -> pa.Array:
    return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), values)


def _tones(low: tuple, high: tuple, tone_names: dict[int, str]) -> tuple[pa.Array, pa.Array]:
    """The ``tones`` and ``tone_names`` columns: per label its tone positions (low, then high; None left out)."""
    n = len(low)
    both = np.zeros((n, 2), dtype=np.int64)
    present = np.zeros((n, 2), dtype=bool)
    for k, column in enumerate((low, high)):
        array = np.array(column, dtype=np.float64)  # None -> NaN
        present[:, k] = ~np.isnan(array)
        both[present[:, k], k] = array[present[:, k]].astype(np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(present.sum(axis=1), out=offsets[1:])
    values = both[present]  # row by row, low before high
    distinct, index = np.unique(values, return_inverse=True)
    names = pa.array([tone_names.get(t, str(t)) for t in distinct.tolist()], type=pa.string())
    return (
        _list_array(offsets, pa.array(values, type=pa.int64())),
        _list_array(offsets, names.take(pa.array(index.reshape(-1), type=pa.int64()))),
    )


def _gathered_lists(distinct: list[tuple], index: np.ndarray, value_type: pa.DataType) -> pa.Array:
    """A list column of ``distinct[i]`` for each ``i`` of ``index`` (a column whose rows repeat a few distinct
    tuples: each distinct one converted once, then gathered)."""
    lengths = np.array([len(row) for row in distinct], dtype=np.int64)
    flat = pa.array([value for row in distinct for value in row], type=value_type)
    starts = np.cumsum(lengths) - lengths
    row_lengths = lengths[index]
    offsets = np.zeros(index.size + 1, dtype=np.int64)
    np.cumsum(row_lengths, out=offsets[1:])
    gather = np.repeat(starts[index] - offsets[:-1], row_lengths) + np.arange(offsets[-1], dtype=np.int64)
    return _list_array(offsets, flat.take(pa.array(gather, type=pa.int64())))


def _encoded(texts: tuple) -> tuple[list[str | None], np.ndarray]:
    """The distinct texts of a column (None last, once, if any) and each row's index among them (C loops)."""
    encoded = pa.array(texts, type=pa.string()).dictionary_encode()
    distinct = encoded.dictionary.to_pylist()
    index = encoded.indices.fill_null(len(distinct)).to_numpy(zero_copy_only=False).astype(np.int64)
    return [*distinct, None], index


def _mapped(values: np.ndarray, mapping: dict, value_type: pa.DataType) -> pa.Array:
    """``mapping[v]`` for each of ``values`` (ints): each distinct value looked up once, then gathered."""
    distinct, index = np.unique(values, return_inverse=True)
    names = pa.array([mapping.get(v) for v in distinct.tolist()], type=value_type)
    return names.take(pa.array(index.reshape(-1), type=pa.int64()))


def label_table(
    chunk: Chunk,
    context: Context,
    pseudonyms: dict[int, str],
    tone_names: dict[int, str],
    project_order: list[int],
) -> pa.Table:
    """The chunk's rows of the labels table (every label of its images; ``counted`` says which were used).

    Built column by column (no Python object per cell but the few a column needs); JSON texts are decoded
    once per distinct text."""
    n = len(chunk.label_columns[0]) if chunk.label_columns else 0
    (label_id, image_id, phase_id, labeler_id, is_repeat, low, high, value, uncertain, skip_reason) = (
        chunk.label_columns[:10] if n else [()] * 10
    )
    time_spent_ms, n_revisions = chunk.label_columns[10:12] if n else ((), ())
    revision_id, tone_order, client_info, corrected, correction_reason = chunk.revision_columns if n else [()] * 5
    order = tuple(project_order)
    tones, names = _tones(low, high, tone_names)
    values = pa.array(value, type=pa.float64())
    reasons = pa.array(skip_reason, type=pa.string())
    skipped = pc.greater(pc.utf8_length(reasons), 0)
    orders, order_index = _encoded(tone_order)
    displays, display_index = _encoded(client_info)
    columns = {
        "label_id": pa.array(label_id, type=pa.int64()),
        "revision_id": pa.array(revision_id, type=pa.int64()),
        "image_id": pa.array(image_id, type=pa.int64()),
        "labeler": _mapped(np.array(labeler_id, dtype=np.int64), pseudonyms, pa.string()),
        "phase": _mapped(np.array(phase_id, dtype=np.int64), context.phase_kind, pa.string()),
        "tones": tones,
        "tone_names": names,
        "value": values,
        "valid": values.is_valid(),
        "uncertain": pa.array(np.array(uncertain, dtype=bool), type=pa.bool_()),
        "skipped": skipped,
        "skip_reason": pc.if_else(skipped, reasons, pa.scalar(None, pa.string())),
        "time_spent_s": pa.array(np.array(time_spent_ms, dtype=np.int64) / 1000, type=pa.float64()),
        "n_revisions": pa.array(n_revisions, type=pa.int64()),
        "corrected": pa.array(np.asarray(corrected, dtype=bool), type=pa.bool_()),
        "correction_reason": pa.array(correction_reason, type=pa.string()),
        "is_repeat": pa.array(np.array(is_repeat, dtype=bool), type=pa.bool_()),
        "counted": pa.array(chunk.counted, type=pa.bool_()),
        "tone_order": _gathered_lists([_tone_order(t) or order for t in orders], order_index, pa.int64()),
        "display": pa.array([_display(t) for t in displays], type=pa.string()).take(
            pa.array(display_index, type=pa.int64())
        ),
    }
    return pa.table(columns, schema=LABELS_SCHEMA)


# --------------------------------------------------------------------------- labelers


class LabelerTally:
    """Per labeler over the release: labels, counted labels, and their counted values for the bias.

    Compact: per labeler, one value per image of the release (NaN: no counted value), as float32 while
    every counted value is exactly a float32 (tone positions and half-steps are), float64 otherwise;
    nothing per label is kept. A labeler counts at most once per image (``finalise.counted_labels``), so
    the images with a counted label of a labeler are as many as their counted labels."""

    def __init__(self) -> None:
        self.n_labels: dict[int, int] = defaultdict(int)
        self.n_counted: dict[int, int] = defaultdict(int)
        self._offset = 0
        self._exact32 = True
        # labeler id -> (image offset where their first chunk starts, the chunks' values from there on).
        self._values: dict[int, tuple[int, list[np.ndarray]]] = {}
        # Per chunk, each image's person for the bias's clustered interval: its subject id, or minus its own
        # id when it has no subject (a person of its own).
        self._people: list[np.ndarray] = []

    def add(self, chunk: Chunk) -> None:
        labeler, value, counted = chunk.label_labeler, chunk.label_value, chunk.counted
        for labeler_id, n in zip(*np.unique(labeler, return_counts=True), strict=True):
            self.n_labels[int(labeler_id)] += int(n)
        n_images = len(chunk.images)
        counted_labeler = labeler[counted]
        counted_image = chunk.label_image[counted]
        counted_value = value[counted]
        for labeler_id, n in zip(*np.unique(counted_labeler, return_counts=True), strict=True):
            self.n_counted[int(labeler_id)] += int(n)
        if self._exact32 and counted_value.size:
            narrow = counted_value.astype(np.float32).astype(np.float64)
            if not np.array_equal(narrow, counted_value, equal_nan=True):
                self._exact32 = False
                for _start, parts in self._values.values():
                    parts[:] = [part.astype(np.float64) for part in parts]
        dtype = np.float32 if self._exact32 else np.float64
        for labeler_id in np.unique(counted_labeler).tolist():
            start, parts = self._values.setdefault(labeler_id, (self._offset, []))
            done = sum(part.size for part in parts)
            if start + done < self._offset:  # chunks without a counted label of theirs
                parts.append(np.full(self._offset - start - done, np.nan, dtype=dtype))
            row = np.full(n_images, np.nan, dtype=dtype)
            mine = counted_labeler == labeler_id
            row[counted_image[mine]] = counted_value[mine]
            parts.append(row)
        self._people.append(
            np.fromiter((-row[0] if row[2] is None else row[2] for row in chunk.images), dtype=np.int64, count=n_images)
        )
        self._offset += n_images

    def _rows(self, labeler_ids: list[int]) -> list[np.ndarray]:
        """Each labeler's value per image of the release (NaN: none), as one array each; the parts freed."""
        rows = []
        for labeler_id in labeler_ids:
            start, parts = self._values.pop(labeler_id)
            dtype = parts[0].dtype
            row = np.full(self._offset, np.nan, dtype=dtype)
            position = start
            for part in parts:
                row[position : position + part.size] = part
                position += part.size
            parts.clear()
            rows.append(row)
        return rows

    def table(self, project: Project, pseudonyms: dict[int, str]) -> pa.Table:
        """One row per labeler with a label in the release, by pseudonym."""
        ids = sorted(self.n_labels, key=lambda i: (pseudonyms.get(i, ""), i))
        bias = None
        counted_ids = sorted(self._values)
        if counted_ids and self._offset:
            people = np.concatenate(self._people)
            self._people.clear()
            bias = _labeler_bias(self._rows(counted_ids), counted_ids, people)
        retest = {row["labeler"]: row for row in test_retest_compute(project)["per_labeler"]}
        profiles = {
            row[0]: row[1:]
            for row in project.memberships.filter(id__in=ids).values_list("id", "share_profile", *PROFILE_COLUMNS)
        }
        rows: dict[str, list] = {name: [] for name in LABELERS_SCHEMA.names}
        for labeler_id in ids:
            rows["labeler"].append(pseudonyms.get(labeler_id, "?"))
            rows["n_labels"].append(self.n_labels[labeler_id])
            rows["n_counted"].append(self.n_counted.get(labeler_id, 0))
            rows["n_images"].append(self.n_counted.get(labeler_id, 0))
            n_bias = int(bias.loc[labeler_id, "n"]) if bias is not None and labeler_id in bias.index else 0
            enough = n_bias >= MIN_IMAGES
            rows["bias_n"].append(n_bias)
            for column, name in (
                ("bias_mean_diff", "mean_diff"),
                ("bias_ci_low", "low"),
                ("bias_ci_high", "high"),
                ("bias_mean_abs_diff", "mean_abs_diff"),
            ):
                rows[column].append(_finite(bias.loc[labeler_id, name]) if enough else None)
            block = retest.get(labeler_id)
            rows["retest_n"].append(block["n"] if block else None)
            for name in RETEST_STATS:
                stat = block[name] if block else {}
                rows[f"retest_{name}"].append(stat.get("value"))
                # The interval even where the value is too uncertain to give (as on the card).
                rows[f"retest_{name}_ci_low"].append(stat.get("low"))
                rows[f"retest_{name}_ci_high"].append(stat.get("high"))
            shared, *profile = profiles.get(labeler_id, (False, "", "", ""))
            rows["profile_shared"].append(bool(shared))
            for column, text in zip(PROFILE_COLUMNS, profile, strict=True):
                rows[column].append((text or None) if shared else None)
        return pa.table(rows, schema=LABELERS_SCHEMA)


def _labeler_bias(reliability: list[np.ndarray], labelers: list[int], people: np.ndarray) -> pd.DataFrame:
    """``agreement.labeler_bias`` over the release: each labeler's mean difference from the others' mean on
    the same images, with its CR1 t interval clustered by person (``people``: one entry per image).

    ``reliability``: per labeler, their value per image (NaN: none), freed as the labelers x images matrix
    is made (8 MB at 250,000 images x 4 labelers; ``labeler_bias`` works on the matrix, one labeler at a
    time, with no per-label table)."""
    matrix = np.empty((len(reliability), reliability[0].size if reliability else 0))
    for position in range(len(reliability)):
        matrix[position] = reliability[position]
        reliability[position] = matrix[position, :0]  # the row's own array is freed as it is copied
    return agreement.labeler_bias(matrix, labelers=labelers, clusters=people)


def _finite(value: Any) -> float | None:
    number = float(value)
    return number if math.isfinite(number) else None
