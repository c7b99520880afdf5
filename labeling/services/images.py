"""Image ingestion: validation, storage of the original bytes, display derivatives.

Every image is validated completely (size, format, full decode, pixel limits,
ids) before anything is written; the original bytes are then stored unchanged
(provenance) and a background task makes the oriented sRGB JPEG derivatives that
the labeling screens show.
"""

from __future__ import annotations

import hashlib
import io
import logging
import math
import re
import unicodedata
import warnings
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import numpy as np
from django.conf import settings
from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction
from django.db.models import F
from PIL import Image as PILImage
from PIL import ImageCms, ImageOps, UnidentifiedImageError

from ..models import Image, ImportBatch, Job, Project, Subject
from . import queue

logger = logging.getLogger(__name__)

# Pillow format name -> the words a lead reads in a rejection.
SUPPORTED_FORMATS = {
    "JPEG": "JPEG",
    "PNG": "PNG",
    "WEBP": "WebP",
    "TIFF": "TIFF",
    "BMP": "BMP",
    "GIF": "GIF",
}
EXTENSION_FORMATS = {
    ".jpg": "JPEG",
    ".jpeg": "JPEG",
    ".png": "PNG",
    ".webp": "WEBP",
    ".tif": "TIFF",
    ".tiff": "TIFF",
    ".bmp": "BMP",
    ".gif": "GIF",
}
IMAGE_EXTENSIONS = frozenset(EXTENSION_FORMATS)
MASK_KINDS = ("silhouette", "skin")
# The neutral surround of the labeling screen; transparent pixels are shown on it.
SURROUND_GREY = (128, 128, 128)
DISPLAY_JPEG_QUALITY = 90
THUMBNAIL_JPEG_QUALITY = 85
MAX_ATTRIBUTE_NAME = 100
MAX_ATTRIBUTE_TEXT = 1000

# Signatures of image formats we accept, checked before Pillow sees the bytes.
_IMAGE_SIGNATURES: tuple[tuple[str, bytes, int], ...] = (
    ("JPEG", b"\xff\xd8\xff", 0),
    ("PNG", b"\x89PNG\r\n\x1a\n", 0),
    ("GIF", b"GIF87a", 0),
    ("GIF", b"GIF89a", 0),
    ("TIFF", b"II*\x00", 0),
    ("TIFF", b"MM\x00*", 0),
    ("BMP", b"BM", 0),
)
# Things people name .jpg by mistake, for a rejection a lead understands.
_OTHER_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"%PDF", "a PDF"),
    (b"PK\x03\x04", "a zip archive (or an Office document)"),
    (b"\xd0\xcf\x11\xe0", "an old Office document"),
    (b"{\\rtf", "an RTF document"),
    (b"<!DOCTYPE html", "an HTML page"),
    (b"<html", "an HTML page"),
    (b"<?xml", "an XML or SVG file"),
    (b"<svg", "an SVG drawing"),
    (b"8BPS", "a Photoshop file"),
    (b"\x1f\x8b", "a gzip archive"),
)
_HEIF_BRANDS = (b"heic", b"heix", b"hevc", b"heim", b"heis", b"mif1", b"msf1", b"avif")
_FILENAME_UNSAFE = re.compile(r"[\x00-\x1f\x7f]")


