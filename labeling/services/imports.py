"""Imports of many images at once: browser uploads, zip archives and manifests.

Each import is an ``ImportBatch`` with one ``ImportItem`` per file (or manifest
row) saying imported, duplicate or rejected, and why. An import that cannot be
trusted as a whole (a bad or malicious archive, an unreadable manifest) is refused
before any image is created; otherwise every file or row is its own atomic unit.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import stat
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ..models import Image, ImportBatch, ImportItem, Project, Subject
from .images import (
    IMAGE_EXTENSIONS,
    DuplicateImage,
    ImageRejected,
    image_create_from_bytes,
)

# A member over 1 MB that expands more than this many times is treated as a zip
# bomb: JPEG/PNG/WebP photos barely compress (ratios near 1:1), and even a flat
# BMP of one colour stays under about 100:1 with deflate's 1032:1 ceiling.
MAX_COMPRESSION_RATIO = 200
RATIO_CHECK_MIN_BYTES = 1024 * 1024
# A manifest row is a few hundred bytes; 200,000 rows stay well under this.
MAX_MANIFEST_BYTES = 256 * 1024 * 1024
MANIFEST_NAMES = ("manifest.csv", "manifest.jsonl")
FILE_COLUMNS = ("file", "filename", "image")
RESERVED_COLUMNS = ("image_id", "subject_id", "mask", "mask_kind")
# Columns named "image.<name>" hold per-image attributes (for example image.pose);
# every other extra column is an attribute of the subject.
IMAGE_ATTRIBUTE_PREFIX = "image."
_INT = re.compile(r"[+-]?(0|[1-9]\d*)")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")
_DRIVE = re.compile(r"^[A-Za-z]:")
# Cells a spreadsheet would run as a formula (OWASP "CSV injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class ImportRefused(Exception):
    """The whole import is refused; nothing was created."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _MissingFile(Exception):
    pass


def _limits() -> dict[str, Any]:
    return settings.FAIRTONE


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
        return int(value)
    if _FLOAT.fullmatch(value):
        number = float(value)
        return number if math.isfinite(number) else value
    return value


# --- batches -----------------------------------------------------------------------


@dataclass
class _Report:
    batch: ImportBatch
    items: list[ImportItem] = field(default_factory=list)

    def add(
        self,
        outcome: str,
        *,
        filename: str,
        reason: str = "",
        image: Image | None = None,
        row: int | None = None,
    ) -> None:
        item = ImportItem.objects.create(
            batch=self.batch,
            row=row,
            filename=filename[:500],
            outcome=outcome,
            reason=reason,
            image=image,
        )
        self.items.append(item)
        if outcome == ImportItem.Outcome.IMPORTED:
            self.batch.n_imported += 1
        elif outcome == ImportItem.Outcome.DUPLICATE:
            self.batch.n_duplicate += 1
        else:
            self.batch.n_rejected += 1

    def finish(self) -> ImportBatch:
        self.batch.status = ImportBatch.Status.DONE
        self.batch.finished_at = timezone.now()
        self.batch.save()
        return self.batch

    def refuse(self, reason: str) -> ImportBatch:
        self.batch.status = ImportBatch.Status.FAILED
        self.batch.error = reason
        self.batch.finished_at = timezone.now()
        self.batch.save()
        return self.batch


def _start(project: Project, kind: str, source_name: str, user) -> _Report:
    batch = ImportBatch.objects.create(
        project=project,
        kind=kind,
        source_name=str(source_name)[:300],
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )
    return _Report(batch)


