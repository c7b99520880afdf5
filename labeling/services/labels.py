"""Submitting, changing and correcting labels. Nothing is ever overwritten.

Every answer is an immutable ``LabelRevision``; ``Label`` mirrors the latest.
Submissions are idempotent on the client's own id (``client_id``): a retried
or doubled submit returns the revision stored the first time.
"""

import functools
import uuid
from dataclasses import dataclass

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from ..models import Assignment, Image, Label, LabelRevision, Membership, Phase, Reflection
from . import queue, submit_rules
from .audit import audit
from .project_lifecycle import project_refuse_if_archived
from .submit_rules import Submit, clean_client_info, scale_size

BIAS_FACTORS = {
    "facial_features": "Facial features associated with an ethnicity",
    "background": "Background objects or colours",
    "lighting": "Lighting, shadows or white balance",
    "recency": "A run of similar tones affecting the next choice",
    "repeated_subject": "The same person labelled the same way each time",
    "clothing_hair": "Clothing, hair or make-up",
}


@dataclass(frozen=True)
class Selection:
    tone_low: int | None
    tone_high: int | None
    uncertain: bool
    skip_reason: str

    @property
    def value(self) -> float | None:
        if self.tone_low is None:
            return None
        if self.tone_high is None:
            return float(self.tone_low)
        if self.tone_high != self.tone_low + 1:
            return None  # a non-adjacent pair is invalid
        return (self.tone_low + self.tone_high) / 2

    @property
    def is_valid(self) -> bool:
        return self.tone_low is None or self.tone_high is None or self.tone_high == self.tone_low + 1


#: The number of tones of a project's scale (``submit_rules.scale_size``).
_n_tones = scale_size
#: What is kept of the client's description of itself (``submit_rules.clean_client_info``).
_clean_client_info = clean_client_info


def selection_clean(
    *, phase: Phase, tones: list | None, uncertain: bool = False, skip_reason: str = "", allow_invalid: bool = False
) -> Selection:
    """Check a selection against the project's scale and options: the ``selection`` rules of
    ``services.submit_rules`` (``allow_invalid``: labels made elsewhere, without the pair rules)."""
    project = phase.project
    submit = Submit(
        phase=phase,
        project=project,
        tones=list(tones or []),
        uncertain=bool(uncertain),
        skip_reason=(skip_reason or "").strip(),
    )
    submit_rules.enforce(submit, "selection", lenient=allow_invalid)
    return _selection_of(submit)


def _selection_of(submit: Submit) -> Selection:
    """The selection an answer that passed the ``selection`` rules stores (a skip keeps "uncertain" only
    where the project offers it; a tone given twice is one tone)."""
    if submit.skip_reason:
        return Selection(None, None, submit.uncertain and submit.project.offer_uncertain, submit.skip_reason)
    values = submit.values
    return Selection(values[0], values[1] if len(values) == 2 else None, submit.uncertain, "")


def _parse_tone_order(order) -> list[int]:
    try:
        return [int(x) for x in (order or [])]
    except (TypeError, ValueError):
        raise ValidationError({"tone_order": "The tone order is a list of tone numbers."}) from None


#: The labeler's own line of history: what they answered (and see as theirs). A correction is the lead's.
OWN_SOURCES = (
    LabelRevision.Source.LABELER,
    LabelRevision.Source.CHANGE,
    LabelRevision.Source.RELABEL,
    LabelRevision.Source.IMPORT,
)


def revision_counts(*, source: str, corrected: bool) -> bool:
    """Whether a new revision becomes the label's current answer (the one consensus and releases use).

    The rule: revisions count in order, except that once a lead has corrected a label, the labeler's
    own later changes (``labeler``/``change``) are kept in their line of history but do not replace the
    correction. A later correction, or the answer to a relabel the lead asked for, counts as usual.
    ``corrected``: the label already has a correction.
    """
    return not (corrected and source in (LabelRevision.Source.LABELER, LabelRevision.Source.CHANGE))