class ImageRejected(Exception):
    """The file cannot be imported; ``reason`` says why in words a lead understands."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class DuplicateImage(Exception):
    """An image with the same content (sha256) is already in the project (with the same box, for a box)."""

    def __init__(self, existing: Image) -> None:
        super().__init__(f"same content as image '{existing.external_id}' already in the project")
        self.existing = existing


#: The names of a box's four numbers, in order (a manifest's columns, the API's keys).
BOX_FIELDS = ("x", "y", "width", "height")


def box_text(box: tuple[int, int, int, int]) -> str:
    """A box in words: ``x=10, y=20, width=30, height=40``."""
    return ", ".join(f"{name}={value}" for name, value in zip(BOX_FIELDS, box, strict=True))


def box_check(box: tuple[int, int, int, int], width: int, height: int) -> tuple[int, int, int, int]:
    """``box`` checked against a photo of ``width`` x ``height`` pixels (after its EXIF orientation).

    Raises
    ------
    ImageRejected
        A box that is not four whole numbers, has no area, or does not lie inside the photo; the reason
        names the numbers.

    Examples
    --------
    >>> box_check((10, 20, 30, 40), 100, 100)
    (10, 20, 30, 40)
    >>> box_check((80, 0, 30, 10), 100, 50)
    Traceback (most recent call last):
    ...
    labeling.services.images.ImageRejected: the box goes past the photo's right edge: x + width = 110 but the photo is 100 pixels wide (after its EXIF orientation)
    """
    if len(box) != 4 or any(isinstance(v, bool) or not isinstance(v, int) for v in box):
        raise ImageRejected("a box is four whole numbers of pixels: x, y, width, height")
    x, y, w, h = box
    if x < 0 or y < 0:
        raise ImageRejected(f"the box starts outside the photo ({box_text(box)}): x and y are 0 or more")
    if w < 1 or h < 1:
        raise ImageRejected(f"the box has no area ({box_text(box)}): width and height are 1 or more")
    if x + w > width:
        raise ImageRejected(
            f"the box goes past the photo's right edge: x + width = {x + w} but the photo is {width} pixels wide "
            "(after its EXIF orientation)"
        )
    if y + h > height:
        raise ImageRejected(
            f"the box goes past the photo's bottom edge: y + height = {y + h} but the photo is {height} pixels "
            "high (after its EXIF orientation)"
        )
    return (x, y, w, h)


def image_oriented_size(data: bytes) -> tuple[int, int] | None:
    """The photo's size after its EXIF orientation, read from its header (nothing decoded), or None when the
    header cannot be read (the import then rejects the file with its reason)."""
    if _sniff_format(data) is None:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PILImage.DecompressionBombWarning)
            with PILImage.open(io.BytesIO(data)) as img:
                return _oriented_size(img.size, _exif_orientation(img))
    except Exception:  # noqa: BLE001 - the full check of the import says what is wrong
        return None


@dataclass(frozen=True)
class _Decoded:
    format: str
    mode: str
    orientation: int
    width: int  # after EXIF orientation
    height: int


def _limits() -> dict[str, Any]:
    return settings.FAIRTONE


def sanitize_filename(filename: str) -> str:
    """The base name of ``filename`` without folders or control characters.

    Parameters
    ----------
    filename : str
        A name as uploaded or as stored in an archive (``/`` or ``\\`` separators).

    Returns
    -------
    str
        A non-empty name of at most 300 characters, keeping the extension.

    Examples
    --------
    >>> sanitize_filename("C:\\\\photos\\\\../a\\x00b.JPG")
    'ab.JPG'
    """
    name = unicodedata.normalize("NFC", str(filename)).replace("\\", "/").rsplit("/", 1)[-1]
    name = _FILENAME_UNSAFE.sub("", name).strip().lstrip(".").strip()
    if not name:
        return "image"
    if len(name) > 300:
        stem, dot, ext = name.rpartition(".")
        name = (stem[: 300 - len(ext) - 1] + dot + ext) if dot and len(ext) <= 10 else name[:300]
    return name


def _sniff_format(data: bytes) -> str | None:
    for fmt, signature, offset in _IMAGE_SIGNATURES:
        if data[offset : offset + len(signature)] == signature:
            return fmt
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WEBP"
    return None


def _describe_non_image(data: bytes) -> str:
    head = data[:64].lstrip()
    for signature, description in _OTHER_SIGNATURES:
        if head[: len(signature)].lower() == signature.lower():
            return f"not an image (the file starts like {description})"
    if data[4:8] == b"ftyp" and data[8:12] in _HEIF_BRANDS:
        return "HEIC/AVIF photos are not supported; export them as JPEG or PNG"
    sample = data[:1024]
    try:
        sample.decode("utf-8")
        is_text = b"\x00" not in sample
    except UnicodeDecodeError as exc:
        # A multi-byte character cut at the end of the sample is still text.
        is_text = exc.start >= len(sample) - 3 and b"\x00" not in sample
    if is_text:
        return "not an image (the file is plain text)"
    return "not an image (the content is not JPEG, PNG, WebP, TIFF, BMP or GIF)"


def _oriented_size(size: tuple[int, int], orientation: int) -> tuple[int, int]:
    # Orientations 5-8 turn the picture by 90 degrees (EXIF 2.32, tag 0x0112).
    return (size[1], size[0]) if orientation in (5, 6, 7, 8) else size


def _exif_orientation(img: PILImage.Image) -> int:
    try:
        value = img.getexif().get(0x0112, 1)
    except Exception:  # noqa: BLE001 - a broken EXIF block must not reject the photo
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def _decode(data: bytes, *, what: str = "image", check_only: bool = False) -> tuple[PILImage.Image, _Decoded]:
    """Decode ``data`` fully with Pillow, or raise ImageRejected.

    ``check_only``: the caller needs no pixels, only the proof that the file decodes to its end; a JPEG is then
    decoded at 1/8 scale (libjpeg still reads every entropy-coded block, so a truncated or damaged stream is
    caught, but skips most of the inverse DCT and colour conversion). The returned image is then that small one
    (the sizes in ``_Decoded`` are the file's)."""
    limits = _limits()
    max_pixels = int(limits["MAX_IMAGE_PIXELS"])
    sniffed = _sniff_format(data)
    if sniffed is None:
        reason = _describe_non_image(data)
        raise ImageRejected(reason if what == "image" else f"the mask is {reason}")
    label = SUPPORTED_FORMATS[sniffed]
    prefix = "" if what == "image" else "mask: "
    try:
        with warnings.catch_warnings(record=True) as caught:
            # Pillow's own guard stays on: its error (over twice its limit) is raised
            # here, its warning (over its limit) is recorded and rejected below,
            # after our own, usually stricter, limit has had its say.
            warnings.simplefilter("always", PILImage.DecompressionBombWarning)
            img = PILImage.open(io.BytesIO(data), formats=[sniffed])
        width, height = img.size
        if width < 1 or height < 1:
            raise ImageRejected(f"{prefix}the {label} declares an empty size {width}x{height}")
        if width * height > max_pixels:
            raise ImageRejected(
                f"{prefix}decompression bomb: {width * height:,} pixels "
                f"({width}x{height}) is over the limit of {max_pixels:,}"
            )
        bombs = [w for w in caught if issubclass(w.category, PILImage.DecompressionBombWarning)]
        if bombs:
            raise PILImage.DecompressionBombWarning(str(bombs[0].message))
        size, mode = img.size, img.mode
        if check_only and sniffed == "JPEG" and img.format == "JPEG":
            img.draft(None, (max(1, width // 8), max(1, height // 8)))
        with warnings.catch_warnings():
            warnings.simplefilter("error", PILImage.DecompressionBombWarning)
            img.load()
    except ImageRejected:
        raise
    except (PILImage.DecompressionBombError, PILImage.DecompressionBombWarning) as exc:
        pixels = re.search(r"\((\d+) pixels\)", str(exc))
        count = f"{int(pixels.group(1)):,} pixels" if pixels else "the image"
        limit = PILImage.MAX_IMAGE_PIXELS or 0
        raise ImageRejected(
            f"{prefix}decompression bomb: {count} is over the image library's safety limit of {limit:,}"
        ) from exc
    except UnidentifiedImageError as exc:
        if _describe_non_image(data).endswith("plain text)"):
            raise ImageRejected(f"{prefix}not an image (the file is plain text)") from exc
        raise ImageRejected(f"{prefix}damaged {label}: the header cannot be read") from exc
    except Exception as exc:  # any decoder failure is a rejection
        message = str(exc)
        if "truncated" in message.lower():
            raise ImageRejected(f"{prefix}truncated {label} (the file ends too early)") from exc
        raise ImageRejected(f"{prefix}damaged {label}: {message or type(exc).__name__}") from exc
    # Multi-picture JPEGs (MPO, from some phones and 3-D cameras) are JPEGs.
    actual = "JPEG" if img.format == "MPO" else img.format
    if actual != sniffed:
        raise ImageRejected(f"{prefix}unsupported image format {img.format}")
    orientation = _exif_orientation(img)
    width, height = _oriented_size(size, orientation)
    return img, _Decoded(sniffed, mode, orientation, width, height)


def _check_extension(filename: str, fmt: str) -> None:
    suffix = PurePosixPath(filename).suffix.lower()
    if not suffix:
        return
    claimed = EXTENSION_FORMATS.get(suffix)
    if claimed is None:
        allowed = ", ".join(sorted(e.lstrip(".") for e in IMAGE_EXTENSIONS))
        raise ImageRejected(f"'{suffix}' files are not supported (supported: {allowed})")
    if claimed != fmt:
        raise ImageRejected(
            f"the file is named {suffix} but its content is {SUPPORTED_FORMATS[fmt]}; rename it or re-export it"
        )


def clean_attributes(attributes: dict[str, Any] | None) -> dict[str, Any]:
    """Attributes as stored (names stripped), checked: text or finite numbers, bounded names and texts.

    Used by every import and by later changes of attributes (``services.image_attributes``).

    Raises
    ------
    ImageRejected
        An attribute that cannot be stored; ``reason`` names it.
    """
    if not attributes:
        return {}
    if not isinstance(attributes, dict):
        raise ImageRejected("attributes must be a mapping of names to text or numbers")
    cleaned: dict[str, Any] = {}
    for key, value in attributes.items():
        if not isinstance(key, str) or not key.strip() or len(key) > MAX_ATTRIBUTE_NAME:
            raise ImageRejected(f"attribute name {key!r} is empty or too long")
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ImageRejected(f"attribute '{key}' must be text or a number")
        if isinstance(value, float) and not math.isfinite(value):
            raise ImageRejected(f"attribute '{key}' is not a finite number")
        if isinstance(value, str) and len(value) > MAX_ATTRIBUTE_TEXT:
            raise ImageRejected(f"attribute '{key}' is longer than {MAX_ATTRIBUTE_TEXT} characters")
        cleaned[key.strip()] = value
    return cleaned


def _mask_png(mask_data: bytes, *, width: int, height: int) -> bytes:
    """Decode a mask, orient it, check its size and return it as a 1-bit PNG."""
    if len(mask_data) > int(_limits()["MAX_IMAGE_BYTES"]):
        raise ImageRejected("the mask file is over the size limit")
    mask, decoded = _decode(mask_data, what="mask")
    if (decoded.width, decoded.height) != (width, height):
        raise ImageRejected(
            f"mask is {decoded.width}x{decoded.height} but the image is {width}x{height} after EXIF orientation"
        )
    mask = ImageOps.exif_transpose(mask)
    if mask.mode in ("P", "PA"):
        mask = mask.convert("RGBA")
    pixels = np.asarray(mask)
    if pixels.ndim == 2:
        inside = pixels != 0
    else:
        bands = mask.getbands()
        colour = [i for i, band in enumerate(bands) if band != "A"]
        inside = (pixels[..., colour] != 0).any(axis=-1)
        if "A" in bands:
            inside &= pixels[..., bands.index("A")] != 0
    buffer = io.BytesIO()
    PILImage.fromarray(inside).convert("1").save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def image_create_from_bytes(
    *,
    project: Project,
    filename: str,
    data: bytes,
    batch: ImportBatch | None = None,
    subject: Subject | None = None,
    external_id: str | None = None,
    attributes: dict[str, Any] | None = None,
    mask_data: bytes | None = None,
    mask_kind: str = "",
    is_synthetic: bool = False,
    job: Job | None = None,
    box: tuple[int, int, int, int] | None = None,
) -> Image:
    """Validate an uploaded photo completely, then store it unchanged.

    Nothing is written unless every check passes; if storing fails half-way the
    written files are removed. Display derivatives are made by a background task
    enqueued once the transaction commits.

    Parameters
    ----------
    project : Project
        The project the image joins.
    filename : str
        The name as uploaded; only its sanitised base name is kept.
    data : bytes
        The file's bytes (JPEG, PNG, WebP, TIFF, BMP or GIF; GIF: first frame).
    batch : ImportBatch, optional
        The import this image comes from.
    subject : Subject, optional
        The person shown.
    external_id : str, optional
        The image id, unique in the project; defaults to the file name's stem.
    attributes : dict, optional
        Image attributes, text or numbers only.
    mask_data : bytes, optional
        A mask the size of the oriented image; non-zero pixels are inside.
    mask_kind : str
        ``"silhouette"`` or ``"skin"`` (blank when there is no mask).
    is_synthetic : bool
        True for generated demo images.
    job : Job, optional
        The import's job (``services.image_jobs``) that counts this image's background steps.
    box : (x, y, width, height), optional
        One person's box in the photo (pixels after EXIF orientation): the item is that person. The
        same file may come with several boxes, each its own item sharing the stored original.

    Returns
    -------
    Image
        The saved image, ``derivative_status`` pending.

    Raises
    ------
    ImageRejected
        The file is not an acceptable image; ``reason`` says why.
    DuplicateImage
        The same content is already in the project; ``existing`` is that image. A box is a duplicate only of
        the same box of the same content; a whole photo is a duplicate of any item of the same content.

    Examples
    --------
    >>> image = image_create_from_bytes(project=project, filename="p1.jpg", data=jpeg)
    >>> image.external_id, image.width, image.height
    ('p1', 640, 480)
    """
    original_filename, sha256 = image_hash(filename, data)
    existing = _same_content(project, sha256, box)
    if existing is not None:
        raise DuplicateImage(existing)
    checked = image_check(original_filename, data, sha256, external_id=external_id, attributes=attributes)
    decoded = checked.decoded
    if box is not None:
        box = box_check(tuple(box), decoded.width, decoded.height)
    external_id = checked.external_id
    taken = Image.objects.filter(project=project, external_id=external_id).first()
    if taken is not None:
        raise ImageRejected(id_taken(external_id))

    mask_png = None
    mask_kind = (mask_kind or "").strip().lower()
    if mask_data:
        if mask_kind and mask_kind not in MASK_KINDS:
            raise ImageRejected(f"mask kind '{mask_kind}' is not one of: {', '.join(MASK_KINDS)}")
        mask_png = _mask_png(mask_data, width=decoded.width, height=decoded.height)
    else:
        mask_kind = ""

    image = image_row(checked, project=project, batch=batch, subject=subject, is_synthetic=is_synthetic)
    image.mask_kind = mask_kind
    if box is not None:
        image.box_x, image.box_y, image.box_width, image.box_height = box
    # The boxes of one photo share its stored original (the same bytes: the same SHA-256).
    shared = (
        Image.objects.filter(project=project, sha256=sha256).exclude(original="").values_list("original", flat=True)
    )
    shared_name = next((name for name in shared if image.original.storage.exists(name)), None)
    written: list[tuple[Any, str]] = []
    try:
        with transaction.atomic():
            if shared_name is not None:
                image.original.name = shared_name
            else:
                image.original.save(original_filename, ContentFile(data), save=False)
                written.append((image.original.storage, image.original.name))
            if mask_png is not None:
                image.mask.save(f"{sha256}.png", ContentFile(mask_png), save=False)
                written.append((image.mask.storage, image.mask.name))
            image.save()
            if job is not None:
                Job.objects.filter(pk=job.pk).update(total=F("total") + 1)
                queue.enqueue_on_commit(queue.IMAGE_MAKE_DERIVATIVES, image.id, job.pk)
            else:
                queue.enqueue_on_commit(queue.IMAGE_MAKE_DERIVATIVES, image.id)
    except BaseException as exc:
        for storage, name in written:
            try:
                storage.delete(name)
            except OSError:  # pragma: no cover - logged, the row is gone anyway
                logger.exception("could not remove %s after a failed import", name)
        if isinstance(exc, IntegrityError):
            # Another request stored the same content (and box) or id meanwhile.
            existing = _same_content(project, sha256, box)
            if existing is not None:
                raise DuplicateImage(existing) from exc
            raise ImageRejected(id_taken(external_id)) from exc
        raise
    return image


def id_taken(external_id: str) -> str:
    return f"image id '{external_id}' is already used by another image in this project"


@dataclass(frozen=True)
class CheckedImage:
    """A file that passed every check that needs no database: what its ``Image`` row is made of."""

    original_filename: str
    sha256: str
    file_size: int
    decoded: _Decoded
    external_id: str
    attributes: dict[str, Any]


def image_hash(filename: str, data: bytes) -> tuple[str, str]:
    """The sanitised file name and the SHA-256 of ``data`` (what the duplicate check needs), after the size
    checks; raises ImageRejected for an empty or too large file."""
    max_bytes = int(_limits()["MAX_IMAGE_BYTES"])
    original_filename = sanitize_filename(filename)
    if not data:
        raise ImageRejected("the file is empty")
    if len(data) > max_bytes:
        raise ImageRejected(f"the file is {len(data):,} bytes; the limit is {max_bytes:,} bytes")
    return original_filename, hashlib.sha256(data).hexdigest()


def image_check(
    original_filename: str,
    data: bytes,
    sha256: str,
    *,
    external_id: str | None = None,
    attributes: dict[str, Any] | None = None,
) -> CheckedImage:
    """Every check of a photo that needs no database (the one rule for every import): decoded completely,
    its format matching its extension, its id and attributes storable. Raises ImageRejected."""
    decoded_image, decoded = _decode(data, check_only=True)
    decoded_image.close()
    _check_extension(original_filename, decoded.format)
    if external_id is None or not str(external_id).strip():
        external_id = default_external_id(original_filename)
    external_id = str(external_id).strip()
    if len(external_id) > 200:
        raise ImageRejected("the image id is longer than 200 characters")
    return CheckedImage(original_filename, sha256, len(data), decoded, external_id, clean_attributes(attributes))


def default_external_id(original_filename: str) -> str:
    """The image id of a file given none: its (sanitised) name's stem."""
    return str(PurePosixPath(original_filename).stem or original_filename).strip()


def image_row(
    checked: CheckedImage,
    *,
    project: Project,
    batch: ImportBatch | None = None,
    subject: Subject | None = None,
    is_synthetic: bool = False,
) -> Image:
    """The unsaved ``Image`` of a checked file (no original stored yet)."""
    decoded = checked.decoded
    return Image(
        project=project,
        subject=subject,
        external_id=checked.external_id,
        original_filename=checked.original_filename,
        sha256=checked.sha256,
        file_size=checked.file_size,
        format=decoded.format,
        source_mode=decoded.mode,
        exif_orientation=decoded.orientation,
        width=decoded.width,
        height=decoded.height,
        attributes=checked.attributes,
        is_synthetic=is_synthetic,
        import_batch=batch,
    )


def _same_content(project: Project, sha256: str, box: tuple[int, int, int, int] | None) -> Image | None:
    """The item a new one would duplicate: for a box, the same box of the same content; for a whole photo,
    any item of the same content (the photo is in the project already, whole or as boxes)."""
    same = Image.objects.filter(project=project, sha256=sha256)
    if box is not None:
        x, y, w, h = box
        same = same.filter(box_x=x, box_y=y, box_width=w, box_height=h)
    return same.order_by("id").first()


# --- derivatives -----------------------------------------------------------------


def _sixteen_to_eight(img: PILImage.Image) -> PILImage.Image:
    """Scale 16-bit (or 32-bit integer/float) greyscale to 8 bits, 0..65535 -> 0..255."""
    pixels = np.asarray(img)
    if img.mode == "F":
        values = pixels.astype(np.float64)
        # Float TIFFs usually hold 0..1; anything larger is taken as 0..255.
        scale = 255.0 if np.nanmax(values, initial=0.0) <= 1.0 else 1.0
        eight = np.clip(np.rint(np.nan_to_num(values) * scale), 0, 255)
    else:
        values = np.clip(pixels.astype(np.int64), 0, 65535)
        eight = (values * 255 + 32767) // 65535
    return PILImage.fromarray(eight.astype(np.uint8), mode="L")


def _colour_to_srgb(colour: PILImage.Image, icc_profile: bytes | None, notes: list[str]) -> PILImage.Image:
    if icc_profile:
        try:
            source = ImageCms.ImageCmsProfile(io.BytesIO(icc_profile))
            srgb = ImageCms.createProfile("sRGB")
            return ImageCms.profileToProfile(
                colour,
                source,
                srgb,
                renderingIntent=ImageCms.Intent.PERCEPTUAL,
                outputMode="RGB",
            )
        except Exception as exc:  # noqa: BLE001 - keep the pixels, say so
            notes.append(f"the embedded colour profile could not be applied ({exc}); pixels were kept as they are")
    return colour.convert("RGB")


def _open_oriented_rgb(image: Image, *, max_side: int | None = None) -> tuple[PILImage.Image, list[str]]:
    notes: list[str] = []
    with image.original.open("rb") as handle:
        data = handle.read()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PILImage.DecompressionBombWarning)
        source = PILImage.open(io.BytesIO(data))
        if max_side and source.format == "JPEG":
            # Let libjpeg decode at 1/2, 1/4 or 1/8 scale; the result stays >= max_side.
            source.draft(None, (max_side, max_side))
        source.load()
    icc_profile = source.info.get("icc_profile")
    oriented = ImageOps.exif_transpose(source)

    mode = oriented.mode
    alpha = None
    if mode in ("P", "PA"):
        has_alpha = mode == "PA" or "transparency" in oriented.info
        oriented = oriented.convert("RGBA" if has_alpha else "RGB")
        mode = oriented.mode
    if mode in ("LA", "La", "RGBA", "RGBa"):
        if mode in ("La", "RGBa"):
            oriented = oriented.convert(mode.replace("a", "A"))
        alpha = oriented.getchannel("A")
        oriented = oriented.convert("L" if mode.startswith("L") else "RGB")
    elif mode in ("I;16", "I;16B", "I;16L", "I;16N", "I", "F"):
        oriented = _sixteen_to_eight(oriented)
    elif mode == "1":
        oriented = oriented.convert("L")

    rgb = _colour_to_srgb(oriented, icc_profile, notes)
    if alpha is not None:
        rgb = PILImage.composite(rgb, PILImage.new("RGB", rgb.size, SURROUND_GREY), alpha)
    return rgb, notes


def image_open_oriented_rgb(image: Image, *, max_side: int | None = None) -> PILImage.Image:
    """The image as the labelers see it: EXIF-oriented 8-bit sRGB.

    Parameters
    ----------
    image : Image
        The stored image.
    max_side : int, optional
        A hint that the caller will shrink the picture to this longest side: big
        JPEGs are then decoded at a reduced scale (never below ``max_side``).

    Returns
    -------
    PIL.Image.Image
        Mode ``"RGB"``; transparent pixels composited onto mid-grey #808080;
        16-bit values scaled to 8 bits; an embedded ICC profile converted to sRGB.

    Examples
    --------
    >>> rgb = image_open_oriented_rgb(image)
    >>> rgb.mode, rgb.size == (image.width, image.height)
    ('RGB', True)
    """
    rgb, _notes = _open_oriented_rgb(image, max_side=max_side)
    return rgb


def _jpeg_bytes(img: PILImage.Image, *, max_side: int, quality: int) -> bytes:
    """A derivative carries pixels only: Pillow copies the original's JPEG comment (``info["comment"]``)
    into a new JPEG unless told otherwise, and a comment or other metadata could let a blind labeler
    match the photo against a known dataset."""
    img = img.copy()
    img.info = {}
    if max(img.size) > max_side:
        img.thumbnail((max_side, max_side), PILImage.Resampling.LANCZOS)
    buffer = io.BytesIO()
    img.save(buffer, format="JPEG", quality=quality, optimize=True, comment=b"", exif=b"")
    return buffer.getvalue()


def _box_on(box: tuple[int, int, int, int], image: Image, size: tuple[int, int]) -> tuple[int, int, int, int]:
    """The box (pixels of the oriented original) as a crop rectangle on a copy of ``size`` pixels."""
    sx, sy = size[0] / image.width, size[1] / image.height
    x, y, w, h = box
    left, top = math.floor(x * sx), math.floor(y * sy)
    return (left, top, max(left + 1, math.ceil((x + w) * sx)), max(top + 1, math.ceil((y + h) * sy)))


def image_make_derivatives(*, image: Image) -> None:
    """Write the display JPEG and the thumbnail of ``image``; safe to run twice.

    Sets ``derivative_status`` to ready, or to failed with ``derivative_error``.
    A colour profile that cannot be applied does not fail the image: the note is
    kept in ``derivative_error`` with the status ready.

    Parameters
    ----------
    image : Image
        The stored image; its ``display`` and ``thumbnail`` files are replaced.

    Returns
    -------
    None

    Examples
    --------
    >>> image_make_derivatives(image=image)
    >>> str(image.derivative_status)
    'ready'
    """
    limits = _limits()
    display_side = int(limits["DISPLAY_MAX_SIDE"])
    thumb_side = int(limits["THUMBNAIL_MAX_SIDE"])
    box = image.box
    try:
        rgb, notes = _open_oriented_rgb(image, max_side=None if box else display_side)
        display = _jpeg_bytes(rgb, max_side=display_side, quality=DISPLAY_JPEG_QUALITY)
        # A box's thumbnail is the box (the data manager's row is that person); its display is the whole photo,
        # on which the labeling page highlights the box.
        shown = rgb if box is None else rgb.crop(_box_on(box, image, rgb.size))
        thumbnail = _jpeg_bytes(shown, max_side=thumb_side, quality=THUMBNAIL_JPEG_QUALITY)
    except Exception as exc:  # noqa: BLE001 - recorded on the image for the lead
        logger.warning("derivatives failed for image %s: %s", image.pk, type(exc).__name__)
        image.derivative_status = Image.DerivativeStatus.FAILED
        image.derivative_error = f"could not make the display image: {exc}"[:2000]
        image.save(update_fields=["derivative_status", "derivative_error"])
        return

    stem = image.sha256 if box is None else f"{image.sha256}-box-{'-'.join(str(v) for v in box)}"
    display_name = f"{stem}-display.jpg"
    thumbnail_name = f"{stem}-thumb.jpg"
    storage = image.display.storage
    stale = {image.display.name, image.thumbnail.name}
    stale |= {image.display.field.generate_filename(image, display_name)}
    stale |= {image.thumbnail.field.generate_filename(image, thumbnail_name)}
    for name in stale:
        if name and storage.exists(name):
            storage.delete(name)
    image.display.save(display_name, ContentFile(display), save=False)
    image.thumbnail.save(thumbnail_name, ContentFile(thumbnail), save=False)
    image.derivative_status = Image.DerivativeStatus.READY
    image.derivative_error = "; ".join(notes)
    image.save(update_fields=["display", "thumbnail", "derivative_status", "derivative_error"])
