"""Where the files of an import come from: a zip archive (checked before anything is read) or a server folder."""

from __future__ import annotations

import os
import re
import stat
import zipfile
from pathlib import Path

from ..images import ImageRejected
from .report import ImportRefused, import_limits, read_capped, too_big

# A member over 1 MB that expands more than this many times is treated as a zip
# bomb: JPEG/PNG/WebP photos barely compress (ratios near 1:1), and even a flat
# BMP of one colour stays under about 100:1 with deflate's 1032:1 ceiling.
MAX_COMPRESSION_RATIO = 200
RATIO_CHECK_MIN_BYTES = 1024 * 1024
_DRIVE = re.compile(r"^[A-Za-z]:")


class MissingFile(Exception):
    """The file a manifest names is not in the archive or folder."""


def normalise_relative(path: str) -> str:
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


class ArchiveSource:
    where = "the archive"

    def __init__(self, archive: zipfile.ZipFile) -> None:
        self.archive = archive
        self.members: dict[str, zipfile.ZipInfo] = {}
        for info in archive.infolist():
            if info.is_dir():
                continue
            try:
                self.members[normalise_relative(info.filename)] = info
            except ValueError:
                # import_zip refuses such archives; a caller-supplied one just
                # never resolves these names.
                continue

    def read(self, path: str) -> bytes:
        info = self.members.get(path)
        if info is None:
            raise MissingFile
        return read_member(self.archive, info)


class FolderSource:
    where = "the folder"

    def __init__(self, folder: str | os.PathLike) -> None:
        roots = [Path(root).resolve() for root in import_limits().get("IMPORT_ROOTS") or []]
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
            raise MissingFile from exc
        if not resolved.is_relative_to(self.root):
            raise ImageRejected("the path leads out of the folder (through a symbolic link)")
        if not resolved.is_file():
            raise MissingFile
        limit = int(import_limits()["MAX_IMAGE_BYTES"])
        with open(resolved, "rb") as handle:
            data = read_capped(handle, limit)
        if len(data) > limit:
            raise ImageRejected(too_big(limit))
        return data


def read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    limit = int(import_limits()["MAX_IMAGE_BYTES"])
    if info.file_size > limit:
        raise ImageRejected(too_big(limit))
    try:
        with archive.open(info) as handle:
            # The header's size may lie: never decompress more than the limit.
            data = read_capped(handle, limit)
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
        raise ImageRejected(too_big(limit))
    return data


def is_ignored(path: str) -> bool:
    parts = path.split("/")
    return any(part.startswith(".") or part == "__MACOSX" for part in parts) or parts[-1] in (
        "Thumbs.db",
        "desktop.ini",
    )


def check_archive(archive: zipfile.ZipFile) -> None:
    """Refuse archives that are malicious or too large, before anything is extracted."""
    limits = import_limits()
    infos = archive.infolist()
    if len(infos) > int(limits["MAX_ARCHIVE_MEMBERS"]):
        raise ImportRefused(
            f"the archive has {len(infos):,} entries; the limit is {int(limits['MAX_ARCHIVE_MEMBERS']):,}"
        )
    total = 0
    seen: set[str] = set()
    for info in infos:
        try:
            path = normalise_relative(info.filename)
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
