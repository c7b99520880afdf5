"""Importing the rows of a manifest, one image per row, each accepted or rejected with a reason.

Each row goes through the same steps: check it (``_plan_row``: not a repeat, a safe
path, an unused image id, a box that is four whole numbers and not one an earlier row gave,
attributes that agree with what earlier rows said about the subject), read its file and mask
(``_read_files``), create the image (``import_one``). A step that rejects the row raises
``_RowRejected``; the row is then reported and the next one starts.

A photo with several people: each row that gives a box (``x``, ``y``, ``width``, ``height``) is one
person's item. The rows giving boxes of one file are imported together, where its first such row
stands: all of them or, when one is rejected (a box outside the photo, a bad cell, a duplicate box, ...),
none of them, each reported with its own reason or with the row that stopped the photo. A re-import of
the fixed manifest then skips the boxes already in as duplicates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from django.db import transaction

from ...models import Image, ImportItem, Project
from ..images import ImageRejected, box_check, image_oriented_size
from .manifest import (
    BOX_COLUMNS,
    FILE_COLUMNS,
    IMAGE_ATTRIBUTE_PREFIX,
    RESERVED_COLUMNS,
    BoxCellsError,
    ManifestRow,
    box_cells,
    cell_text,
    is_formula_like,
    parse_cell,
)
from .report import ImportReport, Outcome, create_one, import_one, remove_unreferenced_files
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
    boxes: dict[tuple, int] = field(default_factory=dict)  # (file, box) -> row number


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
    box: tuple[int, int, int, int] | None = None


def import_rows(
    report: ImportReport,
    *,
    project: Project,
    rows: list[ManifestRow],
    source: ArchiveSource | FolderSource | None,
) -> set[str]:
    """Import manifest rows one by one (the boxes of one photo together); returns the paths that rows used."""
    seen = _Seen()
    groups = _box_groups(rows)
    done: set[int] = set()  # rows already imported with their photo's other boxes
    for row in rows:
        if row.number in done:
            continue
        group = groups.get(row.number)
        if group is not None:
            _import_box_group(report, project, group, source, seen)
            done.update(r.number for r in group)
            continue
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
            report, project=project, filename=plan.path, data=data, row=row.number, **_create(plan, row, mask_data)
        )
        if image is not None:
            _remember_subject(seen, plan, row.number)
    return seen.paths


def _create(plan: _Plan, row: ManifestRow, mask_data: bytes | None) -> dict[str, Any]:
    """What ``import_one`` / ``create_one`` take from a checked row (besides the file and its row number)."""
    return {
        "prefix": f"row {row.number}: ",
        "warnings": plan.warnings,
        "subject_id": plan.subject_id,
        "subject_attributes": plan.subject_attributes,
        "external_id": plan.image_id or None,
        "attributes": plan.image_attributes,
        "mask_data": mask_data,
        "mask_kind": plan.mask_kind,
        "box": plan.box,
    }


def _remember_subject(seen: _Seen, plan: _Plan, number: int) -> None:
    if plan.subject_id:
        values = seen.subject_values.setdefault(plan.subject_id, {})
        for name, value in plan.subject_attributes.items():
            values.setdefault(name, (value, number))


def _box_groups(rows: list[ManifestRow]) -> dict[int, list[ManifestRow]]:
    """Row number -> the rows giving boxes of the same file (in manifest order), for every such row."""
    by_file: dict[str, list[ManifestRow]] = {}
    for row in rows:
        lowered = _columns(row)
        if not any(cell_text(row.cells.get(lowered.get(name))) for name in BOX_COLUMNS):
            continue
        try:
            path = normalise_relative(_file_cell(row))
        except ValueError:
            continue  # rejected on its own, with its reason
        by_file.setdefault(path, []).append(row)
    return {row.number: group for group in by_file.values() for row in group}


def _import_box_group(
    report: ImportReport,
    project: Project,
    group: list[ManifestRow],
    source: ArchiveSource | FolderSource | None,
    seen: _Seen,
) -> None:
    """Import the boxes of one photo: all of them, or none with each row's reason."""
    planned: list[tuple[ManifestRow, _Plan | None, bytes, bytes | None]] = []
    reasons: dict[int, str] = {}
    size = None
    for row in group:
        try:
            plan = _plan_row(row, seen)
            data, mask_data = _read_files(plan, source, seen)
            if size is None:
                size = image_oriented_size(data)
            if size is not None:
                box_check(plan.box, *size)
        except _RowRejected as rejected:
            reasons[row.number] = rejected.reason
            planned.append((row, None, b"", None))
            continue
        except ImageRejected as rejected:
            reasons[row.number] = rejected.reason
            planned.append((row, None, b"", None))
            continue
        planned.append((row, plan, data, mask_data))
    outcomes: list[Outcome] = []
    if not reasons:
        created: list[Image] = []
        try:
            with transaction.atomic():
                for row, plan, data, mask_data in planned:
                    outcome = create_one(
                        report,
                        project=project,
                        filename=plan.path,
                        data=data,
                        row=row.number,
                        **_create(plan, row, mask_data),
                    )
                    outcomes.append(outcome)
                    if outcome.outcome == ImportItem.Outcome.REJECTED:
                        reasons[row.number] = outcome.reason.removeprefix(f"row {row.number}: ")
                    elif outcome.image is not None:
                        created.append(outcome.image)
                if reasons:
                    raise _GroupRolledBack
        except _GroupRolledBack:
            remove_unreferenced_files(created)
    if reasons:
        first = min(reasons)
        for row, _plan, _data, _mask in planned:
            reason = reasons.get(row.number) or (
                f"not imported: row {first}, another box of the same photo, was rejected "
                "(the boxes of a photo are imported together); fix it and import again"
            )
            report.add(
                ImportItem.Outcome.REJECTED,
                filename=_file_cell(row),
                row=row.number,
                reason=f"row {row.number}: {reason}",
            )
        return
    for (row, plan, _data, _mask), outcome in zip(planned, outcomes, strict=True):
        report.add(
            outcome.outcome, filename=outcome.filename, row=row.number, image=outcome.image, reason=outcome.reason
        )
        if outcome.outcome == ImportItem.Outcome.IMPORTED:
            _remember_subject(seen, plan, row.number)


class _GroupRolledBack(Exception):
    """A box of the photo was rejected: nothing of the photo's boxes is kept."""


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
    try:
        box = box_cells(row.cells)
    except BoxCellsError as exc:
        raise _RowRejected(str(exc)) from None
    effective_id = image_id or default_image_id(path, box, subject_id)
    if box is not None:
        if (path, box) in seen.boxes:
            raise _RowRejected(f"the same box of '{file_cell}' as row {seen.boxes[(path, box)]}")
        seen.boxes[(path, box)] = row.number
        if not image_id:
            image_id = effective_id
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
        box=box,
    )


def default_image_id(path: str, box: tuple[int, int, int, int] | None, subject_id: str) -> str:
    """The image id of a row without one: the file name's stem; for a box, the stem and the box's subject
    (``group#alice``), or the box's numbers when it has no subject (``group#10,20,30,40``)."""
    stem = PurePosixPath(path).stem
    if box is None:
        return stem
    return f"{stem}#{subject_id or ','.join(str(v) for v in box)}"


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
