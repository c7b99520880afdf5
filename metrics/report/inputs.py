"""Report inputs: the options, reading the two tables, joining and validating them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "BODY_SHAPE_KINDS",
    "ERROR_KINDS",
    "MIN_GROUP_SIZE",
    "ReportInputError",
    "ReportOptions",
    "derive_errors",
    "load_table",
]

#: How a per-sample error is derived from a prediction and its ground truth.
ERROR_KINDS = ("regression", "classification")

#: How the body-shape column is read: ``auto`` (continuous when every value is a number, groups when
#: none is), ``continuous`` or ``categorical`` (every value a group label, numbers included).
BODY_SHAPE_KINDS = ("auto", "continuous", "categorical")

#: Fewest rows a group of a categorical attribute needs to enter the KS tests; smaller groups are
#: left out of them with a warning (their rows stay in every other score).
MIN_GROUP_SIZE = 2

_MAX_EXAMPLES = 5


class ReportInputError(Exception):
    """Invalid report input; ``problems`` holds one human-readable line per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass
class ReportOptions:
    """Options of the report (the command-line flags)."""

    #: Files (CSV, JSON Lines, Parquet) or DataFrames already in memory; the same DataFrame as both is one
    #: table read once (the web app's joined samples, simulations).
    attributes: Path
    predictions: Path
    out: Path
    on: str = "image_id"
    error: str = "error"
    skin_tone: str | None = None
    gender: str | None = None
    body_shape: str | None = None
    #: One of ``BODY_SHAPE_KINDS``.
    body_shape_kind: str = "auto"
    threshold: float = 2.0
    alpha: float = 0.05
    #: None: the cluster error threshold follows ``threshold``.
    cluster_error_threshold: float | None = None
    min_samples: int = 10
    min_cluster_size: int = 10
    min_fraction: float = 0.7
    allow_unmatched: bool = False
    progress: bool | None = None
    groups: list[str] = field(default_factory=list)
    #: Bands of the continuous attributes (see :func:`metrics.unfairness.attribute_bands`).
    n_bands: int = 5
    #: Bands of the skin-tone verdict when the tones lie on a scale. None: one band per tone (MST: 10), so
    #: that no tone is averaged into a neighbour (+1.5 mm at MST 10 alone is 0.6 mm in a "9-10" band);
    #: 5 gives pairs of tones. The grid keeps ``n_bands`` (its cells would be too small per tone).
    tone_bands: int | None = None
    #: Shuffles of the intersectional permutation null (0: none).
    permutations: int = 199
    #: Resamples of the disparity tests (bands, groups, grid cells: wild cluster bootstrap of the max-t).
    band_permutations: int = 999
    #: Column naming the person (subject) of each sample: photos of one person are one cluster in every
    #: test and interval. None: independent samples (the report warns when an id column repeats).
    cluster: str | None = None
    #: Where ``cluster`` came from, in words (set by callers that choose it, e.g. "subject ids repeat").
    cluster_source: str | None = None
    #: Attributes crossed by the intersectional grid (None: skin tone x body shape when both are given,
    #: else one of them x gender). Names among "skin_tone", "body_shape", "gender".
    grid_factors: list[str] | None = None
    #: Fewest samples a grid cell needs to be tested.
    min_cell: int = 10
    #: How the id column is named in messages (None: ``on``), e.g. when ``on`` is an internal key.
    id_label: str | None = None
    #: Other DBSCAN ``min_samples`` values whose flagged counts are shown (empty: none).
    min_samples_sweep: list[int] = field(default_factory=lambda: [5, 20])
    #: Columns with each image's smallest and largest skin-tone label (label-uncertainty check).
    tone_min: str | None = None
    tone_max: str | None = None
    #: Draws of the label-uncertainty check.
    uncertainty_draws: int = 100
    #: Columns holding one labeler's tone of each sample (empty where that labeler gave none): the
    #: label-uncertainty check also scores each labeler's labels alone.
    labeler_columns: list[str] = field(default_factory=list)
    seed: int = 0
    #: Tones of the skin-tone scale (10 for MST) for the composition section; None: the deepest tone present.
    tone_levels: int | None = None
    #: Draw the figures (matplotlib: most of a small report's time). False: report.json and report.html only,
    #: e.g. for a gate in CI that reads the verdicts.
    figures: bool = True
    #: Called with the name of each step as it starts ("gender", "skin_tone", ..., "figures"): progress.
    on_step: Callable[[str], None] | None = None


