"""Attributes of images already imported: a subject id, the subject's attributes (``gender``, ``body_shape``, ...)
and the image's own, changed one image at a time or by applying a manifest (issue 23).

An import that skipped photos as duplicates, or a browser upload that had no manifest, left them without
subjects or attributes; a fairness evaluation needs them. Two ways to fix that, both for the project's lead:

- :func:`image_attributes_update` (``PATCH /api/images/{id}/``, the image page's form): ``subject_id`` (a
  subject of the project, made if new; empty to detach), ``attributes`` (the image's) and
  ``subject_attributes`` (its subject's), each a JSON merge patch: the names given are set, a name given as
  ``null`` is removed, the others stay.
- :func:`image_attributes_apply` (``POST /api/projects/{id}/image-attributes/``): a manifest in the import's
  format (CSV or JSON Lines, the same columns) whose rows are matched to images already in the project by
  ``image_id``, else by file name (the ``file`` column's base name, as the image was uploaded; for one
  person's box of a photo of several, the file and the box's ``x``, ``y``, ``width``, ``height``). Its columns
  mean what they mean in an import: ``subject_id`` sets the image's subject, ``image.<name>`` an attribute of
  the image, every other column an attribute of the subject (of the image when it has no subject). Empty
  cells change nothing; ``mask`` and ``mask_kind`` are ignored (a mask is drawn or imported, not applied).
  Every row is checked first and nothing is applied unless all pass (all or nothing); the answer reports each
  row: ``updated``, ``unchanged``, ``unknown`` (no such image: left alone) or ``rejected`` with the reason.

The values are checked as an import checks them (``services.images.clean_attributes``). A subject's
attributes are the person's: changing them changes them for every image of that subject. Releases already
published are files and never change; the next release carries the new values. Every change is in the audit
log: ``image.attributes`` (one image) and ``images.attributes_apply`` (a manifest), with the names of the
attributes changed and never their values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from ..models import Image, Project, Subject
from .audit import audit
from .images import ImageRejected, box_text, clean_attributes
from .imports.manifest import (
    FILE_COLUMNS,
    IMAGE_ATTRIBUTE_PREFIX,
    BoxCellsError,
    box_cells,
    cell_text,
    parse_cell,
    parse_manifest,
)
from .imports.report import ImportRefused
from .imports.rows import row_attributes
from .project_lifecycle import project_refuse_if_archived

MAX_SUBJECT_ID = 200
#: Rows reported in full in an answer (the counts are always complete).
MAX_REPORTED_ROWS = 10_000


def _merge(current: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``current`` with ``patch`` applied: a name given ``None`` is removed, the others are set."""
    merged = dict(current or {})
    for name, value in patch.items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    return merged


def _cleaned_patch(patch: Any, field_name: str) -> dict[str, Any]:
    """A merge patch checked as an import checks attributes (``None`` allowed: it removes the name)."""
    if patch is None:
        return {}
    if not isinstance(patch, dict):
        raise ValidationError({field_name: "A mapping of attribute names to text or numbers (null removes one)."})
    removed = {str(name).strip(): None for name, value in patch.items() if value is None}
    try:
        kept = clean_attributes({name: value for name, value in patch.items() if value is not None})
    except ImageRejected as rejected:
        raise ValidationError({field_name: rejected.reason[:1].upper() + rejected.reason[1:] + "."}) from None
    if any(not name for name in removed):
        raise ValidationError({field_name: "An attribute name is empty."})
    return {**removed, **kept}


def _subject_id(value: Any) -> str | None:
    """The subject id asked for: text, ``""`` or ``None`` for none."""
    if value is None:
        return ""
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise ValidationError({"subject_id": "The subject's id, as text (empty for none)."})
    text = str(value).strip()
    if len(text) > MAX_SUBJECT_ID:
        raise ValidationError({"subject_id": f"At most {MAX_SUBJECT_ID} characters."})
    return text


_UNSET = object()