def _import_one(
    report: _Report,
    *,
    project: Project,
    filename: str,
    data: bytes,
    row: int | None = None,
    prefix: str = "",
    warnings: list[str] | None = None,
    subject_id: str = "",
    subject_attributes: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Image | None:
    """Create one image (and update its subject) atomically; record the outcome.

    Returns the image if it was imported. A rejected or duplicate file leaves
    nothing behind, not even its subject's attributes.
    """
    try:
        with transaction.atomic():
            subject = None
            if subject_id:
                subject = _subject_upsert(project, subject_id, subject_attributes or {})
            image = image_create_from_bytes(
                project=project,
                filename=filename,
                data=data,
                batch=report.batch,
                subject=subject,
                **kwargs,
            )
    except DuplicateImage as duplicate:
        report.add(
            ImportItem.Outcome.DUPLICATE,
            filename=filename,
            row=row,
            image=duplicate.existing,
            reason=f"{prefix}same content as image '{duplicate.existing.external_id}' already in the project",
        )
        return None
    except ImageRejected as rejected:
        report.add(
            ImportItem.Outcome.REJECTED,
            filename=filename,
            row=row,
            reason=prefix + rejected.reason,
        )
        return None
    reason = "; ".join(warnings or [])
    report.add(
        ImportItem.Outcome.IMPORTED,
        filename=filename,
        row=row,
        image=image,
        reason=f"{prefix}{reason}" if reason else "",
    )
    return image


def _subject_upsert(project: Project, subject_id: str, attributes: dict[str, Any]) -> Subject:
    if len(subject_id) > 200:
        raise ImageRejected("the subject id is longer than 200 characters")
    subject, _created = Subject.objects.select_for_update().get_or_create(project=project, external_id=subject_id)
    # Later imports update what earlier ones said about the subject.
    merged = {**(subject.attributes or {}), **attributes}
    if merged != subject.attributes:
        subject.attributes = merged
        subject.save(update_fields=["attributes"])
    return subject


def _run(report: _Report, work) -> ImportBatch:
    """Run ``work``; a refusal fails the batch, an unexpected error too (then re-raised)."""
    try:
        work()
    except ImportRefused as refused:
        return report.refuse(refused.reason)
    except Exception as exc:
        report.refuse(
            f"the import stopped unexpectedly after {len(report.items)} files "
            f"({type(exc).__name__}); the files listed were processed"
        )
        raise
    return report.finish()


def _read_capped(handle: IO[bytes], limit: int) -> bytes:
    """Read at most ``limit + 1`` bytes: one more than allowed shows the file is too big."""
    chunks: list[bytes] = []
    remaining = limit + 1
    while remaining > 0:
        chunk = handle.read(min(remaining, 1024 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _too_big(limit: int) -> str:
    return f"the file is over the size limit of {limit:,} bytes"


def _extension_reason(name: str) -> str | None:
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in IMAGE_EXTENSIONS:
        return None
    allowed = ", ".join(sorted(e.lstrip(".") for e in IMAGE_EXTENSIONS))
    what = f"'{suffix}' files are" if suffix else "files without an extension are"
    return f"not imported: {what} not images this app reads (supported: {allowed})"


# --- browser uploads ---------------------------------------------------------------


def import_files(*, project: Project, files: Iterable[tuple[str, IO[bytes]]], user) -> ImportBatch:
    """Import uploaded files one by one.

    Parameters
    ----------
    project : Project
        The project the images join.
    files : iterable of (str, file object)
        Names and binary file objects (Django ``UploadedFile`` works).
    user : User
        Who imports (recorded on the batch).

    Returns
    -------
    ImportBatch
        Status done, one item per file, counts filled.

    Examples
    --------
    >>> batch = import_files(project=p, files=[("a.jpg", io.BytesIO(jpeg))], user=u)  # doctest: +SKIP
    >>> batch.n_imported  # doctest: +SKIP
    1
    """
    report = _start(project, ImportBatch.Kind.UPLOAD, "browser upload", user)

    def work() -> None:
        limit = int(_limits()["MAX_IMAGE_BYTES"])
        for name, handle in files:
            filename = str(name or getattr(handle, "name", "") or "upload")
            reason = _extension_reason(filename)
            if reason is not None:
                report.add(ImportItem.Outcome.REJECTED, filename=filename, reason=reason)
                continue
            size = getattr(handle, "size", None)
            data = b"" if isinstance(size, int) and size > limit else _read_capped(handle, limit)
            if (isinstance(size, int) and size > limit) or len(data) > limit:
                report.add(
                    ImportItem.Outcome.REJECTED,
                    filename=filename,
                    reason=_too_big(limit),
                )
                continue
            _import_one(report, project=project, filename=filename, data=data)
        report.batch.source_name = f"{len(report.items)} uploaded files"

    return _run(report, work)


# --- sources of image files (an archive or a server folder) ---------------------------


def _normalise_relative(path: str) -> str:
    """A relative POSIX path, or ImportRefused-worthy text explaining why it is unsafe."""
    text = str(path).replace("\\", "/")
    if "\x00" in text:
        raise ValueError("contains a NUL character")
    if text.startswith("/"):
        raise ValueError("is an absolute path")
    if _DRIVE.match(text):
        raise ValueError("names a drive (absolute Windows path)")
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if any(part == ".." for part in parts):
        raise ValueError("climbs out of the folder with '..'")
    if not parts:
        raise ValueError("is empty")
    return "/".join(parts)


class _ArchiveSource:
    where = "the archive"

    def __init__(self, archive: zipfile.ZipFile) -> None:
        self.archive = archive
        self.members: dict[str, zipfile.ZipInfo] = {}
        for info in archive.infolist():
            if info.is_dir():
                continue
            try:
                self.members[_normalise_relative(info.filename)] = info
            except ValueError:
                # import_zip refuses such archives; a caller-supplied one just
                # never resolves these names.
                continue

    def read(self, path: str) -> bytes:
        info = self.members.get(path)
        if info is None:
            raise _MissingFile
        return _read_member(self.archive, info)


class _FolderSource:
    where = "the folder"

    def __init__(self, folder: str | os.PathLike) -> None:
        roots = [Path(root).resolve() for root in _limits().get("IMPORT_ROOTS") or []]
        try:
            resolved = Path(folder).resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            raise ImportRefused(f"the folder '{folder}' does not exist on the server") from exc
        if not resolved.is_dir():
            raise ImportRefused(f"'{folder}' is not a folder")
        if not any(resolved == root or root in resolved.parents for root in roots):
            raise ImportRefused(
                f"the folder '{folder}' is not inside an import folder the administrator "
                "allowed (setting FAIRTONE_IMPORT_ROOTS)"
            )
        self.root = resolved

    def read(self, path: str) -> bytes:
        try:
            resolved = (self.root / path).resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            raise _MissingFile from exc
        if not resolved.is_relative_to(self.root):
            raise ImageRejected("the path leads out of the folder (through a symbolic link)")
        if not resolved.is_file():
            raise _MissingFile
        limit = int(_limits()["MAX_IMAGE_BYTES"])
        with open(resolved, "rb") as handle:
            data = _read_capped(handle, limit)
        if len(data) > limit:
            raise ImageRejected(_too_big(limit))
        return data


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    limit = int(_limits()["MAX_IMAGE_BYTES"])
    if info.file_size > limit:
        raise ImageRejected(_too_big(limit))
    try:
        with archive.open(info) as handle:
            # The header's size may lie: never decompress more than the limit.
            data = _read_capped(handle, limit)
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        OSError,
        EOFError,
        RuntimeError,
    ) as exc:
        raise ImageRejected(f"the archive member is damaged ({exc})") from exc
    except NotImplementedError as exc:
        raise ImageRejected(f"the archive member uses an unsupported compression ({exc})") from exc
    if len(data) > limit:
        raise ImageRejected(_too_big(limit))
    return data


# --- zip archives -------------------------------------------------------------------


def _is_ignored(path: str) -> bool:
    parts = path.split("/")
    return any(part.startswith(".") or part == "__MACOSX" for part in parts) or parts[-1] in (
        "Thumbs.db",
        "desktop.ini",
    )


def _check_archive(archive: zipfile.ZipFile) -> None:
    """Refuse archives that are malicious or too large, before anything is extracted."""
    limits = _limits()
    infos = archive.infolist()
    if len(infos) > int(limits["MAX_ARCHIVE_MEMBERS"]):
        raise ImportRefused(
            f"the archive has {len(infos):,} entries; the limit is {int(limits['MAX_ARCHIVE_MEMBERS']):,}"
        )
    total = 0
    seen: set[str] = set()
    for info in infos:
        try:
            path = _normalise_relative(info.filename)
        except ValueError as exc:
            raise ImportRefused(f"unsafe path in the archive: '{info.filename}' {exc}; nothing was imported") from exc
        mode = info.external_attr >> 16
        if info.create_system == 3 and stat.S_ISLNK(mode):
            raise ImportRefused(f"the archive contains a symbolic link ('{info.filename}'); nothing was imported")
        if info.flag_bits & 0x1:
            raise ImportRefused(f"'{info.filename}' in the archive is encrypted; remove the password and retry")
        if info.is_dir():
            continue
        if path in seen:
            raise ImportRefused(f"the archive contains '{path}' twice")
        seen.add(path)
        total += info.file_size
        if info.file_size > RATIO_CHECK_MIN_BYTES:
            ratio = info.file_size / max(info.compress_size, 1)
            if ratio > MAX_COMPRESSION_RATIO:
                raise ImportRefused(
                    f"'{info.filename}' expands {ratio:,.0f} times ({info.compress_size:,} to "
                    f"{info.file_size:,} bytes): this looks like a zip bomb; nothing was imported"
                )
    max_bytes = int(limits["MAX_ARCHIVE_BYTES"])
    if total > max_bytes:
        raise ImportRefused(f"the archive unpacks to {total:,} bytes; the limit is {max_bytes:,} bytes")


def import_zip(*, project: Project, fileobj: IO[bytes], user, name: str = "archive.zip") -> ImportBatch:
    """Import the images in a zip archive (with its ``manifest.csv``/``.jsonl`` if any).

    Parameters
    ----------
    project : Project
        The project the images join.
    fileobj : file object
        The archive, opened in binary mode and seekable.
    user : User
        Who imports.
    name : str
        The archive's name, for the report.

    Returns
    -------
    ImportBatch
        Done with one item per image file (or manifest row), or failed with
        ``error`` and no image created when the archive is refused (not a zip,
        unsafe paths, symbolic links, encrypted members, too many members, too big,
        a zip bomb, an unreadable manifest).

    Examples
    --------
    >>> batch = import_zip(project=p, fileobj=open("photos.zip", "rb"), user=u)  # doctest: +SKIP
    >>> batch.status, batch.n_imported  # doctest: +SKIP
    ('done', 120)
    """
    report = _start(project, ImportBatch.Kind.ZIP, name, user)

    def work() -> None:
        try:
            archive = zipfile.ZipFile(fileobj)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
            raise ImportRefused(f"'{name}' is not a readable zip archive ({exc})") from exc
        with archive:
            _check_archive(archive)
            source = _ArchiveSource(archive)
            manifests = [path for path in source.members if path.lower() in MANIFEST_NAMES and "/" not in path]
            if len(manifests) > 1:
                raise ImportRefused("the archive has both manifest.csv and manifest.jsonl")
            if manifests:
                manifest_path = manifests[0]
                try:
                    manifest_bytes = source.read(manifest_path)
                except ImageRejected as exc:
                    raise ImportRefused(f"{manifest_path}: {exc.reason}") from exc
                rows = _parse_manifest(manifest_bytes, manifest_path)
                used = _import_rows(report, project=project, rows=rows, source=source)
                for path in source.members:
                    if path in used or path == manifest_path or _is_ignored(path):
                        continue
                    if PurePosixPath(path).suffix.lower() in IMAGE_EXTENSIONS:
                        report.add(
                            ImportItem.Outcome.REJECTED,
                            filename=path,
                            reason=f"not imported: the file is not listed in {manifest_path}",
                        )
                return
            for path, info in source.members.items():
                if _is_ignored(path):
                    continue
                reason = _extension_reason(path)
                if reason is not None:
                    report.add(ImportItem.Outcome.REJECTED, filename=path, reason=reason)
                    continue
                try:
                    data = _read_member(archive, info)
                except ImageRejected as exc:
                    report.add(ImportItem.Outcome.REJECTED, filename=path, reason=exc.reason)
                    continue
                _import_one(report, project=project, filename=path, data=data)

    return _run(report, work)


# --- manifests ------------------------------------------------------------------------


@dataclass
class _Row:
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


def _check_columns(columns: list[str], name: str) -> None:
    if not columns:
        raise ImportRefused(f"{name} is empty")
    missing_name = [i + 1 for i, column in enumerate(columns) if not column]
    if missing_name:
        raise ImportRefused(f"{name}: column {missing_name[0]} of the header has no name")
    duplicated = sorted({c for c in columns if [x.lower() for x in columns].count(c.lower()) > 1})
    if duplicated:
        raise ImportRefused(f"{name}: the header names column '{duplicated[0]}' twice")
    if not any(column.lower() in FILE_COLUMNS for column in columns):
        found = ", ".join(f"'{c}'" for c in columns)
        raise ImportRefused(f"the manifest has no 'file' column; columns found: {found}")
    if sum(column.lower() in FILE_COLUMNS for column in columns) > 1:
        raise ImportRefused(f"{name} has more than one of the columns {', '.join(FILE_COLUMNS)}; keep one")


def _check_row_count(count: int, name: str) -> None:
    max_rows = int(_limits()["MAX_MANIFEST_ROWS"])
    if count > max_rows:
        raise ImportRefused(f"{name} has more than {max_rows:,} rows (the limit); split it into several imports")


def _parse_csv(text: str, name: str) -> list[_Row]:
    first_line = text.split("\n", 1)[0]
    delimiter = ","
    if first_line.count(",") == 0:
        delimiter = max((";", "\t"), key=first_line.count) if first_line.strip() else ","
        if first_line.count(delimiter) == 0:
            delimiter = ","
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    rows: list[_Row] = []
    try:
        header = next(reader, None)
        if header is None:
            raise ImportRefused(f"{name} is empty")
        columns = [column.strip() for column in header]
        _check_columns(columns, name)
        for number, record in enumerate(reader, start=2):
            if not any(cell.strip() for cell in record):
                continue
            _check_row_count(len(rows) + 1, name)
            error = ""
            if len(record) > len(columns):
                error = f"the row has {len(record)} cells but the header has {len(columns)} columns"
            record = record + [""] * (len(columns) - len(record))
            cells = dict(zip(columns, record, strict=False))
            rows.append(_Row(number, cells, error))
    except csv.Error as exc:
        raise ImportRefused(f"{name} cannot be read near line {reader.line_num}: {exc}") from exc
    return rows


def _parse_jsonl(text: str, name: str) -> list[_Row]:
    rows: list[_Row] = []
    columns: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        _check_row_count(len(rows) + 1, name)
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            rows.append(_Row(number, {}, f"the line is not valid JSON ({exc.msg})"))
            continue
        if not isinstance(record, dict):
            rows.append(_Row(number, {}, "the line is not a JSON object"))
            continue
        cells: dict[str, Any] = {}
        error = ""
        for key, value in record.items():
            key = str(key).strip()
            if key not in columns:
                columns.append(key)
            if value is None:
                cells[key] = ""
            elif isinstance(value, bool) or not isinstance(value, (str, int, float)):
                error = f"'{key}' holds {type(value).__name__}; only text and numbers are allowed"
            elif isinstance(value, float) and not math.isfinite(value):
                error = f"'{key}' is not a finite number"
            else:
                cells[key] = value
        rows.append(_Row(number, cells, error))
    if not rows:
        raise ImportRefused(f"{name} has no rows")
    _check_columns(columns, name)
    return rows


def _parse_manifest(data: bytes, name: str) -> list[_Row]:
    if len(data) > MAX_MANIFEST_BYTES:
        raise ImportRefused(f"{name} is larger than {MAX_MANIFEST_BYTES:,} bytes")
    text = _decode_text(data, name)
    if "\x00" in text:
        raise ImportRefused(f"{name} contains NUL bytes; it is not a text manifest")
    rows = _parse_jsonl(text, name) if _is_jsonl(data, name) else _parse_csv(text, name)
    if not rows:
        raise ImportRefused(f"{name} has a header but no rows")
    return rows


def _text(value: Any) -> str:
    if value is None:
        return ""
    return str(value).strip()


def _import_rows(
    report: _Report,
    *,
    project: Project,
    rows: list[_Row],
    source: _ArchiveSource | _FolderSource | None,
) -> set[str]:
    """Import manifest rows one by one; returns the paths that rows used."""
    used: set[str] = set()
    seen_rows: dict[tuple, int] = {}
    seen_ids: dict[str, int] = {}
    # subject id -> attribute -> (value, row that set it)
    subject_values: dict[str, dict[str, tuple[Any, int]]] = {}
    for row in rows:
        prefix = f"row {row.number}: "
        lowered = {key.lower(): key for key in row.cells}
        file_key = next((lowered[c] for c in FILE_COLUMNS if c in lowered), None)
        file_cell = _text(row.cells.get(file_key)) if file_key else ""

        def reject(reason: str, *, row=row, prefix=prefix, file_cell=file_cell) -> None:
            report.add(
                ImportItem.Outcome.REJECTED,
                filename=file_cell,
                row=row.number,
                reason=prefix + reason,
            )

        if row.error:
            reject(row.error)
            continue
        signature = tuple(sorted((k, _text(v)) for k, v in row.cells.items() if _text(v)))
        if signature in seen_rows:
            reject(f"repeats row {seen_rows[signature]}")
            continue
        seen_rows[signature] = row.number
        if not file_cell:
            reject("the 'file' cell is empty")
            continue
        try:
            path = _normalise_relative(file_cell)
        except ValueError as exc:
            reject(f"file '{file_cell}' {exc}")
            continue

        image_id = _text(row.cells.get(lowered.get("image_id")))
        subject_id = _text(row.cells.get(lowered.get("subject_id")))
        mask_cell = _text(row.cells.get(lowered.get("mask")))
        mask_kind = _text(row.cells.get(lowered.get("mask_kind")))
        effective_id = image_id or PurePosixPath(path).stem
        if effective_id in seen_ids:
            reject(f"image id '{effective_id}' is already used by row {seen_ids[effective_id]}")
            continue
        seen_ids[effective_id] = row.number

        reserved = {file_key.lower(), *RESERVED_COLUMNS}
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

        known = subject_values.get(subject_id, {})
        conflict = next(
            (
                (name, value, known[name])
                for name, value in subject_attributes.items()
                if name in known and known[name][0] != value
            ),
            None,
        )
        if conflict is not None:
            name, value, (earlier, earlier_row) = conflict
            reject(f"subject '{subject_id}' has {name}={earlier!r} in row {earlier_row} but {name}={value!r} here")
            continue

        if source is None:
            reject("no archive or folder holds the files of this manifest")
            continue
        try:
            data = source.read(path)
        except _MissingFile:
            reject(f"file '{file_cell}' is not in {source.where}")
            continue
        except ImageRejected as exc:
            reject(f"file '{file_cell}': {exc.reason}")
            continue
        used.add(path)
        mask_data = None
        if mask_cell:
            try:
                mask_path = _normalise_relative(mask_cell)
                mask_data = source.read(mask_path)
            except ValueError as exc:
                reject(f"mask '{mask_cell}' {exc}")
                continue
            except _MissingFile:
                reject(f"mask '{mask_cell}' is not in {source.where}")
                continue
            except ImageRejected as exc:
                reject(f"mask '{mask_cell}': {exc.reason}")
                continue
            used.add(mask_path)

        image = _import_one(
            report,
            project=project,
            filename=path,
            data=data,
            row=row.number,
            prefix=prefix,
            warnings=warnings,
            subject_id=subject_id,
            subject_attributes=subject_attributes,
            external_id=image_id or None,
            attributes=image_attributes,
            mask_data=mask_data,
            mask_kind=mask_kind,
        )
        if image is not None and subject_id:
            values = subject_values.setdefault(subject_id, {})
            for name, value in subject_attributes.items():
                values.setdefault(name, (value, row.number))
    return used


def import_manifest(
    *,
    project: Project,
    manifest: IO[bytes],
    user,
    name: str = "manifest.csv",
    archive: zipfile.ZipFile | None = None,
    folder: str | os.PathLike | None = None,
) -> ImportBatch:
    """Import the images a manifest lists, with their subjects and attributes.

    Parameters
    ----------
    project : Project
        The project the images join.
    manifest : file object
        CSV (UTF-8, header row) or JSON Lines, in binary mode. Columns: ``file``
        (or ``filename``/``image``), optional ``image_id``, ``subject_id``,
        ``mask``, ``mask_kind``; any other column is an attribute of the subject
        (of the image when the row has no subject, or when the column is named
        ``image.<name>``).
    user : User
        Who imports.
    name : str
        The manifest's name (``.jsonl`` selects JSON Lines).
    archive : zipfile.ZipFile, optional
        Where the files are, paths relative to the archive root.
    folder : str or path, optional
        A server folder inside ``FAIRTONE["IMPORT_ROOTS"]`` holding the files.

    Returns
    -------
    ImportBatch
        Done with one item per manifest row, or failed with ``error`` (and no
        image created) when the manifest or folder is refused.

    Examples
    --------
    >>> batch = import_manifest(project=p, manifest=fh, user=u, folder="/data/shoot")  # doctest: +SKIP
    >>> [(i.row, i.outcome) for i in batch.items.all()]  # doctest: +SKIP
    [(2, 'imported'), (3, 'rejected')]
    """
    report = _start(project, ImportBatch.Kind.MANIFEST, name, user)

    def work() -> None:
        source: _ArchiveSource | _FolderSource | None = None
        if archive is not None and folder is not None:
            raise ImportRefused("give either an archive or a folder, not both")
        if archive is not None:
            _check_archive(archive)
            source = _ArchiveSource(archive)
        elif folder is not None:
            source = _FolderSource(folder)
        data = _read_capped(manifest, MAX_MANIFEST_BYTES)
        rows = _parse_manifest(data, name)
        if source is None:
            raise ImportRefused("the manifest needs an archive or a server folder holding its files")
        _import_rows(report, project=project, rows=rows, source=source)

    return _run(report, work)
