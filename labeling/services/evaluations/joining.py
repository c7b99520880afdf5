"""Reading a model's results and joining them with a release's images table.

No statistics here: the join only matches ids, counts what matched and what did not, and derives the
per-sample error through ``metrics.report.derive_errors``. Everything a user can get wrong is collected
as one line per problem (:class:`ResultsError`), with examples.
"""

from __future__ import annotations

import csv
import json
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


#: Bounds of an uploaded results file, checked before anything is parsed (a 7.9 MB CSV with a million
#: columns took a web worker past 6 GB; a 233 KB Parquet file decoded to 3.6 GB).
MAX_COLUMNS = 1_000
MAX_ROWS = 2_000_000
#: Longest line of a CSV or JSON Lines file, and longest id or value read (characters).
MAX_LINE_BYTES = 1 << 20
MAX_VALUE_CHARS = 1_000
MAX_ROW_GROUPS = 10_000
#: Largest uncompressed size of the columns read from a Parquet file.
MAX_UNCOMPRESSED_BYTES = 1 << 30


class ResultsError(Exception):
    """The results cannot be joined; ``problems`` holds one line per problem, ``join`` what was counted.

    ``too_large`` marks a file refused for its size or shape before it was parsed (HTTP 413).
    """

    def __init__(self, problems: list[str], join: dict | None = None, *, too_large: bool = False) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems
        self.join = join or {}
        self.too_large = too_large


def _too_large(message: str) -> ResultsError:
    return ResultsError([message], too_large=True)


def results_columns(path: Path) -> list[str]:
    """The columns of a results file, found without parsing its rows, and its shape checked.

    CSV: the header line (at most ``MAX_LINE_BYTES``), then every line's length and the number of lines
    counted in chunks; JSON Lines: the same, the keys of the first object; Parquet: the file's metadata
    (columns, rows, row groups). Time and memory stay bounded whatever the file holds.

    Raises
    ------
    ResultsError
        ``too_large``: too many columns, rows or row groups, a line too long; otherwise unreadable.
    """
    suffix = Path(path).suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            meta = pq.ParquetFile(path).metadata
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
            raise ResultsError([f"the results file cannot be read as parquet: {_first_line(exc)}"]) from None
        if meta.num_columns > MAX_COLUMNS:
            raise _too_large(f"the file has {meta.num_columns:,} columns; at most {MAX_COLUMNS:,} are read")
        if meta.num_rows > MAX_ROWS:
            raise _too_large(f"the file has {meta.num_rows:,} rows; at most {MAX_ROWS:,} are read")
        if meta.num_row_groups > MAX_ROW_GROUPS:
            raise _too_large(f"the file has {meta.num_row_groups:,} row groups; at most {MAX_ROW_GROUPS:,} are read")
        return [meta.schema.column(i).path.split(".")[0] for i in range(meta.num_columns)]
    if suffix not in (".csv", ".jsonl", ".ndjson"):
        raise ResultsError([f"unknown file type {suffix!r}: upload a .csv, .jsonl or .parquet file"])
    with open(path, "rb") as handle:
        first = handle.readline(MAX_LINE_BYTES + 1)
        if len(first) > MAX_LINE_BYTES:
            raise _too_large(f"the first line is longer than {MAX_LINE_BYTES:,} bytes")
        lines, longest, current = 1, len(first), 0
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            parts = chunk.split(b"\n")
            current += len(parts[0])
            if len(parts) > 1:
                longest = max(longest, current, *(len(p) for p in parts[1:-1]))
                current = len(parts[-1])
                lines += len(parts) - 1
            if max(longest, current) > MAX_LINE_BYTES:
                raise _too_large(f"a line is longer than {MAX_LINE_BYTES:,} bytes (around line {lines:,})")
            if lines > MAX_ROWS + 1:
                raise _too_large(f"the file has more than {MAX_ROWS:,} rows; at most {MAX_ROWS:,} are read")
    text = first.decode("utf-8-sig", errors="replace").strip("\r\n")
    if suffix == ".csv":
        delimiter = ";" if text.count(";") > text.count(",") else ","
        columns = next(csv.reader([text], delimiter=delimiter), [])
    else:
        try:
            record = json.loads(text) if text else {}
        except ValueError as exc:
            raise ResultsError([f"the results file cannot be read as JSON Lines: line 1: {exc}"]) from None
        if not isinstance(record, dict):
            raise ResultsError(["the results file cannot be read as JSON Lines: line 1 is not an object"])
        columns = list(record)
    if len(columns) > MAX_COLUMNS:
        raise _too_large(f"the file has {len(columns):,} columns; at most {MAX_COLUMNS:,} are read")
    if not columns or columns == [""]:
        raise ResultsError(["the results file has no header"])
    return [str(c) for c in columns]


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


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


