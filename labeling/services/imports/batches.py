"""The three ways to import images: browser uploads, a zip archive, a manifest (with an archive or a folder)."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import IO

from ...models import ImportBatch, ImportItem, Project
from ..images import IMAGE_EXTENSIONS, ImageRejected
from ..project_lifecycle import project_refuse_if_archived
from .bulk import ChunkedImport
from .manifest import MANIFEST_NAMES, MAX_MANIFEST_BYTES, parse_manifest
from .report import (
    ImportRefused,
    extension_reason,
    import_limits,
    read_capped,
    report_start,
    run_import,
    too_big,
)
from .rows import import_rows
from .sources import ArchiveSource, FolderSource, check_archive, is_ignored, read_member
from .stale import upload_temp_sweep


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
    >>> batch = import_files(project=p, files=[("a.jpg", io.BytesIO(jpeg))], user=u)
    >>> batch.n_imported
    1
    """
    upload_temp_sweep()  # what killed requests left on this machine
    project_refuse_if_archived(project.pk)
    report = report_start(project, ImportBatch.Kind.UPLOAD, "browser upload", user)

    def work() -> None:
        limit = int(import_limits()["MAX_IMAGE_BYTES"])
        with ChunkedImport(report, project) as chunks:
            for name, handle in files:
                filename = str(name or getattr(handle, "name", "") or "upload")
                reason = extension_reason(filename)
                if reason is not None:
                    chunks.reject(filename, reason)
                    continue
                size = getattr(handle, "size", None)
                data = b"" if isinstance(size, int) and size > limit else read_capped(handle, limit)
                if (isinstance(size, int) and size > limit) or len(data) > limit:
                    chunks.reject(filename, too_big(limit))
                    continue
                chunks.add(filename, data)
        report.batch.source_name = f"{len(report.items)} uploaded files"

    return run_import(report, work)


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
    >>> import zipfile
    >>> archive = io.BytesIO()
    >>> with zipfile.ZipFile(archive, "w") as zf:
    ...     zf.writestr("shoot/a.jpg", jpeg)
    ...     zf.writestr("shoot/notes.txt", "not a photo")
    >>> batch = import_zip(project=p, fileobj=archive, user=u)
    >>> str(batch.status), batch.n_imported, batch.n_rejected
    ('done', 1, 1)
    """
    upload_temp_sweep()  # what killed requests left on this machine
    project_refuse_if_archived(project.pk)
    report = report_start(project, ImportBatch.Kind.ZIP, name, user)

    def work() -> None:
        try:
            archive = zipfile.ZipFile(fileobj)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
            raise ImportRefused(f"'{name}' is not a readable zip archive ({exc})") from exc
        with archive:
            check_archive(archive)
            source = ArchiveSource(archive)
            manifests = [path for path in source.members if path.lower() in MANIFEST_NAMES and "/" not in path]
            if len(manifests) > 1:
                raise ImportRefused("the archive has both manifest.csv and manifest.jsonl")
            if manifests:
                manifest_path = manifests[0]
                try:
                    manifest_bytes = source.read(manifest_path)
                except ImageRejected as exc:
                    raise ImportRefused(f"{manifest_path}: {exc.reason}") from exc
                rows = parse_manifest(manifest_bytes, manifest_path)
                used = import_rows(report, project=project, rows=rows, source=source)
                for path in source.members:
                    if path in used or path == manifest_path or is_ignored(path):
                        continue
                    if PurePosixPath(path).suffix.lower() in IMAGE_EXTENSIONS:
                        report.add(
                            ImportItem.Outcome.REJECTED,
                            filename=path,
                            reason=f"not imported: the file is not listed in {manifest_path}",
                        )
                return
            with ChunkedImport(report, project) as chunks:
                for path, info in source.members.items():
                    if is_ignored(path):
                        continue
                    reason = extension_reason(path)
                    if reason is not None:
                        chunks.reject(path, reason)
                        continue
                    try:
                        data = read_member(archive, info)
                    except ImageRejected as exc:
                        chunks.reject(path, exc.reason)
                        continue
                    chunks.add(path, data)

    return run_import(report, work)


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

    Each row of the manifest becomes one item of the batch, ``imported``, ``duplicate`` or ``rejected``
    with its reason (``tests/labeling/test_imports.py`` has worked examples).
    """
    project_refuse_if_archived(project.pk)
    report = report_start(project, ImportBatch.Kind.MANIFEST, name, user)

    def work() -> None:
        source: ArchiveSource | FolderSource | None = None
        if archive is not None and folder is not None:
            raise ImportRefused("give either an archive or a folder, not both")
        if archive is not None:
            check_archive(archive)
            source = ArchiveSource(archive)
        elif folder is not None:
            source = FolderSource(folder)
        data = read_capped(manifest, MAX_MANIFEST_BYTES)
        rows = parse_manifest(data, name)
        if source is None:
            raise ImportRefused("the manifest needs an archive or a server folder holding its files")
        import_rows(report, project=project, rows=rows, source=source)

    return run_import(report, work)
