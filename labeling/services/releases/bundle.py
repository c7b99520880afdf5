"""The files of a dataset release: tables, images, manifest and zip, byte-identical for identical inputs.

Plain Python, pyarrow and Pillow (no Django), so that it can be tested and reused without a project.

- ``TableWriter`` streams one table into CSV, JSON Lines and Parquet at once, batch by batch.
- ``image_strip_metadata`` removes EXIF (location included), XMP, IPTC, comments and text chunks from an
  image, after applying its EXIF orientation; ``ImagefolderWriter`` writes the Hugging Face ``imagefolder``
  layout (the images and a ``metadata.jsonl``).
- ``manifest_write`` writes the canonical ``manifest.json`` (every file with its SHA-256, size and rows),
  ``zip_write`` the deterministic zip archive of a release.

Determinism: the same inputs, written in the same batches with the same library versions, give the same
bytes. Parquet records ``created_by = parquet-cpp-arrow version <pyarrow version>`` and the Arrow schema
(no timestamp); zlib, zstd, libjpeg and pyarrow versions can change the compressed bytes, not the content.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import numbers
import os
import re
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image as PILImage
from PIL import ImageOps

FORMATS = ("csv", "jsonl", "parquet")
# Rows formatted to CSV / JSON Lines text at a time (the text of a batch is held until written: smaller
# batches, the same bytes), and the largest Parquet row group.
CHUNK_ROWS = 2048
ROW_GROUP_ROWS = 65536
PARQUET_OPTIONS: dict[str, Any] = {
    # Every option that changes the bytes is pinned, so that a new pyarrow default does not change them.
    "version": "2.6",
    "data_page_version": "1.0",
    "compression": "zstd",
    "compression_level": 3,
    "use_dictionary": True,
    "write_statistics": True,
    "store_schema": True,
    "write_page_index": False,
    "write_page_checksum": False,
}
READ_CHUNK = 1 << 20
# 1980-01-01 00:00:00, the earliest date a zip entry can hold; regular file, rw-r--r--, made on Unix.
ZIP_DATE_TIME = (1980, 1, 1, 0, 0, 0)
ZIP_FILE_MODE = 0o100644
ZIP_UNIX = 3
JPEG_REENCODE_QUALITY = 95
PNG_COMPRESS_LEVEL = 6
# Characters that make a spreadsheet read a cell as a formula (OWASP CSV injection).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
MANIFEST_NAME = "manifest.json"
METADATA_NAME = "metadata.jsonl"


# --------------------------------------------------------------------------- files


def file_info(path: str | os.PathLike[str]) -> dict:
    """SHA-256 (read in chunks) and size of a file."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(READ_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return {"sha256": digest.hexdigest(), "bytes": size}


def _check_safe_name(name: str, what: str) -> None:
    if not isinstance(name, str) or not SAFE_NAME.fullmatch(name) or ".." in name:
        raise ValueError(
            f"{what} {name!r} is not a safe file name (letters, digits, '.', '_', '-'; no path separators or '..')"
        )


def _check_relative_path(path: str) -> None:
    parts = path.split("/")
    if not path or path.startswith("/") or "\\" in path or any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"{path!r} is not a relative POSIX path inside the release")


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


# --------------------------------------------------------------------------- text cells


def neutralise_cell(text: str) -> str:
    """A CSV cell that a spreadsheet would run as a formula gets a leading apostrophe (only for text columns)."""
    if text.startswith(FORMULA_PREFIXES):
        return "'" + text
    return text


def _float_text(value: float, np_type: type | None = None) -> str | None:
    """Shortest text that reads back as the same value (for its own precision); None for NaN and infinities."""
    if not math.isfinite(value):
        return None
    if np_type is not None:
        return str(np_type(value))
    return repr(float(value))


def _json_token(value: Any, np_float: type | None = None) -> str:
    """One JSON value, compact; floats as shortest round-trip text, NaN and infinities as null."""
    if value is None:
        return "null"
    if isinstance(value, bool | np.bool_):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        text = _float_text(float(value), np_float)
        return "null" if text is None else text
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ",".join(_json_token(item, np_float) for item in value) + "]"
    if isinstance(value, dict):
        items = (
            f"{json.dumps(str(key), ensure_ascii=False)}:{_json_token(item, np_float)}" for key, item in value.items()
        )
        return "{" + ",".join(items) + "}"
    raise TypeError(f"cannot write a {type(value).__name__} as JSON: {value!r}")


