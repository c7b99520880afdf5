"""Closing the post-calibration review's loop: each listed image is decided (accepted as labelled, or
resolved), or is waiting for a relabel the lead asked for; progress is counted.

``services.review`` finds the candidates; this module adds the lead's decisions and the relabel
requests to them, so corrected or accepted images leave the open list.
"""

from collections import Counter

from django.core.exceptions import ValidationError
from django.db import transaction

from ..models import Assignment, Image, Label, Phase, ReviewDecision
from .audit import audit
from .project_lifecycle import project_refuse_if_archived
from .review import review_candidate_ids, review_details, review_label_row, review_phases

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
    audit(phase.project_id, "review.decide", image, user=user, phase=phase.kind, state=state, note=note)
    return decision


def review_withdraw(*, phase: Phase, image: Image) -> int:
    """Withdraw the decision on an image: it is listed as open again. Returns how many were withdrawn."""
    project_refuse_if_archived(phase.project_id, "decide on its review")
    deleted, _ = ReviewDecision.objects.filter(phase=phase, image=image).delete()
    audit(phase.project_id, "review.withdraw", image, phase=phase.kind, n_withdrawn=deleted)
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
    labels = (
        Label.objects.filter(phase__in=review_phases(phase), is_repeat=False, image_id__in=image_ids)
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
    answered), ``relabelled`` (every request answered: look again), ``open``. Every listed image is
    counted; labels and reasons are read for the first ``limit`` only.
    """
    ids = review_candidate_ids(phase)
    decisions = {d.image_id: d for d in ReviewDecision.objects.filter(phase=phase).select_related("decided_by")}
    requests = _relabel_requests(phase)
    # An image the lead acted on stays listed after its labels changed (a correction, a relabel), so the
    # lead sees it through to a decision and the progress counts add up.
    listed = {i for i, _ in ids}
    acted_on = (set(decisions) | set(requests)) - listed
    entries = ids + [(i, 0) for i in sorted(acted_on)]

    def state_of(image_id: int) -> str:
        decision = decisions.get(image_id)
        if decision is not None:
            return decision.state
        relabel = requests.get(image_id)
        if relabel and relabel["waiting"]:
            return "waiting_relabel"
        return "relabelled" if relabel else "open"

    states = {i: state_of(i) for i, _ in entries}
    counts = Counter(states.values())
    order = {state: k for k, state in enumerate(STATES)}
    entries.sort(key=lambda e: order[states[e[0]]])  # stable: most reasons first within a state
    shown = [i for i, _ in entries[:limit]]
    details = review_details(phase, [i for i in shown if i in listed])
    gone = _no_longer_flagged(phase, {i for i in shown if i not in listed})
    details.update({c["image_id"]: c for c in gone})
    external = dict(Image.objects.filter(id__in=shown).values_list("id", "external_id"))
    candidates = []
    for image_id in shown:
        c = details.get(image_id) or {"image_id": image_id, "reasons": [], "labels": []}
        c["external_id"] = external.get(image_id)
        decision = decisions.get(image_id)
        c["relabel"] = requests.get(image_id)
        c["state"] = states[image_id]
        c["decision"] = (
            {
                "state": decision.state,
                "note": decision.note,
                "decided_by": decision.decided_by.username if decision.decided_by else None,
                "decided_at": decision.decided_at.isoformat(),
            }
            if decision is not None
            else None
        )
        c["state_text"] = STATE_TEXT[c["state"]]
        candidates.append(c)
    n_decided = counts["accepted"] + counts["resolved"]
    return {
        "n_candidates": len(entries),
        "progress": {
            **{state: counts.get(state, 0) for state in STATES},
            "decided": n_decided,
            "fraction_decided": (n_decided / len(entries)) if entries else None,
        },
        "candidates": candidates,
    }