def read_results(path: Path, columns: list[str] | None = None) -> pd.DataFrame:
    """The results file as a table (CSV, JSON Lines or Parquet), only ``columns`` read when given.

    CSV cells are read as text (ids such as ``007`` keep their zeros; numbers are converted where a number
    is needed). Call :func:`results_columns` first: it bounds the file's shape. Parquet columns are read as
    Arrow first and a text longer than ``MAX_VALUE_CHARS`` is refused before pandas makes Python strings
    of it (a dictionary-encoded column of one long string decodes to gigabytes).
    """
    suffix = Path(path).suffix.lower()
    try:
        if suffix == ".csv":
            with open(path, "rb") as handle:
                head = handle.readline(MAX_LINE_BYTES + 1).decode("utf-8-sig", errors="replace")
            delimiter = ";" if head.count(";") > head.count(",") else ","
            table = pd.read_csv(
                path, dtype=str, keep_default_na=True, encoding="utf-8-sig", sep=delimiter, usecols=columns
            )
        elif suffix in {".jsonl", ".ndjson"}:
            table = _read_json_lines(path, columns)
        elif suffix == ".parquet":
            table = _read_parquet(path, columns)
        else:
            raise ResultsError([f"unknown file type {suffix!r}: upload a .csv, .jsonl or .parquet file"])
    except ResultsError:
        raise
    except Exception as exc:  # noqa: BLE001 - pandas and pyarrow raise many types for bad files
        raise ResultsError([f"the results file cannot be read as {suffix[1:]}: {_first_line(exc)}"]) from None
    if table.empty:
        raise ResultsError(["the results file has no rows"])
    table.columns = [str(c) for c in table.columns]
    for column in table.columns:
        values = table[column]
        if values.dtype == object:
            lengths = values.dropna().astype(str).str.len()
            if lengths.size and int(lengths.max()) > MAX_VALUE_CHARS:
                raise _too_large(
                    f"column {column!r} holds a value of {int(lengths.max()):,} characters; at most "
                    f"{MAX_VALUE_CHARS:,} are read"
                )
    return table


def _read_json_lines(path: Path, columns: list[str] | None) -> pd.DataFrame:
    """JSON Lines read line by line, keeping only ``columns`` of each object (bounded lines)."""
    wanted = None if columns is None else set(columns)
    rows = []
    with open(path, encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise ResultsError([f"the results file cannot be read as JSON Lines: line {number}: {exc}"]) from None
            if not isinstance(record, dict):
                raise ResultsError([f"the results file cannot be read as JSON Lines: line {number} is not an object"])
            if len(record) > MAX_COLUMNS:
                raise _too_large(f"line {number} has {len(record):,} keys; at most {MAX_COLUMNS:,} are read")
            rows.append(record if wanted is None else {k: v for k, v in record.items() if k in wanted})
    return pd.DataFrame(rows, columns=columns)


def _read_parquet(path: Path, columns: list[str] | None) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(path)
    meta = parquet.metadata
    names = [meta.schema.column(i).path.split(".")[0] for i in range(meta.num_columns)]
    chosen = [i for i, name in enumerate(names) if columns is None or name in columns]
    size = sum(meta.row_group(g).column(i).total_uncompressed_size for g in range(meta.num_row_groups) for i in chosen)
    if size > MAX_UNCOMPRESSED_BYTES:
        raise _too_large(
            f"the columns read hold {size / 1e6:,.0f} MB uncompressed; at most {MAX_UNCOMPRESSED_BYTES / 1e6:,.0f} MB"
        )
    text = [names[i] for i in chosen if pa.types.is_string(parquet.schema_arrow.field(names[i]).type)]
    # Text as dictionaries: one long string repeated stays one string until its length is checked.
    table = pq.ParquetFile(path, read_dictionary=text).read(columns=[names[i] for i in chosen])
    for name in table.column_names:
        column = table.column(name)
        if pa.types.is_dictionary(column.type):
            lengths = [
                pc.max(pc.utf8_length(chunk.dictionary)).as_py() for chunk in column.chunks if len(chunk.dictionary)
            ]
        elif pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            lengths = [pc.max(pc.utf8_length(column)).as_py()]
        elif (
            pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type) or pa.types.is_nested(column.type)
        ):
            raise ResultsError(
                [f"column {name!r} holds binary or nested values; ids, errors and predictions are numbers or text"]
            )
        else:
            continue
        longest = max([v for v in lengths if v is not None], default=0)
        if longest > MAX_VALUE_CHARS:
            raise _too_large(
                f"column {name!r} holds a value of {longest:,} characters; at most {MAX_VALUE_CHARS:,} are read"
            )
    return table.to_pandas()


