"""Reading a manifest (CSV or JSON Lines) into rows, and the cells of a row."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from .report import ImportRefused, ImportTooLarge, import_limits

# A manifest row is a few hundred bytes; 200,000 rows stay well under this.
MAX_MANIFEST_BYTES = 256 * 1024 * 1024
# What one manifest may hold, checked before (or while) it is parsed; FAIRTONE settings of the same names
# override them. The time budget bounds reading and checking the manifest, before any image is created.
MAX_MANIFEST_COLUMNS = 500
MAX_MANIFEST_LINE_CHARS = 64 * 1024
MANIFEST_TIME_BUDGET_SECONDS = 30.0
MANIFEST_NAMES = ("manifest.csv", "manifest.jsonl")
FILE_COLUMNS = ("file", "filename", "image")
#: One person's box in the photo, in pixels after the photo's EXIF orientation: all four or none.
BOX_COLUMNS = ("x", "y", "width", "height")
RESERVED_COLUMNS = ("image_id", "subject_id", "mask", "mask_kind", *BOX_COLUMNS)
# Columns named "image.<name>" hold per-image attributes (for example image.pose);
# every other extra column is an attribute of the subject.
IMAGE_ATTRIBUTE_PREFIX = "image."
_INT = re.compile(r"[+-]?(0|[1-9]\d*)")
_LEADING_ZERO = re.compile(r"[+-]?0\d+")  # "007": an identifier, kept as text (not 7.0)
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")
# Cells a spreadsheet would run as a formula (OWASP "CSV injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def is_formula_like(value: str) -> bool:
    """Whether a text cell would run as a formula if opened in a spreadsheet.

    Parameters
    ----------
    value : str
        A cell as text.

    Returns
    -------
    bool
        True when it starts with ``= + - @`` (or a tab or carriage return) and is
        not simply a number such as ``-3.5``.

    Examples
    --------
    >>> is_formula_like("=HYPERLINK(\\"http://x\\")"), is_formula_like("-3.5"), is_formula_like("a")
    (True, False, False)
    """
    text = str(value)
    if not text.startswith(_FORMULA_START):
        return False
    return not _FLOAT.fullmatch(text.strip())


def parse_cell(text: str) -> str | int | float | None:
    """A manifest cell as a number when it is one, else as stripped text.

    Parameters
    ----------
    text : str
        The cell.

    Returns
    -------
    str, int, float or None
        None for an empty cell; ``int`` or ``float`` for numbers (``"007"`` stays
        text: leading zeros mark an identifier); the stripped text otherwise.

    Examples
    --------
    >>> parse_cell(" 42 "), parse_cell("1.5e3"), parse_cell("007"), parse_cell(""), parse_cell("M")
    (42, 1500.0, '007', None, 'M')
    """
    value = str(text).strip()
    if not value:
        return None
    if _INT.fullmatch(value):
        try:
            return int(value)
        except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits): kept as text
            return value
    if _FLOAT.fullmatch(value) and not _LEADING_ZERO.fullmatch(value):
        number = float(value)
        return number if math.isfinite(number) else value
    return value


@dataclass
class ManifestRow:
    """One row of a manifest as read (``error`` says why it cannot be imported, if so)."""

    number: int  # 1 = the CSV header; for JSON Lines, the line number
    cells: dict[str, Any]  # column -> parsed value (None when empty)
    error: str = ""


def _decode_text(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ImportRefused(
            f"{name} is not UTF-8 text: byte 0x{data[exc.start]:02X} at offset {exc.start} "
            f"(line {line}) cannot be read; save the file as 'CSV UTF-8' and retry"
        ) from exc


def _is_jsonl(data: bytes, name: str) -> bool:
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return True
    if suffix in (".csv", ".tsv", ".txt"):
        return False
    return data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"{"


def _check_columns(columns: list[str], name: str, require_file: bool = True) -> None:
    if not columns:
        raise ImportRefused(f"{name} is empty")
    missing_name = [i + 1 for i, column in enumerate(columns) if not column]
    if missing_name:
        raise ImportRefused(f"{name}: column {missing_name[0]} of the header has no name")
    counts = Counter(column.lower() for column in columns)
    duplicated = sorted(c for c in columns if counts[c.lower()] > 1)
    if duplicated:
        raise ImportRefused(f"{name}: the header names column '{duplicated[0]}' twice")
    if require_file and not any(column.lower() in FILE_COLUMNS for column in columns):
        found = ", ".join(f"'{c}'" for c in columns)
        raise ImportRefused(f"the manifest has no 'file' column; columns found: {found}")
    if sum(column.lower() in FILE_COLUMNS for column in columns) > 1:
        raise ImportRefused(f"{name} has more than one of the columns {', '.join(FILE_COLUMNS)}; keep one")


@dataclass
class _Budget:
    """The limits of one manifest: columns, characters per line, and a deadline for reading it."""

    name: str
    max_columns: int
    max_line: int
    deadline: float

    @classmethod
    def start(cls, name: str) -> _Budget:
        limits = import_limits()
        seconds = float(limits.get("MANIFEST_TIME_BUDGET_SECONDS", MANIFEST_TIME_BUDGET_SECONDS))
        return cls(
            name,
            int(limits.get("MAX_MANIFEST_COLUMNS", MAX_MANIFEST_COLUMNS)),
            int(limits.get("MAX_MANIFEST_LINE_CHARS", MAX_MANIFEST_LINE_CHARS)),
            time.monotonic() + seconds,
        )

    def columns(self, count: int, where: str) -> None:
        if count > self.max_columns:
            raise ImportTooLarge(
                f"{self.name}: {where} has more than {self.max_columns:,} columns (the limit); "
                "keep the columns the import needs"
            )

    def line(self, length: int, number: int) -> None:
        if length > self.max_line:
            raise ImportTooLarge(f"{self.name}: line {number} is longer than {self.max_line:,} characters (the limit)")

    def clock(self, number: int) -> None:
        if time.monotonic() > self.deadline:
            raise ImportTooLarge(
                f"{self.name}: reading the manifest took too long (stopped at line {number}); "
                "split it into several imports"
            )


def _check_row_count(count: int, name: str) -> None:
    max_rows = int(import_limits()["MAX_MANIFEST_ROWS"])
    if count > max_rows:
        raise ImportRefused(f"{name} has more than {max_rows:,} rows (the limit); split it into several imports")


def _lines(text: str, budget: _Budget):
    """The lines of ``text``, each checked for length before the CSV reader parses it."""
    for number, line in enumerate(io.StringIO(text, newline=""), start=1):
        budget.line(len(line.rstrip("\r\n")), number)
        yield line


def csv_delimiter(header: str) -> str:
    """The delimiter of a CSV file from its header line: a comma, else the semicolon a spreadsheet writes where
    the comma is the decimal mark, or a tab (the one rule of every CSV the app reads: manifests, label imports).

    Examples
    --------
    >>> csv_delimiter("file,subject_id"), csv_delimiter("image_id;labeler;tones"), csv_delimiter("a\\tb")
    (',', ';', '\\t')
    """
    if header.count(",") or not header.strip():
        return ","
    delimiter = max((";", "\t"), key=header.count)
    return delimiter if header.count(delimiter) else ","


def _parse_csv(text: str, name: str, budget: _Budget, require_file: bool = True) -> list[ManifestRow]:
    end = text.find("\n", 0, budget.max_line + 2)
    first_line = text[: end if end >= 0 else budget.max_line + 2].rstrip("\r")
    delimiter = csv_delimiter(first_line)
    budget.columns(first_line.count(delimiter) + 1, "the header")
    budget.line(len(first_line), 1)
    reader = csv.reader(_lines(text, budget), delimiter=delimiter)
    rows: list[ManifestRow] = []
    try:
        header = next(reader, None)
        if header is None:
            raise ImportRefused(f"{name} is empty")
        budget.columns(len(header), "the header")
        columns = [column.strip() for column in header]
        _check_columns(columns, name, require_file)
        for number, record in enumerate(reader, start=2):
            budget.clock(number)
            budget.columns(len(record), f"line {number}")
            if not any(cell.strip() for cell in record):
                continue
            _check_row_count(len(rows) + 1, name)
            error = ""
            if len(record) > len(columns):
                error = f"the row has {len(record)} cells but the header has {len(columns)} columns"
            record = record + [""] * (len(columns) - len(record))
            cells = dict(zip(columns, record, strict=False))
            rows.append(ManifestRow(number, cells, error))
    except csv.Error as exc:
        raise ImportRefused(f"{name} cannot be read near line {reader.line_num}: {exc}") from exc
    return rows


def _parse_jsonl(text: str, name: str, budget: _Budget, require_file: bool = True) -> list[ManifestRow]:
    rows: list[ManifestRow] = []
    columns: dict[str, None] = {}  # in order of appearance
    for number, line in enumerate(text.splitlines(), start=1):
        budget.clock(number)
        budget.line(len(line), number)
        if not line.strip():
            continue
        _check_row_count(len(rows) + 1, name)
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            rows.append(ManifestRow(number, {}, f"the line is not valid JSON ({exc.msg})"))
            continue
        except (ValueError, RecursionError):  # an integer of 4,300+ digits; nesting too deep to decode
            rows.append(ManifestRow(number, {}, "the line is not valid JSON (a number too long or nesting too deep)"))
            continue
        if not isinstance(record, dict):
            rows.append(ManifestRow(number, {}, "the line is not a JSON object"))
            continue
        cells: dict[str, Any] = {}
        error = ""
        for key, value in record.items():
            key = str(key).strip()
            if key not in columns:
                columns[key] = None
                budget.columns(len(columns), "the manifest")
            if value is None:
                cells[key] = ""
            elif isinstance(value, bool) or not isinstance(value, (str, int, float)):
                error = f"'{key}' holds {type(value).__name__}; only text and numbers are allowed"
            elif isinstance(value, float) and not math.isfinite(value):
                error = f"'{key}' is not a finite number"
            else:
                cells[key] = value
        rows.append(ManifestRow(number, cells, error))
    if not rows:
        raise ImportRefused(f"{name} has no rows")
    _check_columns(list(columns), name, require_file)
    return rows


def parse_manifest(data: bytes, name: str, *, require_file: bool = True) -> list[ManifestRow]:
    """The rows of a CSV or JSON Lines manifest. ``require_file``: refuse one without a file column (an import
    needs its files; applying attributes to images already imported can match them by ``image_id`` alone)."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise ImportRefused(f"{name} is larger than {MAX_MANIFEST_BYTES:,} bytes")
    text = _decode_text(data, name)
    if "\x00" in text:
        raise ImportRefused(f"{name} contains NUL bytes; it is not a text manifest")
    budget = _Budget.start(name)
    parse = _parse_jsonl if _is_jsonl(data, name) else _parse_csv
    rows = parse(text, name, budget, require_file)
    if not rows:
        raise ImportRefused(f"{name} has a header but no rows")
    return rows


def cell_text(value: Any) -> str:
    if value is None:
        return ""
    return str(value).strip()


class BoxCellsError(ValueError):
    """The box cells of a row cannot be a box; the message says why."""


def _box_number(name: str, raw: Any) -> int:
    value = parse_cell(raw) if isinstance(raw, str) else raw
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BoxCellsError(f"{name} = {cell_text(raw)!r} is not a whole number of pixels")
    return value


def box_cells(cells: dict[str, Any]) -> tuple[int, int, int, int] | None:
    """The row's box ``(x, y, width, height)`` from its ``x``, ``y``, ``width``, ``height`` cells, or None when
    the four are empty (the row is the whole photo).

    Raises
    ------
    BoxCellsError
        Some but not all four given, a cell that is not a whole number, a negative corner, or no area.

    Examples
    --------
    >>> box_cells({"file": "a.jpg", "X": "10", "y": 20, "width": "30.0", "height": "40"})
    (10, 20, 30, 40)
    >>> box_cells({"file": "a.jpg", "x": "", "y": None}) is None
    True
    >>> box_cells({"x": "10", "y": "5"})
    Traceback (most recent call last):
    ...
    labeling.services.imports.manifest.BoxCellsError: a box needs all four of x, y, width, height: width and height are empty
    """
    lowered = {key.lower(): key for key in cells}
    raw = {name: cells.get(lowered[name]) if name in lowered else None for name in BOX_COLUMNS}
    given = [name for name in BOX_COLUMNS if cell_text(raw[name])]
    if not given:
        return None
    missing = [name for name in BOX_COLUMNS if name not in given]
    if missing:
        names = missing[0] if len(missing) == 1 else ", ".join(missing[:-1]) + f" and {missing[-1]}"
        raise BoxCellsError(
            f"a box needs all four of x, y, width, height: {names} {'is' if len(missing) == 1 else 'are'} empty"
        )
    x, y, width, height = (_box_number(name, raw[name]) for name in BOX_COLUMNS)
    if x < 0 or y < 0:
        raise BoxCellsError(f"the box starts outside the photo (x={x}, y={y}): x and y are 0 or more")
    if width < 1 or height < 1:
        raise BoxCellsError(f"the box has no area (width={width}, height={height}): both are 1 or more")
    return (x, y, width, height)
