"""Importing the rows of a manifest, one image per row, each accepted or rejected with a reason.

Each row goes through the same steps: check it (``_plan_row``: not a repeat, a safe
path, an unused image id, attributes that agree with what earlier rows said about the
subject), read its file and mask (``_read_files``), create the image (``import_one``).
A step that rejects the row raises ``_RowRejected``; the row is then reported and the
next one starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from ...models import ImportItem, Project
from ..images import ImageRejected
from .manifest import (
    FILE_COLUMNS,
    IMAGE_ATTRIBUTE_PREFIX,
    RESERVED_COLUMNS,
    ManifestRow,
    cell_text,
    is_formula_like,
    parse_cell,
)
from .report import ImportReport, import_one
from .sources import ArchiveSource, FolderSource, MissingFile, normalise_relative


class _RowRejected(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class _Seen:
    """What earlier rows of the manifest used."""

    rows: dict[tuple, int] = field(default_factory=dict)  # row contents -> row number
    ids: dict[str, int] = field(default_factory=dict)  # image id -> row number
    # subject id -> attribute -> (value, row that set it)
    subject_values: dict[str, dict[str, tuple[Any, int]]] = field(default_factory=dict)
    paths: set[str] = field(default_factory=set)  # files (and masks) that rows read


@dataclass
class _Plan:
    """A checked row: what to read and what to create."""

    file_cell: str  # as written in the manifest (for messages)
    path: str
    image_id: str
    subject_id: str
    mask_cell: str
    mask_kind: str
    warnings: list[str]
    subject_attributes: dict[str, Any]
    image_attributes: dict[str, Any]


def import_rows(
    report: ImportReport,
    *,
    project: Project,
    rows: list[ManifestRow],
    source: ArchiveSource | FolderSource | None,
) -> set[str]:
    """Import manifest rows one by one; returns the paths that rows used."""
    seen = _Seen()
    for row in rows:
        prefix = f"row {row.number}: "
        try:
            plan = _plan_row(row, seen)
            data, mask_data = _read_files(plan, source, seen)
        except _RowRejected as rejected:
            report.add(
                ImportItem.Outcome.REJECTED, filename=_file_cell(row), row=row.number, reason=prefix + rejected.reason
            )
            continue
        image = import_one(
            report,
            project=project,
            filename=plan.path,
            data=data,
            row=row.number,
            prefix=prefix,
            warnings=plan.warnings,
            subject_id=plan.subject_id,
            subject_attributes=plan.subject_attributes,
            external_id=plan.image_id or None,
            attributes=plan.image_attributes,
            mask_data=mask_data,
            mask_kind=plan.mask_kind,
        )
        if image is not None and plan.subject_id:
            values = seen.subject_values.setdefault(plan.subject_id, {})
            for name, value in plan.subject_attributes.items():
                values.setdefault(name, (value, row.number))
    return seen.paths


def _columns(row: ManifestRow) -> dict[str, str]:
    """Lower-cased column name -> the column as written."""
    return {key.lower(): key for key in row.cells}


def _file_key(row: ManifestRow) -> str | None:
    lowered = _columns(row)
    return next((lowered[c] for c in FILE_COLUMNS if c in lowered), None)


def _file_cell(row: ManifestRow) -> str:
    file_key = _file_key(row)
    return cell_text(row.cells.get(file_key)) if file_key else ""


def _plan_row(row: ManifestRow, seen: _Seen) -> _Plan:
    """Check a row against itself and the earlier rows (recording it as seen)."""
    if row.error:
        raise _RowRejected(row.error)
    signature = tuple(sorted((k, cell_text(v)) for k, v in row.cells.items() if cell_text(v)))
    if signature in seen.rows:
        raise _RowRejected(f"repeats row {seen.rows[signature]}")
    seen.rows[signature] = row.number
    file_cell = _file_cell(row)
    if not file_cell:
        raise _RowRejected("the 'file' cell is empty")
    try:
        path = normalise_relative(file_cell)
    except ValueError as exc:
        raise _RowRejected(f"file '{file_cell}' {exc}") from None

    lowered = _columns(row)
    image_id, subject_id, mask_cell, mask_kind = (
        cell_text(row.cells.get(lowered.get(name))) for name in ("image_id", "subject_id", "mask", "mask_kind")
    )
    effective_id = image_id or PurePosixPath(path).stem
    if effective_id in seen.ids:
        raise _RowRejected(f"image id '{effective_id}' is already used by row {seen.ids[effective_id]}")
    seen.ids[effective_id] = row.number

    warnings, subject_attributes, image_attributes = row_attributes(row, _file_key(row), subject_id)
    _check_subject(seen, subject_id, subject_attributes)
    return _Plan(
        file_cell=file_cell,
        path=path,
        image_id=image_id,
        subject_id=subject_id,
        mask_cell=mask_cell,
        mask_kind=mask_kind,
        warnings=warnings,
        subject_attributes=subject_attributes,
        image_attributes=image_attributes,
    )


def row_attributes(
    row: ManifestRow, file_key: str | None, subject_id: str
) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
    """Warnings (formula-like cells) and the attributes of the subject and of the image.

    Every column but the reserved ones is an attribute: of the image when named
    ``image.<name>`` or when the row has no subject, of the subject otherwise. Also used to apply a
    manifest's attributes to images already imported (``services.image_attributes``).
    """
    reserved = {*([file_key.lower()] if file_key else []), *RESERVED_COLUMNS}
    warnings: list[str] = []
    subject_attributes: dict[str, Any] = {}
    image_attributes: dict[str, Any] = {}
    for column, raw in row.cells.items():
        if isinstance(raw, str) and is_formula_like(raw.strip()):
            warnings.append(f"column '{column}' starts like a spreadsheet formula; kept as text")
        if column.lower() in reserved:
            continue
        value = parse_cell(raw) if isinstance(raw, str) else raw
        if value is None:
            continue
        if column.lower().startswith(IMAGE_ATTRIBUTE_PREFIX):
            image_attributes[column[len(IMAGE_ATTRIBUTE_PREFIX) :]] = value
        elif subject_id:
            subject_attributes[column] = value
        else:
            image_attributes[column] = value
    return warnings, subject_attributes, image_attributes


def _check_subject(seen: _Seen, subject_id: str, attributes: dict[str, Any]) -> None:
    """Reject a row that gives its subject another value than an earlier imported row did."""
    known = seen.subject_values.get(subject_id, {})
    for name, value in attributes.items():
        if name in known and known[name][0] != value:
            earlier, earlier_row = known[name]
            raise _RowRejected(
                f"subject '{subject_id}' has {name}={earlier!r} in row {earlier_row} but {name}={value!r} here"
            )


def _read_files(plan: _Plan, source: ArchiveSource | FolderSource | None, seen: _Seen) -> tuple[bytes, bytes | None]:
    """The row's image file and its mask (None without one) from the archive or folder."""
    if source is None:
        raise _RowRejected("no archive or folder holds the files of this manifest")
    data = _read(source, plan.path, f"file '{plan.file_cell}'")
    seen.paths.add(plan.path)
    if not plan.mask_cell:
        return data, None
    try:
        mask_path = normalise_relative(plan.mask_cell)
    except ValueError as exc:
        raise _RowRejected(f"mask '{plan.mask_cell}' {exc}") from None
    mask_data = _read(source, mask_path, f"mask '{plan.mask_cell}'")
    seen.paths.add(mask_path)
    return data, mask_data


def _read(source: ArchiveSource | FolderSource, path: str, what: str) -> bytes:
    try:
        return source.read(path)
    except MissingFile:
        raise _RowRejected(f"{what} is not in {source.where}") from None
    except ImageRejected as exc:
        raise _RowRejected(f"{what}: {exc.reason}") from None
