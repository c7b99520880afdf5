"""Importing labels made elsewhere (a generic labeling service, a spreadsheet) into a phase.

Imported answers are revisions with ``source="import"``. Unlike labels made in
FairTone, they may carry a non-adjacent pair: it is stored as given, marked
invalid, and listed by the post-calibration review.
"""

import csv
import io
import math
import uuid

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from ..models import Label, LabelRevision, Phase
from .labels import selection_clean

MAX_ROWS = 200_000
TRUE = {"1", "true", "yes", "y", "x"}


def _parse_tones(raw: str) -> list[int]:
    text = raw.strip().replace(" ", "")
    if not text:
        return []
    parts = [p for p in text.replace(";", "+").replace(",", "+").replace("/", "+").split("+") if p]
    return [int(p) for p in parts]


def labels_import(*, phase: Phase, data: bytes, user) -> dict:
    """Import labels from CSV bytes: ``image_id, labeler, tones[, uncertain, skip_reason, time_spent_s]``.

    ``labeler`` is the labeler's pseudonym in the project; ``tones`` is ``4``,
    ``3+4`` (a pair) or empty with a ``skip_reason``. Each row is imported or
    rejected on its own with a reason; a row for a (image, labeler) that already
    has a label in the phase is rejected (labels are never overwritten).
    """
    if phase.status == Phase.Status.DRAFT:
        raise ValidationError("Open the phase (or choose its images) before importing labels into it.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"The file is not UTF-8 text (byte {exc.start}).") from None
    reader = csv.DictReader(io.StringIO(text))
    columns = [c.strip() for c in (reader.fieldnames or [])]
    missing = {"image_id", "labeler", "tones"} - set(columns)
    if missing:
        raise ValidationError(
            f"Missing column(s): {', '.join(sorted(missing))}; found: {', '.join(columns) or 'none'}."
        )
    project = phase.project
    images = dict(project.images.values_list("external_id", "id"))
    in_phase = set(phase.phase_images.values_list("image_id", flat=True))
    labelers = {m.pseudonym: m for m in project.memberships.filter(role="labeler")}
    report = {"imported": 0, "rejected": 0, "rows": []}
    from .phases import _repeat_pairs

    repeat_pairs = _repeat_pairs(phase)
    seen = set()
    for n, row in enumerate(reader, start=2):
        if n - 1 > MAX_ROWS:
            raise ValidationError(f"More than {MAX_ROWS} rows.")
        if None in row:  # more cells than columns
            report["rejected"] += 1
            report["rows"].append(
                {
                    "row": n,
                    "image_id": str(row.get("image_id") or ""),
                    "outcome": "rejected",
                    "reason": "this row has more cells than the header has columns",
                }
            )
            continue
        row = {(k or "").strip(): (v if isinstance(v, str) else "").strip() for k, v in row.items()}

        def reject(reason: str, n=n, row=row) -> None:
            report["rejected"] += 1
            report["rows"].append(
                {"row": n, "image_id": row.get("image_id", ""), "outcome": "rejected", "reason": reason}
            )

        image_id = images.get(row["image_id"])
        labeler = labelers.get(row["labeler"])
        if image_id is None:
            reject(f"image {row['image_id']!r} is not in this project")
            continue
        if image_id not in in_phase:
            reject(f"image {row['image_id']!r} is not in {phase.get_kind_display()}")
            continue
        if labeler is None:
            reject(f"no labeler with the id {row['labeler']!r} in this project")
            continue
        if (image_id, labeler.id) in seen or Label.objects.filter(
            phase=phase, image_id=image_id, labeler=labeler
        ).exists():
            reject("this labeler already has a label for this image in this phase")
            continue
        try:
            tones = _parse_tones(row["tones"])
            seconds = float(row.get("time_spent_s") or 0)
            if not math.isfinite(seconds) or not 0 <= seconds <= 6 * 3600:
                raise ValueError
            time_ms = int(round(seconds * 1000))
            selection = selection_clean(
                phase=phase,
                tones=tones,
                uncertain=row.get("uncertain", "").lower() in TRUE,
                skip_reason=row.get("skip_reason", ""),
                allow_invalid=True,
            )
        except ValueError:
            reject("tones must be whole numbers like 4 or 3+4; time_spent_s a number of seconds")
            continue
        except ValidationError as exc:
            reject(
                " ".join(m for ms in exc.message_dict.values() for m in ms)
                if hasattr(exc, "error_dict")
                else " ".join(exc.messages)
            )
            continue
        assignment = phase.assignments.filter(labeler=labeler, image_id=image_id).first()
        if assignment is not None:
            is_repeat = assignment.is_repeat
        else:
            is_repeat = (image_id, labeler.id) in repeat_pairs
        with transaction.atomic():
            label = Label.objects.create(
                phase=phase,
                image_id=image_id,
                labeler=labeler,
                is_repeat=is_repeat,
                tone_low=selection.tone_low,
                tone_high=selection.tone_high,
                value=selection.value,
                uncertain=selection.uncertain,
                skip_reason=selection.skip_reason,
                is_valid=selection.is_valid,
                n_revisions=1,
                time_spent_ms=time_ms,
            )
            LabelRevision.objects.create(
                label=label,
                number=1,
                client_id=uuid.uuid4(),
                source=LabelRevision.Source.IMPORT,
                tone_low=selection.tone_low,
                tone_high=selection.tone_high,
                value=selection.value,
                uncertain=selection.uncertain,
                skip_reason=selection.skip_reason,
                time_spent_ms=time_ms,
                author=user,
                reason="imported",
            )
            if assignment is not None and assignment.kind == "label":
                if assignment.done_at is None:
                    assignment.done_at = timezone.now()
                    assignment.save(update_fields=["done_at"])
                Label.objects.filter(pk=label.pk).update(assignment=assignment)
        seen.add((image_id, labeler.id))
        report["imported"] += 1
        report["rows"].append(
            {
                "row": n,
                "image_id": row["image_id"],
                "outcome": "imported",
                "reason": "" if selection.is_valid else "invalid: non-adjacent pair (kept, flagged)",
            }
        )
    return report