def derive_errors(prediction: Any, truth: Any, kind: str) -> np.ndarray:
    """A per-sample error from predictions and ground truth.

    ``regression``: the absolute error ``|prediction - truth|`` (numbers); ``classification``: 1 where the
    prediction differs from the truth, else 0 (the mean error of a group is then its error rate).

    Examples
    --------
    >>> derive_errors([1.0, 2.5], [1.5, 2.0], "regression").tolist()
    [0.5, 0.5]
    >>> derive_errors(["cat", "dog"], ["cat", "cat"], "classification").tolist()
    [0.0, 1.0]
    """
    if kind not in ERROR_KINDS:
        raise ValueError(f"unknown error kind {kind!r}; choose from {', '.join(ERROR_KINDS)}")
    if kind == "regression":
        p = np.asarray(prediction, dtype=np.float64)
        t = np.asarray(truth, dtype=np.float64)
        return np.abs(p - t)
    p = np.asarray(prediction, dtype=object).astype(str)
    t = np.asarray(truth, dtype=object).astype(str)
    return np.asarray((p != t).astype(np.float64))


def load_table(path: Path, id_column: str) -> Any:
    """Read a CSV, JSON Lines or Parquet file into a DataFrame, ids as strings.

    Parameters
    ----------
    path : Path or pandas.DataFrame
        File (the format comes from the extension), or a table already in memory.
    id_column : str
        Column read as text so that ids compare equal across formats.

    Returns
    -------
    pandas.DataFrame
        The table.

    Raises
    ------
    ReportInputError
        Missing file, unknown extension or unreadable content.
    """
    import pandas as pd

    if isinstance(path, pd.DataFrame):
        # In memory (the web app, simulations): the same checks as for a file.
        table = path.copy()
        table.columns = [str(c) for c in table.columns]
        if id_column in table.columns:
            ids = table[id_column]
            table[id_column] = ids.where(ids.isna(), ids.astype(str))
        return table
    path = Path(path)
    if not path.is_file():
        raise ReportInputError([f"{path}: file not found"])
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            table = pd.read_csv(path, dtype={id_column: str})
        elif suffix in {".jsonl", ".ndjson"}:
            table = pd.read_json(path, lines=True, dtype=False)
        elif suffix in {".parquet", ".pq"}:
            table = pd.read_parquet(path)
        else:
            raise ReportInputError([f"{path}: unknown extension {suffix!r} (use .csv, .jsonl or .parquet)"])
    except ReportInputError:
        raise
    except Exception as exc:  # noqa: BLE001 - pandas raises many types for bad files
        raise ReportInputError([f"{path}: cannot read ({type(exc).__name__}: {exc})"]) from None
    if id_column in table.columns:
        ids = table[id_column]
        table[id_column] = ids.where(ids.isna(), ids.astype(str))
    return table


def source_label(source: Any, role: str) -> str:
    """How an input is named in messages: a file by its path (the command line's own), a table in memory by its
    role ("the attributes table"): never a DataFrame's printout, nor a path the reader did not give."""
    return str(source) if isinstance(source, str | Path) else f"the {role} table"