def image_attributes_update(
    *,
    image: Image,
    user=None,
    subject_id: Any = _UNSET,
    attributes: dict[str, Any] | None = None,
    subject_attributes: dict[str, Any] | None = None,
) -> list[str]:
    """Change one image's subject and attributes (merge patches, see the module); returns what changed
    (``"subject_id"``, ``"attributes.<name>"``, ``"subject_attributes.<name>"``), empty when nothing did.

    Raises
    ------
    django.core.exceptions.ValidationError
        A value that cannot be stored (the field named), subject attributes for an image without a subject,
        or an archived project; nothing is changed then.
    """
    project_refuse_if_archived(image.project_id, "change its images")
    image_patch = _cleaned_patch(attributes, "attributes")
    subject_patch = _cleaned_patch(subject_attributes, "subject_attributes")
    wanted_subject = _UNSET if subject_id is _UNSET else _subject_id(subject_id)
    changed: list[str] = []
    with transaction.atomic():
        image = Image.objects.select_for_update(of=("self",)).select_related("subject").get(pk=image.pk)
        subject = image.subject
        if wanted_subject is not _UNSET and wanted_subject != (subject.external_id if subject else ""):
            subject = (
                Subject.objects.get_or_create(project_id=image.project_id, external_id=wanted_subject)[0]
                if wanted_subject
                else None
            )
            image.subject = subject
            changed.append("subject_id")
        if subject_patch and subject is None:
            raise ValidationError(
                {"subject_attributes": "This image has no subject: give a subject_id, or set the image's attributes."}
            )
        merged = _merge(image.attributes, image_patch)
        if merged != (image.attributes or {}):
            changed += [f"attributes.{n}" for n in image_patch if (image.attributes or {}).get(n) != merged.get(n)]
            image.attributes = merged
        if changed:
            image.save(update_fields=["subject", "attributes"])
        if subject is not None and subject_patch:
            subject = Subject.objects.select_for_update().get(pk=subject.pk)
            merged = _merge(subject.attributes, subject_patch)
            if merged != (subject.attributes or {}):
                before = subject.attributes or {}
                changed += [f"subject_attributes.{n}" for n in subject_patch if before.get(n) != merged.get(n)]
                subject.attributes = merged
                subject.save(update_fields=["attributes"])
        if changed:
            audit(
                image.project_id, "image.attributes", image, user=user, external_id=image.external_id, changed=changed
            )
    return changed


@dataclass
class _Row:
    row: int
    image_id: str
    file: str
    outcome: str = ""
    reason: str = ""
    changed: list[str] = field(default_factory=list)
    image: Image | None = None
    subject_id: str | None = None  # the subject to set (None: keep the image's)
    subject_attributes: dict[str, Any] = field(default_factory=dict)
    image_attributes: dict[str, Any] = field(default_factory=dict)

    def report(self) -> dict[str, Any]:
        return {
            "row": self.row,
            "image_id": self.image.external_id if self.image is not None else self.image_id,
            "file": self.file,
            "outcome": self.outcome,
            "reason": self.reason,
            "changed": self.changed,
        }


class _Rejected(Exception):
    pass


