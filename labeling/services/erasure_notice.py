"""The erasure notice a release made before an erasure carries when it is downloaded (``services.erasure``).

A published release's files are immutable (the manifest records each file's SHA-256) and stay byte-identical on
disk. When a subject it contains was erased after it was published, its downloads say so:

- ``data_card.md`` and ``data_card.html`` are served with a notice block added at the top (after ``<body>`` in
  the HTML), between two marker lines, ``<!-- BEGIN FAIRTONE ERASURE NOTICE ... -->`` and
  ``<!-- END FAIRTONE ERASURE NOTICE -->``. Deleting those lines and every line between them gives back the
  published bytes exactly (:func:`card_strip`), whose SHA-256 is the manifest's;
- the release's zip is served with one more file, ``<top>/ERASURE_NOTICE.md``, which the manifest does not
  list; every other entry is the published one, byte for byte (the cards inside carry no block: this file is
  the notice). The archive is the published one up to its central directory, then the new entry and a new
  central directory (:func:`zip_with_notice`): no entry is read or compressed again;
- ``?original=1`` serves the published bytes (to check them against the manifest).

What the notice says is what the release's page says (:func:`erasure.erasure_notice`): the subject's external id
(the project's pseudonymous key, already in the release's ``subject_id`` column: whoever holds the release needs
it to delete that person's rows), the date, how many rows; never the reason given for the erasure nor who did it.
"""

from __future__ import annotations

import html
import io
import zipfile
from collections.abc import Iterator

from ..models import Release
from .erasure import erasure_notice, release_erasures
from .markdown_text import escape_markdown_text
from .media_files import storage_reader

#: The release files served with the notice block.
CARD_FILES = ("data_card.md", "data_card.html")
NOTICE_NAME = "ERASURE_NOTICE.md"
BEGIN = "<!-- BEGIN FAIRTONE ERASURE NOTICE: added when downloaded, not part of the published file -->"
END = "<!-- END FAIRTONE ERASURE NOTICE -->"
CHUNK = 1 << 20

_VERIFY = (
    "The release's files were not changed. This notice is not part of the published card: the SHA-256 that the "
    "release's manifest records is that of the card without it. To check it, delete the lines from BEGIN "
    "FAIRTONE ERASURE NOTICE to END FAIRTONE ERASURE NOTICE{comments}, both included, or download the card as "
    "published: {url}"
)
_VERIFY_ZIP = (
    "This file is not part of the published release: the manifest does not list it. Every other file in this "
    "archive is the published one, byte for byte (its SHA-256 is the manifest's; the data cards in here carry "
    "no notice: this file is it). The SHA-256 of the archive that the release's page shows is that of the "
    "archive as published, without this file: download it as published from {url}"
)


def release_notices(release: Release) -> list[str]:
    """The notices (one per erasure after ``release`` of a subject it contains), oldest first; [] for none."""
    return [erasure_notice(e, release) for e in release_erasures(release)]


def _intro(release: Release) -> str:
    published = f" on {release.published_at:%Y-%m-%d}" if release.published_at else ""
    return f"Notice added after publication: release v{release.version} was published{published}; since then:"


def _card_block_markdown(release: Release, notices: list[str], url: str) -> str:
    lines = [BEGIN, f"> **{_intro(release)}**", ">"]
    lines += [f"> - {escape_markdown_text(n)}" for n in notices]
    lines += [">", "> " + _VERIFY.format(comments="", url=url), END]
    return "\n".join(lines) + "\n"


def _card_block_html(release: Release, notices: list[str], url: str) -> str:
    items = "".join(f"<li>{html.escape(n)}</li>" for n in notices)
    return (
        f"{BEGIN}\n"
        '<div class="fairtone-erasure-notice" role="note" style="border:3px solid #b3261e;background:#fdf0ef;'
        'color:#1d1b1a;padding:0.75em 1em;margin:0 0 1.5em">'
        f"<p><strong>{html.escape(_intro(release))}</strong></p><ul>{items}</ul>"
        f"<p>{html.escape(_VERIFY.format(comments=' (HTML comments)', url=url))}</p></div>\n"
        f"{END}\n"
    )


def card_with_notice(release: Release, name: str, data: bytes, notices: list[str], original_url: str) -> bytes:
    """The card ``name`` (its published bytes ``data``) with the notice block at its top; ``original_url``: where
    the published bytes are (``?original=1``)."""
    if name.endswith(".html"):
        block = _card_block_html(release, notices, original_url).encode("utf-8")
        at = data.find(b"<body>\n")
        if at >= 0:  # as the card is written (card.py): the block's lines are lines of their own
            at += len(b"<body>\n")
            return data[:at] + block + data[at:]
        return block + data
    return _card_block_markdown(release, notices, original_url).encode("utf-8") + data


def card_strip(data: bytes) -> bytes:
    """A served card without its notice block: the lines from BEGIN to END (both included) deleted."""
    begin = data.find(BEGIN.encode())
    if begin < 0:
        return data
    end = data.find(END.encode(), begin)
    end = data.index(b"\n", end) + 1
    return data[:begin] + data[end:]


def notice_file(release: Release, notices: list[str], original_url: str) -> bytes:
    """``ERASURE_NOTICE.md``: the zip's extra file."""
    lines = ["# Erasure notice", "", _intro(release), "", *(f"- {escape_markdown_text(n)}" for n in notices), ""]
    lines += [_VERIFY_ZIP.format(url=original_url), ""]
    return "\n".join(lines).encode("utf-8")


class _Tail(io.RawIOBase):
    """A write buffer that reports positions as if it were written at ``offset`` of a larger file."""

    def __init__(self, offset: int):
        self.offset = offset
        self.buffer = io.BytesIO()

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def write(self, data) -> int:
        return self.buffer.write(data)

    def tell(self) -> int:
        return self.offset + self.buffer.tell()

    def seek(self, position: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            if position < self.offset:
                raise OSError("before the tail")
            self.buffer.seek(position - self.offset)
        else:
            self.buffer.seek(position, whence)
        return self.tell()


def _top(names: list[str]) -> str:
    tops = {name.split("/", 1)[0] for name in names if "/" in name}
    return f"{tops.pop()}/" if len(tops) == 1 and all("/" in name for name in names) else ""


def zip_with_notice(path: str, notice: bytes) -> tuple[int, Iterator[bytes]]:
    """The stored archive ``path`` (a storage name) with ``<top>/ERASURE_NOTICE.md`` added: (its size, its bytes in chunks).

    The published archive's bytes up to its central directory are sent as they are; then the new entry and a
    central directory listing every published entry (at its published offset) and the new one."""
    with storage_reader(path) as handle, zipfile.ZipFile(handle) as published:
        start = published.start_dir
        entries = published.infolist()
        comment = published.comment
    tail = _Tail(start)
    with zipfile.ZipFile(tail, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for entry in entries:
            archive.filelist.append(entry)
            archive.NameToInfo[entry.filename] = entry
        info = zipfile.ZipInfo(_top([e.filename for e in entries]) + NOTICE_NAME, date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        info.create_system = 3
        info.external_attr = 0o100644 << 16
        archive.writestr(info, notice)
        archive.comment = comment
    data = tail.buffer.getvalue()

    def chunks() -> Iterator[bytes]:
        with storage_reader(path) as handle:
            left = start
            while left > 0:
                chunk = handle.read(min(CHUNK, left))
                if not chunk:
                    raise OSError(f"{path} is shorter than its central directory's offset")
                left -= len(chunk)
                yield chunk
        yield data

    return start + len(data), chunks()
