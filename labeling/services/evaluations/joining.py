"""Reading a model's results and joining them with a release's images table.

No statistics here: the join only matches ids, counts what matched and what did not, and derives the
per-sample error through ``metrics.report.derive_errors``. Everything a user can get wrong is collected
as one line per problem (:class:`ResultsError`), with examples.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from metrics.report import ERROR_KINDS, derive_errors

#: Release columns a results file may be matched on.
MATCH_COLUMNS = ("external_id", "image_id", "subject_id")
#: Results columns looked for when the id column is not given, in this order.
AUTO_ID_COLUMNS = ("external_id", "image_id", "subject_id", "id")
#: The key column of the joined table (a name no release or results column uses).
KEY = "_sample"
SUFFIXES = (".csv", ".jsonl", ".ndjson", ".parquet")
MAX_EXAMPLES = 10
DEFAULT_MIN_MATCHED = 20


class ResultsError(Exception):
    """The results cannot be joined; ``problems`` holds one line per problem, ``join`` what was counted."""

    def __init__(self, problems: list[str], join: dict | None = None) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems
        self.join = join or {}


@dataclass
class JoinSpec:
    """How to read the results: which column holds the id, the error, or a prediction and its truth."""

    id_column: str = ""
    match_on: str = ""
    error_column: str = "error"
    prediction_column: str = ""
    truth_column: str = ""
    error_kind: str = "regression"
    min_matched: int = DEFAULT_MIN_MATCHED
    problems: list[str] = field(default_factory=list)


def read_results(path: Path) -> pd.DataFrame:
    """The results file as a table (CSV, JSON Lines or Parquet). CSV cells are read as text (ids such as
    ``007`` keep their zeros; numbers are converted where a number is needed)."""
    suffix = Path(path).suffix.lower()
    try:
        if suffix == ".csv":
            table = pd.read_csv(path, dtype=str, keep_default_na=True, encoding="utf-8-sig")
        elif suffix in {".jsonl", ".ndjson"}:
            table = pd.read_json(path, lines=True, dtype=False)
        elif suffix == ".parquet":
            table = pd.read_parquet(path)
        else:
            raise ResultsError([f"unknown file type {suffix!r}: upload a .csv, .jsonl or .parquet file"])
    except ResultsError:
        raise
    except Exception as exc:  # noqa: BLE001 - pandas and pyarrow raise many types for bad files
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ResultsError([f"the results file cannot be read as {suffix[1:]}: {reason}"]) from None
    if table.empty:
        raise ResultsError(["the results file has no rows"])
    table.columns = [str(c) for c in table.columns]
    return table


def _examples(values) -> list[str]:
    return [str(v) for v in list(values)[:MAX_EXAMPLES]]


def _ids_as_text(column: pd.Series) -> pd.Series:
    """Ids compared as text; whole floats (1.0, read from a CSV with gaps) as whole numbers."""

    def text(value):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return None
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value).strip()

    return column.map(text)


def release_samples(images: pd.DataFrame, match_on: str, attribute_columns: list[str]) -> pd.DataFrame:
    """The release's included images as samples keyed by ``match_on`` (per subject: one row per subject).

    Per subject, the skin tone is the mean of its images' final values, its range the smallest ``min`` and
    largest ``max``; other attributes are the subject's own (the same on each of its images).
    """
    included = images[~images["excluded"].fillna(False).astype(bool)].copy()
    included[KEY] = _ids_as_text(included[match_on])
    included = included[included[KEY].notna()]
    keep = [KEY, "image_id", "final_value", "min", "max", *attribute_columns]
    keep = list(dict.fromkeys(c for c in keep if c in included.columns))
    if match_on != "subject_id":
        return included[keep].reset_index(drop=True)
    numeric = {c: "mean" for c in keep if c != KEY and pd.api.types.is_numeric_dtype(included[c])}
    numeric.update({"min": "min", "max": "max", "image_id": "first"})
    aggregations = {c: numeric.get(c, "first") for c in keep if c != KEY}
    return included[keep].groupby(KEY, sort=True).agg(aggregations).reset_index()


def join_results(results: pd.DataFrame, samples_of, spec: JoinSpec) -> tuple[pd.DataFrame, dict]:
    """Join the results with the release; return the joined table (``KEY``, ``error``, attributes) and the report.

    ``samples_of(match_on)`` gives the release's samples keyed by that column (:func:`release_samples`).

    Raises
    ------
    ResultsError
        Missing or unknown columns, empty or duplicated ids, non-numeric errors, too few matches.
    """
    columns = [str(c) for c in results.columns]
    problems: list[str] = []
    id_column = spec.id_column or next((c for c in AUTO_ID_COLUMNS if c in columns), "")
    if not id_column:
        problems.append(
            f"no id column: name one (id_column) or use one of {', '.join(AUTO_ID_COLUMNS)}; "
            f"the file has {', '.join(columns[:20]) or 'no columns'}"
        )
    elif id_column not in columns:
        problems.append(f"id column {id_column!r} is not in the file; it has {', '.join(columns[:20])}")
    match_on = spec.match_on or (id_column if id_column in MATCH_COLUMNS else "external_id")
    if match_on not in MATCH_COLUMNS:
        problems.append(f"match_on must be one of {', '.join(MATCH_COLUMNS)}, got {match_on!r}")
    derived = bool(spec.prediction_column or spec.truth_column)
    if derived:
        if spec.error_kind not in ERROR_KINDS:
            problems.append(f"error_kind must be one of {', '.join(ERROR_KINDS)}, got {spec.error_kind!r}")
        for role, name in (("prediction", spec.prediction_column), ("truth", spec.truth_column)):
            if not name:
                problems.append(f"give both a prediction and a ground-truth column (the {role} column is missing)")
            elif name not in columns:
                problems.append(f"{role} column {name!r} is not in the file; it has {', '.join(columns[:20])}")
    elif spec.error_column not in columns:
        problems.append(
            f"error column {spec.error_column!r} is not in the file (it has {', '.join(columns[:20])}); "
            "name the error column, or give a prediction and a ground-truth column"
        )
    if spec.min_matched < 3:
        problems.append("min_matched must be at least 3")
    if problems:
        raise ResultsError(problems)

    ids = _ids_as_text(results[id_column])
    empty = np.flatnonzero(ids.isna().to_numpy())
    if empty.size:
        problems.append(f"{empty.size} row(s) without an id, data rows {(empty + 1)[:MAX_EXAMPLES].tolist()}")
    duplicated = ids[ids.duplicated(keep=False) & ids.notna()].unique()
    if duplicated.size:
        problems.append(
            f"{duplicated.size} id(s) appear more than once (one result per sample), e.g. {', '.join(_examples(duplicated))}"
        )
    if derived:
        try:
            if spec.error_kind == "regression":
                prediction = pd.to_numeric(results[spec.prediction_column], errors="coerce")
                truth = pd.to_numeric(results[spec.truth_column], errors="coerce")
                bad = (~np.isfinite(prediction.to_numpy(dtype=float))) | (~np.isfinite(truth.to_numpy(dtype=float)))
                if bad.any():
                    rows = (np.flatnonzero(bad) + 1)[:MAX_EXAMPLES].tolist()
                    problems.append(
                        f"{int(bad.sum())} non-numeric or missing prediction/truth value(s), data rows {rows}"
                    )
                errors = derive_errors(prediction.to_numpy(dtype=float), truth.to_numpy(dtype=float), "regression")
            else:
                missing = results[spec.prediction_column].isna() | results[spec.truth_column].isna()
                if missing.any():
                    rows = (np.flatnonzero(missing.to_numpy()) + 1)[:MAX_EXAMPLES].tolist()
                    problems.append(f"{int(missing.sum())} missing prediction/truth value(s), data rows {rows}")
                errors = derive_errors(
                    _ids_as_text(results[spec.prediction_column]).to_numpy(),
                    _ids_as_text(results[spec.truth_column]).to_numpy(),
                    "classification",
                )
        except ValueError as exc:
            problems.append(str(exc))
            errors = np.zeros(len(results))
    else:
        as_number = pd.to_numeric(results[spec.error_column], errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(as_number)
        if bad.any():
            rows = (np.flatnonzero(bad) + 1)[:MAX_EXAMPLES].tolist()
            raw = results[spec.error_column].to_numpy()[bad][:MAX_EXAMPLES].tolist()
            problems.append(
                f"{int(bad.sum())} non-numeric or missing error value(s), data rows {rows} (values {raw!r})"
            )
        errors = as_number
    if problems:
        raise ResultsError(problems)

    samples = samples_of(match_on)
    table = pd.DataFrame({KEY: ids.to_numpy(), "error": errors})
    known = set(samples[KEY])
    given = set(table[KEY])
    unknown = sorted(given - known)
    missing = sorted(known - given)
    joined = samples.merge(table, on=KEY, how="inner", validate="one_to_one")
    join = {
        "id_column": id_column,
        "match_on": match_on,
        "error": (
            f"{spec.error_kind} error from {spec.prediction_column!r} and {spec.truth_column!r}"
            if derived
            else f"column {spec.error_column!r}"
        ),
        "n_results": int(len(table)),
        "n_release_samples": int(len(samples)),
        "matched": int(len(joined)),
        "unknown": len(unknown),
        "unknown_examples": unknown[:MAX_EXAMPLES],
        "missing": len(missing),
        "missing_examples": missing[:MAX_EXAMPLES],
        "duplicates": 0,
        "min_matched": spec.min_matched,
    }
    if len(joined) < spec.min_matched:
        hint = ""
        if unknown and match_on != "image_id":
            hint = " (are the ids the release's image_id numbers? then match on image_id)"
        elif unknown:
            hint = " (are the ids your own file names? then match on external_id)"
        raise ResultsError(
            [
                f"too few results match the release: {len(joined)} of {len(table)} matched on {match_on} "
                f"(at least {spec.min_matched} needed); {len(unknown)} id(s) are not in the release's included "
                f"images, e.g. {', '.join(unknown[:5])}{hint}"
            ],
            join,
        )
    return joined, join
