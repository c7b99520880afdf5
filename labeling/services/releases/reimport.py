"""A release (made with its images) imported into a new project: its images, subjects, labelers and labels.

The round trip of a release: a team receiving the zip can recompute every consensus statistic from it,
and a project restored from it gives the statistics of the project it came from. What comes in:

* the images of ``imagefolder/`` (through the image import, so every image check applies), with their
  external id, subject id, subject attributes and box (a person in a photo of several) from
  ``imagefolder/metadata.jsonl``;
* one labeler membership per pseudonym of ``labels.parquet``, on a new account that cannot sign in
  (a lead can set a password later): the release knows nobody's name;
* every label of ``labels.parquet`` as it stands in the release (its current revision), in the phase it
  was made in, as an imported revision; repeats stay repeats. The phases that hold labels are closed.

All or nothing: any problem (not a release, no images, a scale that differs, a project that already has
images or labels, a rejected image or label) raises ``ValidationError`` listing what was wrong, and
nothing is kept.
"""

from __future__ import annotations

import io
import json
import uuid
import zipfile
from typing import IO, Any

import pyarrow.parquet as pq
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from ...models import ImportBatch, Label, LabelRevision, Membership, Phase, PhaseImage, Project
from ..imports.manifest import ManifestRow
from ..imports.report import ImportRefused, report_start, run_import
from ..imports.rows import import_rows
from ..imports.sources import ArchiveSource, MissingFile, check_archive
from .build import RELEASE_FORMAT_VERSION
from .tables import FIXED_IMAGE_COLUMNS

#: At most this many problems are listed in the error.
MAX_PROBLEMS = 20


def _read(source: ArchiveSource, path: str, what: str) -> bytes:
    try:
        return source.read(path)
    except MissingFile:
        raise ValidationError(f"The archive has no {what} ({path}).") from None


def _top_folder(source: ArchiveSource) -> str:
    tops = {path.split("/", 1)[0] for path in source.members}
    manifests = [f"{top}/manifest.json" for top in sorted(tops) if f"{top}/manifest.json" in source.members]
    if len(manifests) != 1:
        raise ValidationError("This is not a FairTone release: no single <release>/manifest.json in the archive.")
    return manifests[0].split("/", 1)[0]


def _check_project(project: Project, info: dict[str, Any]) -> None:
    problems = []
    if project.images.exists():
        problems.append("The project already has images: import a release into a new, empty project.")
    if Label.objects.filter(phase__project=project).exists():
        problems.append("The project already has labels.")
    scale = info.get("scale") or {}
    ours = [(t.position, t.code) for t in project.scale.tones.all()]
    theirs = [(t.get("position"), t.get("code")) for t in scale.get("tones", [])]
    if ours != theirs:
        problems.append(
            f"The release uses the scale {scale.get('name', '?')!r}; this project uses {project.scale.name!r} "
            "(create the project with the release's scale)."
        )
    if problems:
        raise ValidationError(problems)


def _subject_columns(images_table) -> dict[str, str]:
    """Subject attribute columns of the images table -> the attribute's name (a name that clashed with a
    fixed column was written with the prefix ``subject_``)."""
    names = {}
    for column in images_table.column_names:
        if column in FIXED_IMAGE_COLUMNS:
            continue
        original = column.removeprefix("subject_")
        names[column] = original if original in FIXED_IMAGE_COLUMNS else column
    return names


def release_import(*, project: Project, fileobj: IO[bytes], user) -> dict[str, Any]:
    """Import a release zip (made with its images) into ``project``, which must be new and empty.

    Returns
    -------
    dict
        ``images``, ``labelers``, ``labels`` (counts), ``phases`` (kind -> labels) and ``batch`` (the
        image import's id, whose report lists every image).

    Raises
    ------
    ValidationError
        With every problem found; nothing is kept.
    """
    try:
        archive = zipfile.ZipFile(fileobj)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        raise ValidationError("The file is not a readable zip archive.") from None
    with archive:
        try:
            check_archive(archive)
        except ImportRefused as refused:
            raise ValidationError(f"The archive is refused: {refused.reason}.") from None
        source = ArchiveSource(archive)
        top = _top_folder(source)
        try:
            manifest = json.loads(_read(source, f"{top}/manifest.json", "manifest"))
            info = manifest["release"]
            if not str(info.get("code_version", "")).startswith(RELEASE_FORMAT_VERSION.split(".")[0]):
                raise KeyError
        except (ValueError, KeyError, TypeError):
            raise ValidationError("manifest.json is not the manifest of a FairTone release.") from None
        if f"{top}/imagefolder/metadata.jsonl" not in source.members:
            raise ValidationError(
                "This release holds no images (a labels-only release): make a release with images to import it."
            )
        _check_project(project, info)
        images = pq.read_table(io.BytesIO(_read(source, f"{top}/images.parquet", "images table")))
        labels = pq.read_table(io.BytesIO(_read(source, f"{top}/labels.parquet", "labels table"))).to_pylist()
        metadata = _read(source, f"{top}/imagefolder/metadata.jsonl", "image list")
        attributes = _subject_columns(images)
        with transaction.atomic():
            result = _import(project, user, source, top, metadata, attributes, labels)
    return result