def image_attributes_apply(*, project: Project, data: bytes, name: str, user=None, dry_run: bool = False) -> dict:
    """Apply a manifest's attributes to images already in ``project`` (see the module): all rows or none.

    Returns ``{"applied", "dry_run", "counts": {"updated", "unchanged", "unknown", "rejected"}, "rows": [...]}``
    with, per row, its number, the image id, the file cell, the outcome, the reason and what it changes.
    ``applied`` is false when a row is rejected (nothing changed) or for a ``dry_run``.

    Raises
    ------
    django.core.exceptions.ValidationError
        The manifest cannot be read at all (``manifest``), or the project is archived.
    """
    project_refuse_if_archived(project.pk, "change its images")
    try:
        rows = parse_manifest(data, name or "manifest.csv", require_file=False)
    except ImportRefused as refused:
        raise ValidationError({"manifest": refused.reason}) from None
    columns = {column.lower() for row in rows for column in row.cells}
    if "image_id" not in columns and not columns & set(FILE_COLUMNS):
        raise ValidationError({"manifest": "The manifest needs an 'image_id' or a 'file' column to find the images."})

    images = list(project.images.select_related("subject").order_by("id"))
    by_id = {image.external_id: image for image in images}
    by_name: dict[str, list[Image]] = {}
    for image in images:
        by_name.setdefault(image.original_filename, []).append(image)
    subjects = {s.external_id: s for s in project.subjects.all()}

    planned: list[_Row] = []
    matched: dict[int, int] = {}  # image pk -> row number
    subject_values: dict[str, dict[str, tuple[Any, int]]] = {}  # subject -> name -> (value, row)
    for row in rows:
        lowered = {key.lower(): key for key in row.cells}
        file_key = next((lowered[c] for c in FILE_COLUMNS if c in lowered), None)
        item = _Row(
            row=row.number,
            image_id=cell_text(row.cells.get(lowered.get("image_id"))),
            file=cell_text(row.cells.get(file_key)) if file_key else "",
        )
        planned.append(item)
        try:
            _plan(item, row, file_key, lowered, by_id, by_name, matched, subject_values, subjects)
        except _Rejected as rejected:
            item.outcome, item.reason = "rejected", f"row {row.number}: {rejected}"
    counts = {outcome: sum(r.outcome == outcome for r in planned) for outcome in ("updated", "unchanged", "unknown")}
    counts["rejected"] = sum(r.outcome == "rejected" for r in planned)
    applied = not counts["rejected"] and not dry_run
    if applied and counts["updated"]:
        with transaction.atomic():
            _apply(project, [r for r in planned if r.outcome == "updated"], subjects)
            changed_images = [r.image.external_id for r in planned if r.outcome == "updated"]
            audit(
                project,
                "images.attributes_apply",
                user=user,
                manifest=str(name)[:200],
                images=changed_images,
                n_updated=counts["updated"],
                n_unchanged=counts["unchanged"],
                n_unknown=counts["unknown"],
                attributes=sorted({c for r in planned for c in r.changed}),
            )
    return {
        "applied": applied,
        "dry_run": dry_run,
        "counts": counts,
        "rows": [r.report() for r in planned[:MAX_REPORTED_ROWS]],
    }


def _plan(item: _Row, row, file_key, lowered, by_id, by_name, matched, subject_values, subjects) -> None:
    """Match the row to its image and work out what it changes (``item.outcome``); raise ``_Rejected``."""
    if row.error:
        raise _Rejected(row.error)
    if item.image_id:
        image = by_id.get(item.image_id)
        if image is None:
            item.outcome, item.reason = "unknown", f"no image with id '{item.image_id}' in this project"
            return
    elif item.file:
        base = PurePosixPath(item.file.replace("\\", "/")).name
        found = by_name.get(base, [])
        try:
            box = box_cells(row.cells)
        except BoxCellsError as exc:
            raise _Rejected(str(exc)) from None
        if box is not None:
            # One person's box of a photo of several: the file and the box name it.
            found = [image for image in found if image.box == box]
            if not found:
                item.outcome, item.reason = "unknown", f"no box {box_text(box)} of an image named '{base}'"
                return
        if len(found) > 1:
            if any(image.box is not None for image in found):
                raise _Rejected(
                    f"{len(found)} images come from '{base}' (the boxes of a photo of several people); give their "
                    "image_id, or the box (x, y, width, height), to choose one"
                )
            raise _Rejected(f"{len(found)} images are named '{base}'; give their image_id to choose one")
        if not found:
            item.outcome, item.reason = "unknown", f"no image named '{base}' in this project"
            return
        image = found[0]
    else:
        raise _Rejected("no image_id and no file: the row names no image")
    if image.pk in matched:
        raise _Rejected(f"image '{image.external_id}' is also in row {matched[image.pk]}")
    matched[image.pk] = row.number
    item.image = image

    new_subject = cell_text(row.cells.get(lowered.get("subject_id")))
    if len(new_subject) > MAX_SUBJECT_ID:
        raise _Rejected(f"the subject id is longer than {MAX_SUBJECT_ID} characters")
    current_subject = image.subject.external_id if image.subject_id else ""
    subject = new_subject or current_subject
    _warnings, subject_attributes, image_attributes = row_attributes(row, file_key, subject)
    try:
        subject_attributes = clean_attributes(subject_attributes)
        image_attributes = clean_attributes(image_attributes)
    except ImageRejected as rejected:
        raise _Rejected(rejected.reason) from None
    if subject:
        known = subject_values.setdefault(subject, {})
        for name, value in subject_attributes.items():
            if name in known and known[name][0] != value:
                earlier, earlier_row = known[name]
                raise _Rejected(f"subject '{subject}' has {name}={earlier!r} in row {earlier_row} but {value!r} here")
            known.setdefault(name, (value, row.number))

    if new_subject and new_subject != current_subject:
        item.subject_id = new_subject
        item.changed.append("subject_id")
    before = image.attributes or {}
    item.changed += [f"attributes.{n}" for n, v in image_attributes.items() if before.get(n) != v]
    item.image_attributes = image_attributes
    # Compared with the subject's attributes as they stand (a new subject has none).
    target = subjects.get(subject) if subject else None
    subject_before = (target.attributes or {}) if target is not None else {}
    item.changed += [f"subject_attributes.{n}" for n, v in subject_attributes.items() if subject_before.get(n) != v]
    item.subject_attributes = subject_attributes
    item.outcome = "updated" if item.changed else "unchanged"