def _csv_quote(text: str) -> str:
    """RFC 4180: a field holding a comma, a quote or a line break is quoted, quotes doubled.

    An empty string is quoted too, so that it differs from a null (an empty cell)."""
    if text == "" or any(char in text for char in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


# --------------------------------------------------------------------------- tables


def _list_value_type(data_type: pa.DataType) -> pa.DataType | None:
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        return data_type.value_type
    return None


def _is_scalar_type(data_type: pa.DataType) -> bool:
    return (
        pa.types.is_integer(data_type)
        or pa.types.is_floating(data_type)
        or pa.types.is_boolean(data_type)
        or pa.types.is_string(data_type)
        or pa.types.is_large_string(data_type)
    )


def _np_float(data_type: pa.DataType) -> type | None:
    """The numpy type whose shortest text is used for a float column narrower than 64 bits."""
    if pa.types.is_float32(data_type):
        return np.float32
    if pa.types.is_float16(data_type):
        return np.float16
    return None


def _formatters(field: pa.Field) -> tuple[Callable[[Any], str], Callable[[Any], str]]:
    """(CSV cell, JSON value) text of one non-null value of the field's type."""
    data_type = field.type
    value_type = _list_value_type(data_type)
    if value_type is not None:
        np_float = _np_float(value_type)

        def list_json(value: Any) -> str:
            return _json_token(value, np_float)

        return (lambda value: _csv_quote(list_json(value))), list_json
    if pa.types.is_boolean(data_type):
        return (lambda value: "true" if value else "false"), (lambda value: "true" if value else "false")
    if pa.types.is_integer(data_type):
        return str, str
    if pa.types.is_floating(data_type):
        np_float = _np_float(data_type)

        def float_csv(value: float) -> str:
            return _float_text(value, np_float) or ""

        def float_json(value: float) -> str:
            return _float_text(value, np_float) or "null"

        return float_csv, float_json
    return (lambda value: _csv_quote(neutralise_cell(value))), (lambda value: json.dumps(value, ensure_ascii=False))


class TableWriter:
    """Streams one table into <out_dir>/<name>.csv, .jsonl, .parquet at once, chunk by chunk (never the whole table in memory).

    Column types: integers, floats, booleans, strings and lists of those. CSV: UTF-8, header, RFC 4180
    quoting, ``\\n`` line ends, nulls as empty cells (NaN and infinities too), booleans ``true``/``false``,
    lists as JSON text, text cells guarded against formulas. JSON Lines: one object per line, keys in
    schema order, NaN and infinities as null. Parquet: the schema exactly, one row group per written
    batch (at most ``ROW_GROUP_ROWS`` rows each).

    A failing write (an ``OSError`` from the disk) removes the files and is raised; as a context manager
    the files are closed on exit, or removed if the block raised.
    """

    def __init__(self, out_dir: Path, name: str, schema: pa.Schema, formats: tuple[str, ...] = FORMATS):
        _check_safe_name(name, "table name")
        unknown = [fmt for fmt in formats if fmt not in FORMATS]
        if unknown or not formats or len(set(formats)) != len(formats):
            raise ValueError(f"formats must be distinct values of {FORMATS}, got {formats!r}")
        if len(set(schema.names)) != len(schema.names):
            raise ValueError(f"duplicate column names in {schema.names}")
        for field in schema:
            value_type = _list_value_type(field.type)
            if not _is_scalar_type(value_type if value_type is not None else field.type):
                raise TypeError(f"column {field.name!r}: type {field.type} is not supported in a release table")
        self.out_dir = Path(out_dir)
        self.name = name
        self.schema = schema
        self.formats = tuple(fmt for fmt in FORMATS if fmt in formats)
        self.paths = {fmt: self.out_dir / f"{name}.{fmt}" for fmt in self.formats}
        self.rows = 0
        self._formatters = [_formatters(field) for field in schema]
        self._json_keys = [json.dumps(field_name, ensure_ascii=False) for field_name in schema.names]
        self._result: dict[str, dict] | None = None
        self._aborted = False
        self._text: dict[str, io.BufferedWriter] = {}
        self._parquet: pq.ParquetWriter | None = None
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            if "csv" in self.formats:
                self._text["csv"] = open(self.paths["csv"], "wb")  # closed in close / abort
                header = ",".join(_csv_quote(neutralise_cell(field_name)) for field_name in schema.names) + "\n"
                self._write_text("csv", header.encode("utf-8"))
            if "jsonl" in self.formats:
                self._text["jsonl"] = open(self.paths["jsonl"], "wb")
            if "parquet" in self.formats:
                self._parquet = pq.ParquetWriter(str(self.paths["parquet"]), schema, **PARQUET_OPTIONS)
        except BaseException:
            self.abort()
            raise

    # -- context manager

    def __enter__(self) -> TableWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()
        elif not self._aborted:
            self.close()

    # -- writing

    def _write_text(self, fmt: str, data: bytes) -> None:
        self._text[fmt].write(data)

    def _check_open(self) -> None:
        if self._aborted:
            raise RuntimeError(f"the writer of {self.name!r} was aborted")
        if self._result is not None:
            raise RuntimeError(f"the writer of {self.name!r} is closed")

    def _conform(self, batch: pa.RecordBatch | pa.Table) -> pa.Table:
        """The batch as a table of exactly the schema: columns selected in schema order, then cast (safely)."""
        if isinstance(batch, pa.RecordBatch):
            table = pa.Table.from_batches([batch])
        elif isinstance(batch, pa.Table):
            table = batch
        else:
            raise TypeError(f"expected a pyarrow RecordBatch or Table, got {type(batch).__name__}")
        names = table.schema.names
        missing = [name for name in self.schema.names if name not in names]
        extra = [name for name in names if name not in self.schema.names]
        if missing or extra or len(set(names)) != len(names):
            raise ValueError(
                f"table {self.name!r}: columns do not match the schema (missing {missing}, unexpected {extra})"
            )
        table = table.select(self.schema.names).cast(self.schema)
        for field, column in zip(self.schema, table.columns):
            if not field.nullable and column.null_count:
                raise ValueError(f"table {self.name!r}: column {field.name!r} is not nullable but has nulls")
        return table

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Append rows (cast to the schema; missing or unexpected columns are an error)."""
        self._check_open()
        table = self._conform(batch)
        try:
            for chunk in table.to_batches(max_chunksize=CHUNK_ROWS):
                self._write_chunk(chunk)
            if self._parquet is not None and table.num_rows:
                self._parquet.write_table(table, row_group_size=ROW_GROUP_ROWS)
        except BaseException:
            self.abort()
            raise
        self.rows += table.num_rows

    def _write_chunk(self, chunk: pa.RecordBatch) -> None:
        if not chunk.num_rows or not self._text:
            return
        columns = [column.to_pylist() for column in chunk.columns]
        rows = list(zip(*columns))
        if "csv" in self._text:
            csv_cells = [formatter[0] for formatter in self._formatters]
            lines = (
                ",".join("" if value is None else fmt(value) for fmt, value in zip(csv_cells, row)) + "\n"
                for row in rows
            )
            self._write_text("csv", "".join(lines).encode("utf-8"))
        if "jsonl" in self._text:
            json_values = [formatter[1] for formatter in self._formatters]
            keys = self._json_keys
            lines = (
                "{"
                + ",".join(
                    f"{key}:{'null' if value is None else fmt(value)}"
                    for key, fmt, value in zip(keys, json_values, row)
                )
                + "}\n"
                for row in rows
            )
            self._write_text("jsonl", "".join(lines).encode("utf-8"))

    def close(self) -> dict[str, dict]:
        """Finish the files; ``{"<name>.<fmt>": {"sha256", "bytes", "rows"}}``. Closing twice returns the same."""
        if self._result is not None:
            return self._result
        self._check_open()
        try:
            for handle in self._text.values():
                handle.close()
            if self._parquet is not None:
                self._parquet.close()
            result = {}
            for fmt in self.formats:
                path = self.paths[fmt]
                result[path.name] = {**file_info(path), "rows": self.rows}
        except BaseException:
            self.abort()
            raise
        self._result = result
        return result

    def abort(self) -> None:
        """Close and remove the files (idempotent; errors while closing are ignored)."""
        if self._result is not None or self._aborted:
            return
        self._aborted = True
        for handle in self._text.values():
            try:
                handle.close()
            except OSError:
                pass
        if self._parquet is not None:
            try:
                self._parquet.close()
            except (OSError, pa.ArrowException):
                pass
        for path in self.paths.values():
            _unlink_quietly(path)


# --------------------------------------------------------------------------- images

JPEG_SOI = b"\xff\xd8"
JPEG_EOI = 0xD9
JPEG_SOS = 0xDA
JPEG_COM = 0xFE
JPEG_APP0, JPEG_APP2, JPEG_APP14, JPEG_APP15 = 0xE0, 0xE2, 0xEE, 0xEF
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Chunks that say how to draw the pixels; everything else (tEXt, zTXt, iTXt, eXIf, tIME, pHYs, private and
# animation chunks, ...) is dropped.
PNG_KEEP_CHUNKS = frozenset(
    {b"IHDR", b"PLTE", b"tRNS", b"gAMA", b"cHRM", b"sRGB", b"iCCP", b"sBIT", b"cICP", b"IDAT", b"IEND"}
)
EXIF_ORIENTATION = 0x0112


def _jpeg_keep_segment(marker: int, payload: bytes) -> bytes | None:
    """The payload to keep for a marker segment before or between scans, or None to drop it."""
    if marker == JPEG_COM:
        return None
    if JPEG_APP0 <= marker <= JPEG_APP15:
        if marker == JPEG_APP0 and payload.startswith(b"JFIF\x00") and len(payload) >= 14:
            # Version, units and density; the thumbnail (if any) is dropped.
            return payload[:12] + b"\x00\x00"
        if marker == JPEG_APP2 and payload.startswith(b"ICC_PROFILE\x00"):
            return payload
        if marker == JPEG_APP14 and payload.startswith(b"Adobe"):
            # Only the colour transform flags, needed to decode CMYK / YCCK pictures right.
            return payload
        return None
    return payload


def _jpeg_strip(data: bytes) -> bytes:
    """The JPEG without APPn (but JFIF, ICC profile and Adobe) and COM segments, nor anything after EOI; lossless."""
    if not data.startswith(JPEG_SOI):
        raise ValueError("not a JPEG: no SOI marker")
    size = len(data)
    out = [JPEG_SOI]
    pos = 2
    while True:
        if pos >= size or data[pos] != 0xFF:
            raise ValueError("malformed JPEG: a marker was expected")
        while pos < size and data[pos] == 0xFF:
            pos += 1
        if pos >= size:
            raise ValueError("malformed JPEG: truncated")
        marker = data[pos]
        pos += 1
        if marker == JPEG_EOI:
            out.append(b"\xff\xd9")
            return b"".join(out)
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:
            out.append(bytes((0xFF, marker)))
            continue
        if pos + 2 > size:
            raise ValueError("malformed JPEG: truncated segment")
        length = int.from_bytes(data[pos : pos + 2], "big")
        if length < 2 or pos + length > size:
            raise ValueError("malformed JPEG: bad segment length")
        payload = data[pos + 2 : pos + length]
        pos += length
        kept = _jpeg_keep_segment(marker, payload)
        if kept is not None:
            out.append(bytes((0xFF, marker)) + (len(kept) + 2).to_bytes(2, "big") + kept)
        if marker == JPEG_SOS:
            start = pos
            while True:  # entropy-coded data runs to the next marker that is not a stuffed 0xFF00 or RSTn
                index = data.find(b"\xff", pos)
                if index < 0 or index + 1 >= size:
                    raise ValueError("malformed JPEG: no EOI marker")
                following = data[index + 1]
                if following == 0x00 or 0xD0 <= following <= 0xD7:
                    pos = index + 2
                elif following == 0xFF:
                    pos = index + 1
                else:
                    break
            out.append(data[start:index])
            pos = index


def _png_strip(data: bytes) -> bytes:
    """The PNG with only the chunks that draw the pixels (``PNG_KEEP_CHUNKS``), nothing after IEND; lossless."""
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError("not a PNG: no signature")
    size = len(data)
    out = [PNG_SIGNATURE]
    pos = len(PNG_SIGNATURE)
    first = True
    while pos + 12 <= size:
        length = int.from_bytes(data[pos : pos + 4], "big")
        chunk_type = data[pos + 4 : pos + 8]
        end = pos + 12 + length
        if end > size:
            raise ValueError("malformed PNG: truncated chunk")
        if first and chunk_type != b"IHDR":
            raise ValueError("malformed PNG: IHDR is not the first chunk")
        first = False
        if chunk_type in PNG_KEEP_CHUNKS:
            out.append(data[pos:end])
        pos = end
        if chunk_type == b"IEND":
            return b"".join(out)
    raise ValueError("malformed PNG: no IEND chunk")


def _orientation(image: PILImage.Image) -> int:
    try:
        value = image.getexif().get(EXIF_ORIENTATION, 1)
    except Exception:  # an unreadable EXIF block is dropped anyway; draw the picture as stored
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def _reencode(image: PILImage.Image, fmt: str) -> bytes:
    """The first frame, oriented, without any metadata but its ICC profile, as JPEG or PNG."""
    icc_profile = image.info.get("icc_profile")
    has_transparency = "transparency" in image.info
    oriented = ImageOps.exif_transpose(image)
    mode = oriented.mode
    if fmt == "JPEG":
        if mode not in ("L", "RGB", "CMYK"):
            oriented = oriented.convert("RGB")
    elif has_transparency or mode not in ("1", "L", "LA", "I", "I;16", "RGB", "RGBA"):
        # Palettes and colour-keyed transparency become an alpha channel (``info`` is dropped below).
        with_alpha = has_transparency or mode in ("LA", "La", "PA", "RGBA", "RGBa")
        grey = mode in ("1", "L", "LA", "La")
        oriented = oriented.convert(("LA" if with_alpha else "L") if grey else ("RGBA" if with_alpha else "RGB"))
    # Nothing from the source may travel through ``info`` (Pillow reuses e.g. a JPEG comment).
    oriented.info = {}
    options: dict[str, Any] = {}
    if icc_profile:
        options["icc_profile"] = icc_profile
    buffer = io.BytesIO()
    if fmt == "JPEG":
        oriented.save(buffer, format="JPEG", quality=JPEG_REENCODE_QUALITY, subsampling=0, optimize=False, **options)
    else:
        oriented.save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL, optimize=False, **options)
    return buffer.getvalue()


def image_strip_metadata(data: bytes) -> tuple[bytes, str]:
    """(Clean bytes, extension ``"jpg"`` or ``"png"``), without EXIF, XMP, IPTC, comments or text chunks.

    The EXIF orientation is applied first, so the picture looks as before. A JPEG or PNG that needs no
    turning loses its metadata segments / chunks losslessly; a turned one is re-encoded (JPEG quality
    ``JPEG_REENCODE_QUALITY``, PNG); any other format becomes a PNG. Deterministic.
    """
    with PILImage.open(io.BytesIO(data)) as image:
        fmt = image.format
        orientation = _orientation(image)
        if fmt in ("JPEG", "MPO"):
            if orientation == 1:
                return _jpeg_strip(data), "jpg"
            return _reencode(image, "JPEG"), "jpg"
        if fmt == "PNG" and orientation == 1:
            return _png_strip(data), "png"
        return _reencode(image, "PNG"), "png"


class ImagefolderWriter:
    """Hugging Face `imagefolder` layout: <out_dir>/<file_name> images + metadata.jsonl with a `file_name` column and the image table's columns.

    Every image goes through ``image_strip_metadata``; every metadata row must have the keys of the first
    one, in the same order. File infos are keyed by path relative to the release root, i.e. prefixed by
    the name of ``out_dir`` (``"imagefolder/metadata.jsonl"``). As a context manager, closed on exit or
    everything written removed if the block raised.
    """

    def __init__(self, out_dir: Path, prefix: str | None = None):
        self.out_dir = Path(out_dir)
        #: Paths of the file infos start with this (the folder's path relative to the release root).
        self.prefix = prefix or self.out_dir.name
        self.rows = 0
        self._keys: tuple[str, ...] | None = None
        self._images: dict[str, dict] = {}
        self._result: dict[str, dict] | None = None
        self._aborted = False
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.metadata_path = self.out_dir / METADATA_NAME
        self._metadata = open(self.metadata_path, "wb")  # closed in close / abort

    def __enter__(self) -> ImagefolderWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()
        elif not self._aborted:
            self.close()

    def _metadata_line(self, file_name: str, metadata: dict) -> bytes:
        keys = tuple(metadata)
        if "file_name" in keys:
            raise ValueError("metadata must not have a 'file_name' key: the writer sets it")
        if not all(isinstance(key, str) for key in keys):
            raise TypeError("metadata keys must be strings")
        if self._keys is None:
            self._keys = keys
        elif keys != self._keys:
            raise ValueError(f"metadata keys {list(keys)} differ from the first row's {list(self._keys)}")
        items = {"file_name": file_name, **metadata}
        return (_json_token(items) + "\n").encode("utf-8")

    def add(self, file_stem: str, data: bytes, metadata: dict) -> None:
        """Write one image as ``<file_stem>.<jpg|png>``, without its metadata, and its metadata row."""
        if self._aborted or self._result is not None:
            raise RuntimeError("the imagefolder writer is closed")
        _check_safe_name(file_stem, "file stem")
        clean, extension = image_strip_metadata(data)
        file_name = f"{file_stem}.{extension}"
        relative = f"{self.prefix}/{file_name}"
        if relative in self._images or file_name == METADATA_NAME:
            raise ValueError(f"duplicate image file name {file_name!r}")
        line = self._metadata_line(file_name, metadata)
        try:
            # Never over an existing file (which a failure would then remove).
            handle = open(self.out_dir / file_name, "xb")  # closed below
        except BaseException:
            self.abort()
            raise
        self._images[relative] = {"sha256": hashlib.sha256(clean).hexdigest(), "bytes": len(clean)}
        try:
            with handle:
                handle.write(clean)
            self._metadata.write(line)
        except BaseException:
            self.abort()
            raise
        self.rows += 1

    def close(self) -> dict[str, dict]:
        """Finish ``metadata.jsonl``; the infos of it (with ``rows``) and of every image, sorted by path."""
        if self._result is not None:
            return self._result
        if self._aborted:
            raise RuntimeError("the imagefolder writer was aborted")
        try:
            self._metadata.close()
            files = {f"{self.prefix}/{METADATA_NAME}": {**file_info(self.metadata_path), "rows": self.rows}}
        except BaseException:
            self.abort()
            raise
        files.update(self._images)
        self._result = dict(sorted(files.items()))
        return self._result

    def abort(self) -> None:
        """Remove everything written (idempotent)."""
        if self._result is not None or self._aborted:
            return
        self._aborted = True
        try:
            self._metadata.close()
        except OSError:
            pass
        _unlink_quietly(self.metadata_path)
        for relative in self._images:
            _unlink_quietly(self.out_dir / relative[len(self.prefix) + 1 :])


# --------------------------------------------------------------------------- manifest and zip


def manifest_write(root: Path, release: dict, files: dict[str, dict]) -> dict:
    """Write ``root/manifest.json`` (canonical JSON: sorted keys, indent 2, trailing newline); its file info."""
    entries = {}
    for path, info in sorted(files.items()):
        _check_relative_path(path)
        if "sha256" not in info or "bytes" not in info:
            raise ValueError(f"file info of {path!r} needs 'sha256' and 'bytes'")
        entries[path] = {key: info[key] for key in ("sha256", "bytes", "rows") if key in info}
    text = json.dumps(
        {"release": release, "files": entries}, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False
    )
    target = Path(root) / MANIFEST_NAME
    try:
        target.write_bytes((text + "\n").encode("utf-8"))
    except BaseException:
        _unlink_quietly(target)
        raise
    return file_info(target)


def _release_files(root: Path, exclude: Path) -> Iterator[tuple[str, Path]]:
    """(relative POSIX path, path) of every file under root, sorted by the relative path."""
    found = []
    for directory, dir_names, file_names in os.walk(root):
        here = Path(directory)
        for name in dir_names + file_names:
            if (here / name).is_symlink():
                raise ValueError(f"refusing to put the symbolic link {here / name} in a release")
        for name in file_names:
            path = here / name
            if path.resolve() == exclude:
                continue
            found.append((path.relative_to(root).as_posix(), path))
    return iter(sorted(found))


def zip_write(root: Path, zip_path: Path, *, top: str, beat: Callable[[], None] | None = None) -> dict:
    """Zip every file under root (sorted, under ``top/``, fixed dates and modes, deflate); its file info.

    ``beat()``, if given, is called after each piece of a file is written (a sign of life).
    """
    _check_safe_name(top, "zip top folder")
    root = Path(root)
    zip_path = Path(zip_path)
    try:
        with zipfile.ZipFile(zip_path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for relative, path in _release_files(root, zip_path.resolve()):
                entry = zipfile.ZipInfo(f"{top}/{relative}", date_time=ZIP_DATE_TIME)
                entry.compress_type = zipfile.ZIP_DEFLATED
                entry.create_system = ZIP_UNIX
                entry.external_attr = ZIP_FILE_MODE << 16
                entry.file_size = path.stat().st_size
                with open(path, "rb") as source, archive.open(entry, "w") as target:
                    while chunk := source.read(READ_CHUNK):
                        target.write(chunk)
                        if beat is not None:
                            beat()
    except BaseException:
        _unlink_quietly(zip_path)
        raise
    return file_info(zip_path)
