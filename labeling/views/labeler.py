"""The labeler's pages: the labeling screen and the reflection form."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render

from ..models import Membership, Phase
from ..selectors import labeler_progress
from ..services.labels import BIAS_FACTORS, reflection_is_skipped, reflection_submit
from .access import page_access


def _labeler_phase(request, pk: int) -> tuple[Phase, Membership]:
    """The phase, for a labeler who takes part in it (anyone else: 404)."""
    phase = get_object_or_404(Phase.objects.select_related("project__scale"), pk=pk)
    m = page_access(request, phase.project, Membership.Role.LABELER)
    if not phase.assignments.filter(labeler=m).exists():
        raise Http404
    return phase, m


@login_required
def label_page(request, pk: int):
    phase, m = _labeler_phase(request, pk)
    project = phase.project
    tones = [
        {"position": t.position, "code": t.code, "name": t.name, "hex": t.hex_colour} for t in project.ordered_tones()
    ]
    config = {
        "phaseId": phase.id,
        "phaseKind": phase.kind,
        "phaseStatus": phase.status,
        "isCalibration": phase.is_calibration,
        "tones": tones,
        "toneOrder": [t["position"] for t in tones],
        "allowPairs": project.allow_adjacent_pairs,
        "offerUncertain": project.offer_uncertain,
        "skipReasons": project.skip_reasons,
        "api": {
            "next": f"/api/phases/{phase.id}/next/",
            "labels": f"/api/phases/{phase.id}/labels/",
        },
        "reflectionUrl": f"/phases/{phase.id}/reflection/",
        "homeUrl": "/",
    }
    examples = []
    by_tone: dict[int, list] = {}
    for example in project.tone_examples.select_related("tone", "image").order_by("id"):
        # An example that is one person's box in a group photo is shown with the box outlined.
        by_tone.setdefault(example.tone.position, []).append(example.image)
    for t in tones:
        if t["position"] in by_tone:
            examples.append({"tone": t, "images": by_tone[t["position"]]})
    return render(
        request,
        "labeling/label.html",
        {"phase": phase, "project": project, "membership": m, "examples": examples, "config": config},
    )


@login_required
def reflection_page(request, pk: int):
    phase, m = _labeler_phase(request, pk)
    if not phase.is_calibration:
        raise Http404
    existing = phase.reflections.filter(labeler=m).first()
    errors = {}
    if request.method == "POST":
        data = {
            "minutes_taken": request.POST.get("minutes_taken") or None,
            "unclear_instructions": request.POST.get("unclear_instructions", ""),
            "biases_noticed": request.POST.getlist("biases_noticed"),
            "biases_other": request.POST.get("biases_other", ""),
            "mindfulness_plan": request.POST.get("mindfulness_plan", ""),
        }
        skipped = request.POST.get("skip") == "yes"
        try:
            reflection_submit(phase=phase, labeler=m, skipped=skipped, **data)
        except ValidationError as exc:
            errors = exc.message_dict if hasattr(exc, "error_dict") else {"__all__": exc.messages}
        else:
            if skipped:
                messages.success(request, "Recorded: you skipped the reflection. You can still write one later.")
            else:
                messages.success(request, "Thank you: your reflection is saved. The lead reads it with the others'.")
            return redirect("home")
    counts = labeler_progress(phase=phase, labeler=m)
    return render(
        request,
        "labeling/reflection.html",
        {
            "phase": phase,
            "project": phase.project,
            "reflection": existing,
            "reflection_skipped": existing is not None and reflection_is_skipped(existing),
            "bias_factors": BIAS_FACTORS,
            "errors": errors,
            "post": request.POST if request.method == "POST" else None,
            **counts,
        },
    )