def _import(project, user, source, top, metadata, attributes, labels) -> dict[str, Any]:
    records = [json.loads(line) for line in metadata.splitlines()]
    rows = []
    for number, record in enumerate(records, start=1):
        cells = {
            "file": f"{top}/imagefolder/{record['file_name']}",
            "image_id": record["external_id"],
            "subject_id": record.get("subject_id") or None,
        }
        if record.get("box_x") is not None:  # one person's box in a photo of several
            cells.update({name: record[f"box_{name}"] for name in ("x", "y", "width", "height")})
        if record.get("subject_id"):
            cells.update(
                {name: record[column] for column, name in attributes.items() if record.get(column) is not None}
            )
        rows.append(ManifestRow(number=number, cells=cells))
    report = report_start(project, ImportBatch.Kind.ZIP, f"release {top}", user)
    batch = run_import(report, lambda: import_rows(report, project=project, rows=rows, source=source))
    problems = [f"{item.filename}: {item.reason}" for item in batch.items.exclude(outcome="imported")]
    if batch.status != ImportBatch.Status.DONE:
        problems.insert(0, batch.error or "the image import failed")
    if problems:
        raise ValidationError(problems[:MAX_PROBLEMS])
    image_of = {}  # the release's image id -> the new image's id
    new_ids = dict(project.images.values_list("external_id", "id"))
    for record in records:
        image_of[record["image_id"]] = new_ids[record["external_id"]]

    members = _labelers(project, sorted({row["labeler"] for row in labels}))
    phases = {phase.kind: phase for phase in project.phases.all()}
    problems = []
    for row in labels:
        if row["image_id"] not in image_of:
            problems.append(f"label {row['label_id']}: its image {row['image_id']} is not in imagefolder/")
        if row["phase"] not in phases:
            problems.append(f"label {row['label_id']}: unknown phase {row['phase']!r}")
    if problems:
        raise ValidationError(problems[:MAX_PROBLEMS])
    counts = _labels(labels, phases, members, image_of, user)
    now = timezone.now()
    for kind, n in counts.items():
        if n:
            Phase.objects.filter(pk=phases[kind].pk).update(
                status=Phase.Status.CLOSED, opened_at=now, closed_at=now, selection_method="import"
            )
    return {
        "images": len(image_of),
        "labelers": len(members),
        "labels": sum(counts.values()),
        "phases": {kind: n for kind, n in counts.items() if n},
        "batch": batch.pk,
    }


def _labelers(project: Project, pseudonyms: list[str]) -> dict[str, Membership]:
    """One labeler membership per pseudonym, on a new account that cannot sign in."""
    User = get_user_model()
    members = {}
    for pseudonym in pseudonyms:
        username = f"p{project.pk}-{pseudonym}"[:150]
        if User.objects.filter(username=username).exists():
            username = f"p{project.pk}-{uuid.uuid4().hex[:12]}"
        account = User(username=username)
        account.set_unusable_password()
        account.save()
        members[pseudonym] = Membership.objects.create(
            project=project, user=account, role=Membership.Role.LABELER, pseudonym=pseudonym
        )
    return members


def _labels(labels, phases, members, image_of, user) -> dict[str, int]:
    counts = dict.fromkeys(phases, 0)
    phase_images = set()
    for row in labels:
        phase_images.add((phases[row["phase"]].pk, image_of[row["image_id"]], bool(row["is_repeat"])))
    PhaseImage.objects.bulk_create(
        [PhaseImage(phase_id=p, image_id=i, is_repeat=r) for p, i, r in sorted(phase_images)],
        ignore_conflicts=True,
    )
    created = []
    for row in sorted(labels, key=lambda r: r["label_id"]):
        tones = list(row["tones"] or [])
        answer = {
            "tone_low": tones[0] if tones else None,
            "tone_high": tones[1] if len(tones) > 1 else None,
            "value": row["value"],
            "uncertain": bool(row["uncertain"]),
            "skip_reason": row["skip_reason"] or "",
            "time_spent_ms": int(round((row["time_spent_s"] or 0) * 1000)),
        }
        label = Label(
            phase=phases[row["phase"]],
            image_id=image_of[row["image_id"]],
            labeler=members[row["labeler"]],
            is_repeat=bool(row["is_repeat"]),
            is_valid=bool(row["valid"]) if row["valid"] is not None else True,
            n_revisions=1,
            **answer,
        )
        created.append((label, answer, row))
        counts[row["phase"]] += 1
    Label.objects.bulk_create([label for label, _, _ in created])
    LabelRevision.objects.bulk_create(
        [
            LabelRevision(
                label=label,
                number=1,
                client_id=uuid.uuid4(),
                source=LabelRevision.Source.IMPORT,
                author=user,
                reason="imported from a release",
                tone_order=list(row["tone_order"] or []),
                **answer,
            )
            for label, answer, row in created
        ]
    )
    return counts
