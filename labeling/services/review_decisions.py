"""Closing the post-calibration review's loop: each listed image is decided (accepted as labelled, or
resolved), or is waiting for a relabel the lead asked for; progress is counted.

``services.review`` finds the candidates; this module adds the lead's decisions and the relabel
requests to them, so corrected or accepted images leave the open list.
"""

from collections import Counter

from django.core.exceptions import ValidationError
from django.db import transaction

from ..models import Assignment, Image, Label, Phase, ReviewDecision
from .project_lifecycle import project_refuse_if_archived
from .review import review_candidates, review_label_row

#: The states an image in the review can be in, in the order the page lists them.
STATES = ("open", "relabelled", "waiting_relabel", "accepted", "resolved")
STATE_TEXT = {
    "open": "to review",
    "relabelled": "relabelled: check again",
    "waiting_relabel": "waiting for a relabel",
    "accepted": "accepted as labelled",
    "resolved": "resolved",
}
NOTE_MAX = 2000


@transaction.atomic
def review_decide(*, phase: Phase, image: Image, state: str, user, note: str = "") -> ReviewDecision:
    """Record (or change) the lead's decision on an image of ``phase``'s review."""
    project_refuse_if_archived(phase.project_id, "decide on its review")
    if state not in ReviewDecision.State.values:
        raise ValidationError({"state": f"Choose one of: {', '.join(ReviewDecision.State.values)}."})
    if image.project_id != phase.project_id:
        raise ValidationError({"image": "This image is not in the phase's project."})
    note = (note or "").strip()
    if len(note) > NOTE_MAX:
        raise ValidationError({"note": f"Keep the note under {NOTE_MAX} characters."})
    decision, _ = ReviewDecision.objects.update_or_create(
        phase=phase, image=image, defaults={"state": state, "note": note, "decided_by": user}
    )
    return decision


def review_withdraw(*, phase: Phase, image: Image) -> int:
    """Withdraw the decision on an image: it is listed as open again. Returns how many were withdrawn."""
    project_refuse_if_archived(phase.project_id, "decide on its review")
    deleted, _ = ReviewDecision.objects.filter(phase=phase, image=image).delete()
    return deleted


def _relabel_requests(phase: Phase) -> dict[int, dict]:
    """Per image: the relabel requests of the project's post-calibration phase, open and answered."""
    rows = Assignment.objects.filter(phase__project_id=phase.project_id, phase__kind=Phase.Kind.POST_CALIBRATION)
    rows = rows.exclude(request_reason="").values_list("image_id", "labeler__pseudonym", "done_at", "request_reason")
    requests: dict[int, dict] = {}
    for image_id, pseudonym, done_at, reason in rows:
        entry = requests.setdefault(image_id, {"waiting": [], "answered": [], "reasons": []})
        entry["answered" if done_at else "waiting"].append(pseudonym)
        if reason not in entry["reasons"]:
            entry["reasons"].append(reason)
    return requests


def _no_longer_flagged(phase: Phase, image_ids: set[int]) -> list[dict]:
    """Review entries (the shape of ``review_candidates``') for images the rule no longer lists."""
    phases = (
        phase.project.phases.exclude(kind=Phase.Kind.POST_CALIBRATION)
        if phase.kind == Phase.Kind.POST_CALIBRATION
        else phase.project.phases.filter(pk=phase.pk)
    )
    labels = (
        Label.objects.filter(phase__in=phases, is_repeat=False, image_id__in=image_ids)
        .select_related("labeler", "phase")
        .order_by("image_id", "phase_id", "labeler__pseudonym")
    )
    entries: dict[int, dict] = {
        i: {"image_id": i, "reasons": ["no longer flagged: its labels changed since"], "labels": []}
        for i in sorted(image_ids)
    }
    for lab in labels:
        entries[lab.image_id]["labels"].append(review_label_row(lab))
    return list(entries.values())


def review_report(phase: Phase, *, limit: int = 500) -> dict:
    """The review's candidates with each one's state, decided images last, and the progress counts.

    States: ``accepted``/``resolved`` (the lead decided), ``waiting_relabel`` (sent back, not yet
    answered), ``relabelled`` (every request answered: look again), ``open``.
    """
    report = review_candidates(phase, limit=10**9)
    candidates = report["candidates"]
    decisions = {d.image_id: d for d in ReviewDecision.objects.filter(phase=phase).select_related("decided_by")}
    requests = _relabel_requests(phase)
    # An image the lead acted on stays listed after its labels changed (a correction, a relabel), so the
    # lead sees it through to a decision and the progress counts add up.
    listed = {c["image_id"] for c in candidates}
    acted_on = (set(decisions) | set(requests)) - listed
    if acted_on:
        candidates.extend(_no_longer_flagged(phase, acted_on))
    external = dict(Image.objects.filter(id__in=[c["image_id"] for c in candidates]).values_list("id", "external_id"))
    for c in candidates:
        c["external_id"] = external.get(c["image_id"])
        decision = decisions.get(c["image_id"])
        relabel = requests.get(c["image_id"])
        c["relabel"] = relabel
        if decision is not None:
            c["state"] = decision.state
            c["decision"] = {
                "state": decision.state,
                "note": decision.note,
                "decided_by": decision.decided_by.username if decision.decided_by else None,
                "decided_at": decision.decided_at.isoformat(),
            }
        else:
            c["decision"] = None
            if relabel and relabel["waiting"]:
                c["state"] = "waiting_relabel"
            elif relabel:
                c["state"] = "relabelled"
            else:
                c["state"] = "open"
        c["state_text"] = STATE_TEXT[c["state"]]
    counts = Counter(c["state"] for c in candidates)
    order = {state: k for k, state in enumerate(STATES)}
    candidates.sort(key=lambda c: order[c["state"]])
    n_decided = counts["accepted"] + counts["resolved"]
    return {
        "n_candidates": len(candidates),
        "progress": {
            **{state: counts.get(state, 0) for state in STATES},
            "decided": n_decided,
            "fraction_decided": (n_decided / len(candidates)) if candidates else None,
        },
        "candidates": candidates[:limit],
    }
