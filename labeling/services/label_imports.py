"""Importing labels made elsewhere (a generic labeling service, a spreadsheet) into a phase.

Imported answers are revisions with ``source="import"``. Unlike labels made in
FairTone, they may carry a non-adjacent pair: it is stored as given, marked
invalid, and listed by the post-calibration review.
"""

import csv
import io
import math
import uuid
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from ..models import Label, LabelRevision, Membership, Phase
from . import queue
from .audit import audit
from .imports.manifest import csv_delimiter
from .labels import Selection, selection_clean
from .phases import phase_repeat_pairs
from .project_lifecycle import project_refuse_if_archived

MAX_ROWS = 200_000
TRUE = {"1", "true", "yes", "y", "x"}


def _parse_tones(raw: str) -> list[int]:
    text = raw.strip().replace(" ", "")
    if not text:
        return []
    parts = [p for p in text.replace(";", "+").replace(",", "+").replace("/", "+").split("+") if p]
    return [int(p) for p in parts]


class _RowRejected(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class _Target:
    """The phase labels are imported into, and what a row is checked against."""

    phase: Phase
    user: object
    images: dict[str, int]  # external id -> image id (the project's images)
    in_phase: set[int]  # image ids of the phase
    labelers: dict[str, Membership]  # pseudonym -> labeler membership
    repeat_pairs: set[tuple[int, int]]  # (image, labeler) test-retest repeats of the phase
    seen: set[tuple[int, int]] = field(default_factory=set)  # (image, labeler) imported by earlier rows


@dataclass
class _Row:
    """A checked row: the label to create."""

    image_id: int
    labeler: Membership
    selection: Selection
    time_ms: int


def labels_import(*, phase: Phase, data: bytes, user) -> dict:
    """Import labels from CSV bytes: ``image_id, labeler, tones[, uncertain, skip_reason, time_spent_s]``.

    ``labeler`` is the labeler's pseudonym in the project; ``tones`` is ``4``,
    ``3+4`` (a pair) or empty with a ``skip_reason``. Each row is imported or
    rejected on its own with a reason; a row for a (image, labeler) that already
    has a label in the phase is rejected (labels are never overwritten).
    """
    project_refuse_if_archived(phase.project_id)
    if phase.status == Phase.Status.DRAFT:
        raise ValidationError("Open the phase (or choose its images) before importing labels into it.")
    reader = _reader(data)
    target = _target(phase, user)
    report = {"imported": 0, "rejected": 0, "rows": []}
    for n, raw in enumerate(reader, start=2):
        if n - 1 > MAX_ROWS:
            raise ValidationError(f"More than {MAX_ROWS} rows.")
        external_id = str(raw.get("image_id") or "")
        try:
            if None in raw:  # more cells than columns
                raise _RowRejected("this row has more cells than the header has columns")
            row = {(k or "").strip(): (v if isinstance(v, str) else "").strip() for k, v in raw.items()}
            external_id = row.get("image_id", "")
            checked = _check_row(target, row)
        except _RowRejected as rejected:
            report["rejected"] += 1
            report["rows"].append({"row": n, "image_id": external_id, "outcome": "rejected", "reason": rejected.reason})
            continue
        _create_label(target, checked)
        report["imported"] += 1
        report["rows"].append(
            {
                "row": n,
                "image_id": row["image_id"],
                "outcome": "imported",
                "reason": "" if checked.selection.is_valid else "invalid: non-adjacent pair (kept, flagged)",
            }
        )
    if report["imported"]:
        queue.precompute_schedule_on_commit(phase.project_id)
    audit(
        phase.project_id,
        "import.labels",
        phase,
        user=user,
        kind=phase.kind,
        imported=report["imported"],
        rejected=report["rejected"],
    )
    return report


def _reader(data: bytes) -> csv.DictReader:
    """The CSV rows, once the text and its header are checked."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"The file is not UTF-8 text (byte {exc.start}).") from None
    # Comma, semicolon (a spreadsheet where the comma is the decimal mark) or tab: the manifest's rule.
    reader = csv.DictReader(io.StringIO(text), delimiter=csv_delimiter(text.split("\n", 1)[0].rstrip("\r")))
    columns = [c.strip() for c in (reader.fieldnames or [])]
    missing = {"image_id", "labeler", "tones"} - set(columns)
    if missing:
        raise ValidationError(
            f"Missing column(s): {', '.join(sorted(missing))}; found: {', '.join(columns) or 'none'}."
        )
    return reader


def _target(phase: Phase, user) -> _Target:
    project = phase.project
    return _Target(
        phase=phase,
        user=user,
        images=dict(project.images.values_list("external_id", "id")),
        in_phase=set(phase.phase_images.values_list("image_id", flat=True)),
        labelers={m.pseudonym: m for m in project.memberships.filter(role="labeler")},
        repeat_pairs=phase_repeat_pairs(phase),
    )


def _check_row(target: _Target, row: dict[str, str]) -> _Row:
    """The label a row asks for, or ``_RowRejected`` with the reason."""
    phase = target.phase
    image_id = target.images.get(row["image_id"])
    labeler = target.labelers.get(row["labeler"])
    if image_id is None:
        raise _RowRejected(f"image {row['image_id']!r} is not in this project")
    if image_id not in target.in_phase:
        raise _RowRejected(f"image {row['image_id']!r} is not in {phase.get_kind_display()}")
    if labeler is None:
        raise _RowRejected(f"no labeler with the id {row['labeler']!r} in this project")
    if (image_id, labeler.id) in target.seen or Label.objects.filter(
        phase=phase, image_id=image_id, labeler=labeler
    ).exists():
        raise _RowRejected("this labeler already has a label for this image in this phase")
    try:
        tones = _parse_tones(row["tones"])
        # "4,5" is 4.5 seconds (a decimal comma, from a semicolon-separated file).
        seconds = float((row.get("time_spent_s") or "0").replace(",", "."))
        if not math.isfinite(seconds) or not 0 <= seconds <= 6 * 3600:
            raise ValueError
        selection = selection_clean(
            phase=phase,
            tones=tones,
            uncertain=row.get("uncertain", "").lower() in TRUE,
            skip_reason=row.get("skip_reason", ""),
            allow_invalid=True,
        )
    except ValueError:
        raise _RowRejected("tones must be whole numbers like 4 or 3+4; time_spent_s a number of seconds") from None
    except ValidationError as exc:
        raise _RowRejected(_messages(exc)) from None
    return _Row(image_id=image_id, labeler=labeler, selection=selection, time_ms=int(round(seconds * 1000)))


def _messages(exc: ValidationError) -> str:
    if hasattr(exc, "error_dict"):
        return " ".join(m for ms in exc.message_dict.values() for m in ms)
    return " ".join(exc.messages)


def _create_label(target: _Target, checked: _Row) -> None:
    """The label and its first revision (source "import"); the labeler's assignment, if any, is done."""
    phase, selection = target.phase, checked.selection
    assignment = phase.assignments.filter(labeler=checked.labeler, image_id=checked.image_id).first()
    if assignment is not None:
        is_repeat = assignment.is_repeat
    else:
        is_repeat = (checked.image_id, checked.labeler.id) in target.repeat_pairs
    answer = {
        "tone_low": selection.tone_low,
        "tone_high": selection.tone_high,
        "value": selection.value,
        "uncertain": selection.uncertain,
        "skip_reason": selection.skip_reason,
        "time_spent_ms": checked.time_ms,
    }
    with transaction.atomic():
        label = Label.objects.create(
            phase=phase,
            image_id=checked.image_id,
            labeler=checked.labeler,
            is_repeat=is_repeat,
            is_valid=selection.is_valid,
            n_revisions=1,
            **answer,
        )
        LabelRevision.objects.create(
            label=label,
            number=1,
            client_id=uuid.uuid4(),
            source=LabelRevision.Source.IMPORT,
            author=target.user,
            reason="imported",
            **answer,
        )
        if assignment is not None and assignment.kind == "label":
            if assignment.done_at is None:
                assignment.done_at = timezone.now()
                assignment.save(update_fields=["done_at"])
            Label.objects.filter(pk=label.pk).update(assignment=assignment)
    target.seen.add((checked.image_id, checked.labeler.id))