def _join(options: ReportOptions) -> Any:
    attributes = load_table(options.attributes, options.on)
    # One table in memory for both (the web app's joined samples): read once, never joined with itself.
    single = options.predictions is options.attributes
    predictions = attributes if single else load_table(options.predictions, options.on)
    problems = []
    wanted_attributes = (
        [
            c
            for c in (
                options.gender,
                options.skin_tone,
                options.body_shape,
                options.tone_min,
                options.tone_max,
                options.cluster,
            )
            if c
        ]
        + list(options.groups)
        + list(options.labeler_columns)
    )
    attributes_name = source_label(options.attributes, "attributes")
    predictions_name = source_label(options.predictions, "predictions")
    for name, table, columns in (
        (attributes_name, attributes, [options.on, *wanted_attributes]),
        (predictions_name, predictions, [options.on, options.error]),
    ):
        absent = [c for c in columns if c not in table.columns]
        if absent:
            problems.append(
                f"{name}: missing column(s) {', '.join(absent)}; available: {', '.join(map(str, table.columns))}"
            )
    if not (options.gender or options.skin_tone or options.body_shape):
        problems.append("nothing to evaluate: give --gender, --skin-tone and/or --body-shape")
    if bool(options.tone_min) != bool(options.tone_max) or (options.tone_min and not options.skin_tone):
        problems.append("the label-uncertainty check needs --skin-tone, --tone-min and --tone-max together")
    if options.labeler_columns and not options.tone_min:
        problems.append("--labeler-columns belong to the label-uncertainty check: give --tone-min and --tone-max too")
    if problems:
        raise ReportInputError(problems)

    for name, table in (
        (attributes_name, attributes),
        (predictions_name, predictions),
    ):
        ids = table[options.on]
        if ids.isna().any():
            rows = (np.flatnonzero(ids.isna().to_numpy()) + 1)[:_MAX_EXAMPLES].tolist()
            problems.append(f"{name}: {int(ids.isna().sum())} empty id(s), data rows {rows}")
        duplicated = ids[ids.duplicated(keep=False) & ids.notna()].unique()
        if duplicated.size:
            problems.append(
                f"{name}: {duplicated.size} duplicate id(s) in column {options.on!r}, "
                f"e.g. {', '.join(map(str, duplicated[:_MAX_EXAMPLES]))}"
            )
    if problems:
        raise ReportInputError(problems)

    attr_ids = set(attributes[options.on])
    pred_ids = set(predictions[options.on])
    only_pred = sorted(pred_ids - attr_ids)
    only_attr = sorted(attr_ids - pred_ids)
    unmatched = {
        "only_in_predictions": len(only_pred),
        "only_in_attributes": len(only_attr),
    }
    if (only_pred or only_attr) and not options.allow_unmatched:
        if only_pred:
            problems.append(
                f"{len(only_pred)} id(s) in {predictions_name} are not in "
                f"{attributes_name}, e.g. {', '.join(only_pred[:_MAX_EXAMPLES])}"
            )
        if only_attr:
            problems.append(
                f"{len(only_attr)} id(s) in {attributes_name} are not in "
                f"{predictions_name}, e.g. {', '.join(only_attr[:_MAX_EXAMPLES])} "
                "(use --allow-unmatched to score the ids present in both)"
            )
        raise ReportInputError(problems)

    columns = [options.on, options.error, *dict.fromkeys(c for c in wanted_attributes if c != options.error)]
    if single:
        merged = attributes[columns].reset_index(drop=True)
    else:
        merged = predictions[[options.on, options.error]].merge(
            attributes[[options.on, *dict.fromkeys(wanted_attributes)]],
            on=options.on,
            how="inner",
        )
    import pandas as pd

    # The error must be there for every row; an attribute may be missing on some rows, which are then
    # left out of that attribute's scores only (named in a warning), never the whole report.
    missing: dict[str, np.ndarray] = {}
    for column, what, optional in (
        (options.error, "error", False),
        (options.skin_tone, "skin tone", True),
        (options.tone_min, "smallest tone label", True),
        (options.tone_max, "largest tone label", True),
    ):
        if not column:
            continue
        raw = merged[column]
        as_number = pd.to_numeric(raw, errors="coerce")
        empty = _missing(raw)
        finite = np.isfinite(as_number.to_numpy(dtype=np.float64))
        bad = ~finite & ~empty if optional else ~finite
        if bad.any():
            ids = merged.loc[bad, options.on].tolist()[:_MAX_EXAMPLES]
            values = merged.loc[bad, column].tolist()[:_MAX_EXAMPLES]
            problems.append(
                f"column {column!r} ({what}): {int(bad.sum())} non-numeric{'' if optional else ' or missing'} "
                f"value(s), at {options.id_label or options.on} {', '.join(map(str, ids))} "
                f"(values {', '.join(map(repr, values))})"
            )
        else:
            merged[column] = as_number.astype(np.float64)
            if optional and (~finite).any():
                missing[column] = ~finite
    for column in options.labeler_columns:
        # One labeler's tones: empty where the labeler gave none; anything else must be a number.
        raw = merged[column]
        as_number = pd.to_numeric(raw, errors="coerce")
        bad = as_number.isna() & raw.notna() & (raw.astype(str).str.strip() != "")
        if bad.any():
            ids = merged.loc[bad, options.on].tolist()[:_MAX_EXAMPLES]
            problems.append(
                f"column {column!r} (a labeler's tones): {int(bad.sum())} non-numeric value(s), at {options.id_label or options.on} {', '.join(map(str, ids))}"
            )
        merged[column] = as_number.astype(np.float64)
    if options.gender:
        empty = _missing(merged[options.gender])
        if empty.any():
            missing[options.gender] = empty
    body_treatment = None
    if options.body_shape:
        empty = _missing(merged[options.body_shape])
        if empty.any():
            missing[options.body_shape] = empty
        body_treatment = _body_shape(merged, options, problems, empty)
    if len(merged) < 3:
        problems.append(f"too few samples: {len(merged)} matched row(s), need at least 3")
    if problems:
        raise ReportInputError(problems)
    notes = {"missing": missing, "repeating": [] if options.cluster else _repeating_ids(attributes, options)}
    return merged, unmatched, body_treatment, notes