def _apply_revision(label: Label, revision: LabelRevision, *, counts: bool = True) -> None:
    if counts:
        label.tone_low = revision.tone_low
        label.tone_high = revision.tone_high
        label.value = revision.value
        label.uncertain = revision.uncertain
        label.skip_reason = revision.skip_reason
        label.is_valid = revision.tone_high is None or revision.tone_high == (revision.tone_low or 0) + 1
    label.n_revisions = revision.number
    label.time_spent_ms = (label.time_spent_ms or 0) + revision.time_spent_ms
    label.save()


def _existing_revision(client_id, user) -> LabelRevision | None:
    revision = LabelRevision.objects.select_related("label").filter(client_id=client_id).order_by().first()
    if revision is not None and revision.author_id != getattr(user, "id", None):
        raise ValidationError({"client_id": "This id was used for another submission."})
    return revision


def _then_precompute(function):
    """A stored answer (not a replay) has the worker precompute the lead's pages once it commits."""

    @functools.wraps(function)
    def wrapper(*, phase: Phase, **kwargs) -> LabelRevision:
        revision = function(phase=phase, **kwargs)
        if not getattr(revision, "replayed", False):
            queue.precompute_schedule_on_commit(phase.project_id)
        return revision

    return wrapper


@_then_precompute
def label_submit(
    *,
    phase: Phase,
    labeler: Membership,
    image_id: int,
    client_id: uuid.UUID | str,
    tones: list | None = None,
    uncertain: bool = False,
    skip_reason: str = "",
    time_spent_ms: int = 0,
    tone_order: list | None = None,
    client_info: dict | None = None,
) -> LabelRevision:
    """Store a labeler's answer for an image of their queue (or a changed answer).

    Idempotent on ``client_id``. The phase must be open and the image assigned to
    this labeler in it. A first answer creates the label; a later one (going back
    to change an answer) adds a revision. A relabel requested by a lead adds a
    revision to the original label of the earlier phase. A stored answer (not a replay) has
    the worker precompute the lead's pages (``services.precompute``; nothing with jobs run
    in-process).
    """
    try:
        client_id = uuid.UUID(str(client_id))
    except ValueError:
        raise ValidationError({"client_id": "Send a UUID as client_id."}) from None
    user = labeler.user
    # The submit's rules are services.submit_rules' (the fast statement is built from the same table), in
    # its order of groups: who asks, the phase, the time, the answer, the tone order; the image's
    # assignment below, once it is locked.
    submit = Submit(
        phase=phase,
        project=phase.project,
        user=user,
        membership=labeler,
        tones=list(tones or []),
        uncertain=bool(uncertain),
        skip_reason=(skip_reason or "").strip(),
    )
    submit_rules.enforce(submit, "requester")
    # A replay of a stored submit is found by its client_id, but only when needed:
    # when the checks below refuse it (e.g. the phase closed since) or when the
    # insert hits the unique client_id. That saves a query on every first submit.
    try:
        submit_rules.enforce(submit, "phase")
        try:
            submit.time_spent_ms = int(time_spent_ms or 0)
        except (TypeError, ValueError):
            raise ValidationError({"time_spent_ms": "A whole number of milliseconds."}) from None
        submit_rules.enforce(submit, "time")
        time_spent_ms = submit.time_spent_ms
        # The answer's rules see the whole submit here (selection_clean checks a lead's correction or an import).
        submit_rules.enforce(submit, "selection")
        selection = _selection_of(submit)
        submit.tone_order = order = _parse_tone_order(tone_order)
        submit_rules.enforce(submit, "tone_order")
    except ValidationError:
        existing = _existing_revision(client_id, user)
        if existing is not None:
            existing.replayed = True
            return existing
        raise
    info = _clean_client_info(client_info)
    # A few ORM queries in one transaction. A labeler's plain first answer through the API on PostgreSQL
    # never comes here: services.submit_fast stores it in one statement (bench/bench_soak.py measures it).
    try:
        with transaction.atomic():
            assignment = (
                Assignment.objects.select_for_update(of=("self",))
                .filter(phase=phase, labeler=labeler, image_id=image_id)
                .order_by()
                .first()
            )
            submit.assigned = assignment is not None
            try:
                submit_rules.enforce(submit, "assignment")
            except PermissionDenied:
                existing = _existing_revision(client_id, user)
                if existing is not None:
                    existing.replayed = True
                    return existing
                raise
            assert assignment is not None  # the rule image_assigned
            label = None
            if assignment.kind == Assignment.Kind.RELABEL:
                label = Label.objects.select_for_update().get(pk=assignment.relabel_of_id)
                source, reason = LabelRevision.Source.RELABEL, assignment.request_reason
            else:
                source, reason = LabelRevision.Source.LABELER, ""
                # A label exists only for an answered (or re-requested) assignment.
                if assignment.done_at is not None or assignment.requested_by_id is not None:
                    label = Label.objects.select_for_update().filter(assignment=assignment).order_by().first()
                    if label is not None:
                        source = LabelRevision.Source.CHANGE
            if label is None:
                label = Label.objects.create(
                    phase=phase,
                    image_id=image_id,
                    labeler=labeler,
                    assignment=assignment,
                    is_repeat=assignment.is_repeat,
                    tone_low=selection.tone_low,
                    tone_high=selection.tone_high,
                    value=selection.value,
                    uncertain=selection.uncertain,
                    skip_reason=selection.skip_reason,
                    is_valid=selection.is_valid,
                    n_revisions=1,
                    time_spent_ms=time_spent_ms,
                )
                number = 1
            else:
                number = (label.revisions.order_by("-number").values_list("number", flat=True).first() or 0) + 1
            revision = LabelRevision.objects.create(
                label=label,
                number=number,
                client_id=client_id,
                source=source,
                tone_low=selection.tone_low,
                tone_high=selection.tone_high,
                value=selection.value,
                uncertain=selection.uncertain,
                skip_reason=selection.skip_reason,
                time_spent_ms=time_spent_ms,
                tone_order=order,
                client_info=info,
                author=user,
                reason=reason,
            )
            if number > 1:
                corrected = label.revisions.filter(source=LabelRevision.Source.CORRECTION).exists()
                _apply_revision(label, revision, counts=revision_counts(source=source, corrected=corrected))
            if assignment.done_at is None:
                Assignment.objects.filter(pk=assignment.pk).update(done_at=timezone.now())
    except IntegrityError:
        # A concurrent submit with the same client_id won the race: return its revision.
        existing = _existing_revision(client_id, user)
        if existing is None:
            raise
        existing.replayed = True
        return existing
    return revision