def needed_columns(columns: list[str], spec: JoinSpec) -> list[str]:
    """The columns of the results the join reads: the id, and the error or the prediction and truth."""
    id_column = spec.id_column or next((c for c in AUTO_ID_COLUMNS if c in columns), "")
    wanted = [id_column, spec.error_column, spec.prediction_column, spec.truth_column]
    return list(dict.fromkeys(c for c in wanted if c and c in columns))


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


def join_results(
    results: pd.DataFrame, samples_of, spec: JoinSpec, all_columns: list[str] | None = None
) -> tuple[pd.DataFrame, dict]:
    """Join the results with the release; return the joined table (``KEY``, ``error``, attributes) and the report.

    ``samples_of(match_on)`` gives the release's samples keyed by that column (:func:`release_samples`).
    ``all_columns``: every column of the file, when only some were read (:func:`needed_columns`).

    Raises
    ------
    ResultsError
        Missing or unknown columns, empty or duplicated ids, non-numeric errors, too few matches.
    """
    columns = list(all_columns) if all_columns is not None else [str(c) for c in results.columns]
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


#: Prefix of the joined table's columns holding one labeler's tone per sample.
LABELER_PREFIX = "labeler_"
_LABEL_COLUMNS = ("image_id", "labeler", "value", "counted", "valid")


def samples_for_join(images: pd.DataFrame, labels: pd.DataFrame | None, attributes: list[str]):
    """The release's images with each labeler's counted tone (``labeler_<pseudonym>``), and the columns to keep."""
    attributes = list(attributes)
    if labels is not None and set(_LABEL_COLUMNS) <= set(labels.columns):
        labels = labels[labels["counted"].fillna(False) & labels["valid"].fillna(False) & labels["value"].notna()]
        if not labels.empty:
            wide = labels.pivot_table(index="image_id", columns="labeler", values="value", aggfunc="mean")
            wide.columns = [f"{LABELER_PREFIX}{c}" for c in wide.columns]
            images = images.merge(wide.reset_index(), on="image_id", how="left")
            attributes += [c for c in images.columns if c.startswith(LABELER_PREFIX)]
    return images, attributes


def join_release(results_path: Path, columns: list[str], images: pd.DataFrame, attributes, spec: JoinSpec):
    """Read the results (only the columns the join needs) and join them with the release's samples."""
    results = read_results(results_path, needed_columns(columns, spec))
    joined, join = join_results(results, lambda on: release_samples(images, on, attributes), spec, all_columns=columns)
    join["with_final_value"] = int(np.isfinite(joined["final_value"].to_numpy(dtype=float)).sum())
    return joined, join


def main(argv: list[str] | None = None) -> int:
    """Read and join a results file in a process of its own, with a memory limit (the web app's uploads).

    Run as ``python joining.py REQUEST.json`` (this file, not the package: nothing of Django is
    imported). The request names the results file and its columns, the release's images and labels
    tables, the attributes, the join's spec, the output file and the memory limit. It writes the joined
    table and prints one JSON object: ``{"join": ...}`` or ``{"problems": [...], "join": ..., "too_large": ...}``.
    """
    import resource
    import sys

    request = json.loads(Path((argv or sys.argv[1:])[0]).read_text(encoding="utf-8"))
    limit = int(request["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        import pyarrow.parquet as pq

        images = pq.read_table(request["images"]).to_pandas()
        labels = None
        if request.get("labels"):
            names = set(pq.read_schema(request["labels"]).names)
            if set(_LABEL_COLUMNS) <= names:
                labels = pq.read_table(request["labels"], columns=list(_LABEL_COLUMNS)).to_pandas()
        images, attributes = samples_for_join(images, labels, request["attributes"])
        joined, join = join_release(
            Path(request["results"]), request["columns"], images, attributes, JoinSpec(**request["spec"])
        )
        joined.to_parquet(request["out"], index=False)
        answer = {"join": join}
    except ResultsError as exc:
        answer = {"problems": exc.problems, "join": exc.join, "too_large": exc.too_large}
    except MemoryError:
        answer = {
            "problems": [
                f"reading the file needs more than {limit / 1e9:.1f} GB of memory: keep only the id and error "
                "columns, or split it"
            ],
            "too_large": True,
        }
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