def _apply(project: Project, rows: list[_Row], subjects: dict[str, Subject]) -> None:
    for item in rows:
        image = Image.objects.select_for_update().get(pk=item.image.pk)
        if item.subject_id is not None:
            subject = subjects.get(item.subject_id)
            if subject is None:
                subject = Subject.objects.get_or_create(project=project, external_id=item.subject_id)[0]
                subjects[item.subject_id] = subject
            image.subject = subject
        image.attributes = {**(image.attributes or {}), **item.image_attributes}
        image.save(update_fields=["subject", "attributes"])
        if item.subject_attributes and image.subject_id:
            subject = Subject.objects.select_for_update().get(pk=image.subject_id)
            merged = {**(subject.attributes or {}), **item.subject_attributes}
            if merged != subject.attributes:
                subject.attributes = merged
                subject.save(update_fields=["attributes"])


def images_set_attribute(*, project: Project, images: list[Image], name: str, value: Any, user=None) -> int:
    """Set one attribute on ``images`` (the data manager's bulk "set attribute"); ``value`` ``None`` or ``""``
    removes it; text is read as a manifest's cell (``"0.7"`` is a number). As in a manifest: ``image.<name>`` is the image's own attribute; any other name goes to the
    image's subject when it has one (once per subject), else to the image. Returns how many images changed
    (an image whose subject changed counts). Audited once (``images.attribute_set``: the name, never the value).

    Raises
    ------
    django.core.exceptions.ValidationError
        A name or value an import would refuse (``attribute``, ``value``), or an archived project.
    """
    project_refuse_if_archived(project.pk, "change its images")
    name = (name or "").strip()
    on_image = name.lower().startswith(IMAGE_ATTRIBUTE_PREFIX)
    if on_image:
        name = name[len(IMAGE_ATTRIBUTE_PREFIX) :].strip()
    if not name:
        raise ValidationError({"attribute": "Name the attribute to set (image.<name> for the photo's own)."})
    if isinstance(value, str):
        value = parse_cell(value)  # as a manifest's cell: a number when it is one, empty for none
    try:
        clean_attributes({name: 0})
    except ImageRejected as rejected:
        raise ValidationError({"attribute": rejected.reason[:1].upper() + rejected.reason[1:] + "."}) from None
    if value is not None:
        try:
            value = clean_attributes({name: value})[name]
        except ImageRejected as rejected:
            raise ValidationError({"value": rejected.reason[:1].upper() + rejected.reason[1:] + "."}) from None
    changed_images: list[str] = []
    with transaction.atomic():
        subjects_done: dict[int, bool] = {}
        for image in (
            Image.objects.select_for_update(of=("self",))
            .select_related("subject")
            .filter(project=project, pk__in=[i.pk for i in images])
        ):
            if image.subject_id and not on_image:
                if image.subject_id not in subjects_done:
                    subject = Subject.objects.select_for_update().get(pk=image.subject_id)
                    merged = _merge(subject.attributes, {name: value})
                    subjects_done[image.subject_id] = merged != (subject.attributes or {})
                    if subjects_done[image.subject_id]:
                        subject.attributes = merged
                        subject.save(update_fields=["attributes"])
                if subjects_done[image.subject_id]:
                    changed_images.append(image.external_id)
                continue
            merged = _merge(image.attributes, {name: value})
            if merged != (image.attributes or {}):
                image.attributes = merged
                image.save(update_fields=["attributes"])
                changed_images.append(image.external_id)
        if changed_images:
            audit(
                project,
                "images.attribute_set",
                user=user,
                attribute=("image." if on_image else "") + name,
                removed=value is None,
                images=changed_images,
            )
    return len(changed_images)