@transaction.atomic
def label_correct(
    *,
    label: Label,
    user,
    reason: str,
    tones: list | None = None,
    uncertain: bool = False,
    skip_reason: str = "",
    client_id=None,
) -> LabelRevision:
    """A lead records a correction as a new revision with a reason; the labeler's answer stays in history."""
    project_refuse_if_archived(label.phase.project_id)
    reason = (reason or "").strip()
    if not reason:
        raise ValidationError({"reason": "Say why the label is corrected."})
    label = Label.objects.select_for_update().select_related("phase__project").get(pk=label.pk)
    selection = selection_clean(phase=label.phase, tones=tones, uncertain=uncertain, skip_reason=skip_reason)
    last = label.revisions.order_by("-number").values_list("number", flat=True).first() or 0
    revision = LabelRevision.objects.create(
        label=label,
        number=last + 1,
        client_id=client_id or uuid.uuid4(),
        source=LabelRevision.Source.CORRECTION,
        tone_low=selection.tone_low,
        tone_high=selection.tone_high,
        value=selection.value,
        uncertain=selection.uncertain,
        skip_reason=selection.skip_reason,
        author=user,
        reason=reason,
    )
    _apply_revision(label, revision)
    queue.precompute_schedule_on_commit(label.phase.project_id)
    audit(
        label.phase.project,
        "label.correct",
        label,
        user=user,
        image_id=label.image_id,
        labeler=label.labeler.pseudonym,
        reason=reason,
    )
    return revision