#: Attribute columns whose repeated values suggest several samples per person (the report warns).
_PERSON_COLUMNS = ("subject_id", "subject", "person_id", "person", "participant_id", "customer_id")


def _repeating_ids(attributes: Any, options: ReportOptions) -> list[dict[str, Any]]:
    """Id-like attribute columns whose values repeat: samples that are probably not independent."""
    found = []
    for column in attributes.columns:
        name = str(column)
        lower = name.lower()
        if name == options.on or not (lower in _PERSON_COLUMNS or lower.endswith("_id")):
            continue
        values = attributes[column]
        values = values[~_missing(values)]
        if values.size and values.nunique() < values.size:
            found.append({"column": name, "n_values": int(values.nunique()), "n_rows": int(values.size)})
    return found


def _missing(column: Any) -> np.ndarray:
    """Missing values of a column: NaN/None, or text that is empty once stripped."""
    text = column.astype(str).str.strip()
    return np.asarray((column.isna() | (text == "")).to_numpy())


def _body_shape(merged: Any, options: ReportOptions, problems: list[str], missing: np.ndarray) -> str | None:
    """Decide how the body-shape column is scored and convert it in ``merged`` (rows with a value).

    Returns ``"continuous"`` (the column becomes float, NaN where missing) or ``"categorical"`` (the
    column becomes stripped text, one group per value, empty where missing), or None after appending a
    problem.
    """
    import pandas as pd

    column, on = options.body_shape, options.on
    if options.body_shape_kind not in BODY_SHAPE_KINDS:
        problems.append(
            f"--body-shape-kind must be one of {', '.join(BODY_SHAPE_KINDS)}, got {options.body_shape_kind!r}"
        )
        return None
    raw = merged[column]
    as_number = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
    present = ~missing
    numeric = np.isfinite(as_number) | missing  # a missing value is neither number nor text
    text_values = ~np.isfinite(as_number) & present
    kind = options.body_shape_kind
    if not present.any():
        problems.append(f"column {column!r} (body shape): no value at all; leave out --body-shape")
        return None
    if kind == "auto":
        if not text_values.any():
            kind = "continuous"
        elif not (np.isfinite(as_number) & present).any():
            kind = "categorical"
        else:
            numeric = ~text_values
            ids = merged.loc[~numeric, on].tolist()[:_MAX_EXAMPLES]
            text = merged.loc[~numeric, column].tolist()[:_MAX_EXAMPLES]
            numbers = merged.loc[numeric, column].tolist()[:3]
            problems.append(
                f"column {column!r} (body shape): {int(numeric.sum())} value(s) are numbers (e.g. "
                f"{', '.join(map(repr, numbers))}) and {int((~numeric).sum())} are not (values "
                f"{', '.join(map(repr, text))} at {on} {', '.join(map(str, ids))}); fix those values for a "
                "continuous body shape, or give --body-shape-kind categorical to treat every value as a group"
            )
            return None
    if kind == "continuous":
        if not numeric.all():
            ids = merged.loc[~numeric, on].tolist()[:_MAX_EXAMPLES]
            text = merged.loc[~numeric, column].tolist()[:_MAX_EXAMPLES]
            problems.append(
                f"column {column!r} (body shape): {int((~numeric).sum())} non-numeric value(s), at {on} "
                f"{', '.join(map(str, ids))} (values {', '.join(map(repr, text))}); --body-shape-kind "
                "continuous needs numbers (auto or categorical treat text as groups)"
            )
            return None
        merged[column] = np.where(missing, np.nan, as_number)
        return "continuous"
    # Categorical: numbers read from a CSV as floats are named without a trailing ".0".
    merged[column] = ["" if gone else _label(v) for v, gone in zip(raw.tolist(), missing, strict=True)]
    return "categorical"


def _label(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()
