"""Post-calibration review: images whose labels look like mistakes."""

from collections import defaultdict

from metrics.agreement import OUTLIER_DISTANCE, outlier_labels

from ..models import Label, Phase


def review_label_row(lab) -> dict:
    """One label as the review pages and API show it (``lab`` with its phase, labeler and ``n_revisions``)."""
    return {
        "label_id": lab.pk,
        "phase": lab.phase.get_kind_display(),
        "labeler": lab.labeler.pseudonym,
        "labeler_id": lab.labeler_id,
        "selection": lab.selection_text,
        "tone_low": lab.tone_low,
        "value": lab.value,
        "uncertain": lab.uncertain,
        "is_valid": lab.is_valid,
        "n_revisions": lab.n_revisions,
    }


def review_candidates(phase: Phase, *, outlier_distance: float = OUTLIER_DISTANCE, limit: int = 500) -> dict:
    """Images that look like mistakes.

    For the post-calibration phase, every earlier phase's labels are reviewed;
    for another phase, its own. Repeated (test-retest) labels are left out. An
    image is listed when a selection is at least ``outlier_distance`` tones from
    every other labeler's value in the same phase (the rule of
    :func:`metrics.agreement.outlier_labels`), or it has skips, uncertain or
    invalid labels.
    """
    project = phase.project
    if phase.kind == Phase.Kind.POST_CALIBRATION:
        phases = project.phases.exclude(kind=Phase.Kind.POST_CALIBRATION)
    else:
        phases = project.phases.filter(pk=phase.pk)
    labels = (
        Label.objects.filter(phase__in=phases, is_repeat=False)
        .select_related("labeler", "phase")
        .order_by("image_id", "phase_id", "labeler__pseudonym")
    )
    by_image: dict[int, list[Label]] = defaultdict(list)
    for label in labels:
        by_image[label.image_id].append(label)
    candidates = []
    for image_id, image_labels in by_image.items():
        reasons = []
        by_phase = defaultdict(list)
        for label in image_labels:
            by_phase[label.phase_id].append(label)
        for phase_labels in by_phase.values():
            valued = [lab for lab in phase_labels if lab.value is not None]
            far = outlier_labels([lab.value for lab in valued], distance=outlier_distance)
            for lab, is_outlier in zip(valued, far, strict=True):
                if is_outlier:
                    reasons.append(f"{lab.labeler.pseudonym}'s {lab.selection_text} is far from every other label")
        if any(lab.skip_reason for lab in image_labels):
            reasons.append("skipped by " + ", ".join(lab.labeler.pseudonym for lab in image_labels if lab.skip_reason))
        if any(lab.uncertain for lab in image_labels):
            reasons.append("uncertain: " + ", ".join(lab.labeler.pseudonym for lab in image_labels if lab.uncertain))
        if any(not lab.is_valid for lab in image_labels):
            reasons.append("invalid (non-adjacent) selection")
        if reasons:
            candidates.append(
                {
                    "image_id": image_id,
                    "reasons": reasons,
                    "labels": [review_label_row(lab) for lab in image_labels],
                }
            )
    candidates.sort(key=lambda c: (-len(c["reasons"]), c["image_id"]))
    return {"n_candidates": len(candidates), "candidates": candidates[:limit]}