@transaction.atomic
def relabel_request(*, image: Image, labelers: list[Membership], reason: str, user) -> list[Assignment]:
    """Send an image back to chosen labelers in the post-calibration phase.

    Each labeler's latest label of the image (from any earlier phase) gets a new
    revision when they answer; if they never labelled it, a fresh label is made.
    """
    project_refuse_if_archived(image.project_id)
    reason = (reason or "").strip()
    if not reason:
        raise ValidationError({"reason": "Say why the image is sent back."})
    post = image.project.phases.select_for_update().get(kind=Phase.Kind.POST_CALIBRATION)
    if post.status != Phase.Status.OPEN:
        raise ValidationError("Open the post-calibration phase to send images back for relabeling.")
    created = []
    for membership in labelers:
        if membership.project_id != image.project_id or membership.role != Membership.Role.LABELER:
            raise ValidationError(f"{membership.pseudonym} is not a labeler of this project.")
        if not membership.is_active:
            # Their requests could never be answered, and the image would stay out of the next release.
            raise ValidationError(
                {
                    "labeler_ids": f"{membership.pseudonym} is deactivated in this project: choose an active labeler "
                    "(or reactivate them on the team page)."
                }
            )
        if post.assignments.filter(labeler=membership, image=image, done_at__isnull=True).exists():
            continue
        original = (
            Label.objects.filter(image=image, labeler=membership, is_repeat=False)
            .exclude(phase=post)
            .order_by("-phase__id")
            .first()
        )
        position = (post.assignments.filter(labeler=membership).aggregate(m=Max("position"))["m"] or 0) + 1
        post.participants.get_or_create(labeler=membership, defaults={"shuffle_seed": 0})
        assignment, _ = Assignment.objects.update_or_create(
            phase=post,
            labeler=membership,
            image=image,
            defaults={
                "position": position,
                "kind": Assignment.Kind.RELABEL if original else Assignment.Kind.LABEL,
                "relabel_of": original,
                "request_reason": reason,
                "requested_by": user,
                "done_at": None,
            },
        )
        created.append(assignment)
    audit(
        image.project_id,
        "relabel.request",
        image,
        user=user,
        labelers=[a.labeler.pseudonym for a in created],
        reason=reason,
    )
    return created


REFLECTION_TEXTS = ("unclear_instructions", "biases_other", "mindfulness_plan")


def reflection_is_skipped(reflection: Reflection) -> bool:
    """A reflection with no answer at all: the labeler chose to skip it (an empty one is never saved otherwise)."""
    return (
        reflection.minutes_taken is None
        and not reflection.biases_noticed
        and not any((getattr(reflection, key) or "").strip() for key in REFLECTION_TEXTS)
    )


def reflection_submit(*, phase: Phase, labeler: Membership, skipped: bool = False, **fields) -> Reflection:
    """Save a labeler's reflection. It needs at least one answer, unless the labeler explicitly skips
    it (``skipped``): then it is recorded with no answers, and the lead sees it as skipped."""
    project_refuse_if_archived(phase.project_id, "answer its reflections")
    if skipped:
        fields = {}
    if not phase.is_calibration:
        raise ValidationError("Reflections are asked for after calibration phases.")
    if not phase.assignments.filter(labeler=labeler).exists():
        raise PermissionDenied("You did not take part in this phase.")
    biases = fields.get("biases_noticed") or []
    if not isinstance(biases, list) or any(not isinstance(b, str) or b not in BIAS_FACTORS for b in biases):
        raise ValidationError({"biases_noticed": f"Choose among: {', '.join(BIAS_FACTORS)}."})
    minutes = fields.get("minutes_taken")
    if minutes is not None and minutes != "":
        try:
            minutes = int(minutes)
        except (TypeError, ValueError):
            raise ValidationError({"minutes_taken": "A whole number of minutes."}) from None
        if not 0 <= minutes <= 10000:
            raise ValidationError({"minutes_taken": "Out of range."})
    else:
        minutes = None
    texts = {}
    for key in ("unclear_instructions", "biases_other", "mindfulness_plan"):
        text = str(fields.get(key) or "")
        if len(text) > 5000:
            raise ValidationError({key: "At most 5000 characters."})
        texts[key] = text
    if not skipped and minutes is None and not biases and not any(t.strip() for t in texts.values()):
        raise ValidationError(
            "Answer at least one question, or choose “Skip the reflection” to say you have nothing to add."
        )
    reflection, _ = Reflection.objects.update_or_create(
        phase=phase, labeler=labeler, defaults={"minutes_taken": minutes, "biases_noticed": biases, **texts}
    )
    return reflection
