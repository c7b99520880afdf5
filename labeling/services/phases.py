"""The four phases: choosing images, opening and closing, per-labeler queues.

Each labeler has their own queue of assignments (shuffled with a recorded
seed, same-subject images spread apart), so the next image is a single indexed
query and two labelers never compete for a slot.
"""

import secrets
from collections import defaultdict
from collections.abc import Iterable

import numpy as np
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, Max, Q, Sum
from django.utils import timezone

from ..models import Assignment, Label, Membership, Phase, PhaseImage, PhaseParticipant, Project
from .audit import audit
from .project_lifecycle import project_refuse_if_archived

DEFAULT_CALIBRATION_SIZE = 59  # seed 000's calibration set: the largest default
DEFAULT_REPEATED = 30  # seed 000's test-retest repeats: the largest default
# Fewer images than this and the dashboard shows "too little data" instead of agreement or
# consistency (labeling.services.consensus.numbers.MIN_IMAGES).
MIN_STATISTICS_IMAGES = 5


def calibration_defaults(n_images: int) -> dict:
    """Calibration sizes that fit a project of ``n_images`` images (every default is accepted as is).

    A fifth of the images, at least 10 (or all of them in a tiny project) and at most seed 000's
    59; calibration 1 gets half of the set, rounded up; calibration 2 repeats calibration 1's
    images, at most seed 000's 30.

    >>> calibration_defaults(13)
    {'size': 10, 'calibration_1_size': 5, 'n_repeated': 5}
    >>> calibration_defaults(100_000)
    {'size': 59, 'calibration_1_size': 30, 'n_repeated': 30}
    """
    size = max(min(10, n_images), min(DEFAULT_CALIBRATION_SIZE, round(n_images / 5)))
    n1 = size - size // 2
    return {"size": size, "calibration_1_size": n1, "n_repeated": min(DEFAULT_REPEATED, n1)}


def calibration_warnings(*, size: int, calibration_1_size: int, n_repeated: int) -> list[str]:
    """What a calibration choice makes impossible to measure, in plain words (empty when nothing)."""
    warnings = []
    need = MIN_STATISTICS_IMAGES
    n2 = n_repeated + (size - calibration_1_size)
    if calibration_1_size < need:
        warnings.append(
            f"Calibration 1 would have {calibration_1_size} image{'s' if calibration_1_size != 1 else ''}: "
            f"agreement between labelers needs at least {need}, so the dashboard would show “too little data”."
        )
    if 0 < n2 - n_repeated < need:
        warnings.append(
            f"Calibration 2 would have {n2 - n_repeated} new image{'s' if n2 - n_repeated != 1 else ''}: "
            f"its agreement needs at least {need}."
        )
    if n_repeated < need:
        warnings.append(
            f"{n_repeated} repeated image{'s' if n_repeated != 1 else ''}: each labeler's consistency "
            f"(test-retest) needs at least {need}."
        )
    return warnings


def calibration_current(project: Project) -> dict | None:
    """The calibration set as chosen now (None before one is chosen): images of each part in order."""
    cal1 = phase_get(project, Phase.Kind.CALIBRATION_1)
    cal2 = phase_get(project, Phase.Kind.CALIBRATION_2)
    rows = list(
        PhaseImage.objects.filter(phase__in=[cal1, cal2])
        .select_related("image")
        .order_by("phase_id", "-is_repeat", "image__external_id")
    )
    if not rows:
        return None
    part1 = [r.image for r in rows if r.phase_id == cal1.id]
    repeated = [r.image for r in rows if r.phase_id == cal2.id and r.is_repeat]
    rest = [r.image for r in rows if r.phase_id == cal2.id and not r.is_repeat]
    return {
        "calibration_1": part1,
        "repeated": repeated,
        "rest": rest,
        "size": len(part1) + len(rest),
        "method": cal1.selection_method,
        "seed": cal1.selection_seed,
        "every_labeler": cal1.every_labeler,
        "locked": any(p.status != Phase.Status.DRAFT for p in (cal1, cal2)),
    }


def image_ids_from_external(project: Project, external_ids: Iterable[str]) -> list[int]:
    """Internal ids of the images with these external ids (manifest ids such as ``P_astro``), in the
    order given, duplicates dropped; unknown ids are named in the error."""
    wanted = list(dict.fromkeys(e.strip() for e in external_ids if e and e.strip()))
    found = dict(project.images.filter(external_id__in=wanted).values_list("external_id", "id"))
    missing = [e for e in wanted if e not in found]
    if missing:
        shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
        raise ValidationError({"external_ids": f"No image of this project has the id {shown}."})
    return [found[e] for e in wanted]


def new_seed() -> int:
    return secrets.randbelow(2**62)


def phase_get(project: Project, kind: str) -> Phase:
    return project.phases.get(kind=kind)


def _require_draft(phase: Phase) -> None:
    if phase.status != Phase.Status.DRAFT:
        raise ValidationError(f"{phase.get_kind_display()} is already {phase.get_status_display().lower()}.")


@transaction.atomic
def calibration_configure(
    *,
    project: Project,
    size: int | None = None,
    calibration_1_size: int | None = None,
    n_repeated: int | None = None,
    seed: int | None = None,
    image_ids: list[int] | None = None,
    external_ids: list[str] | None = None,
    every_labeler: bool | None = None,
) -> tuple[Phase, Phase]:
    """Choose the calibration set and split it into calibration 1 and 2.

    The calibration set is drawn at random with a recorded seed, or picked by hand
    (``image_ids``, or ``external_ids``: the images' own ids). Defaults follow the
    project's size (:func:`calibration_defaults`). Calibration 1 gets
    ``calibration_1_size`` of them (default: half, rounded up); calibration 2 gets
    ``n_repeated`` calibration-1 images again (test-retest) plus the rest of the
    calibration set. Main gets every other image of the project. ``every_labeler``:
    every labeler labels every calibration image (seed 000's design) instead of
    labels-per-image of them.
    """
    project_refuse_if_archived(project.pk)
    cal1 = phase_get(project, Phase.Kind.CALIBRATION_1)
    cal2 = phase_get(project, Phase.Kind.CALIBRATION_2)
    main = phase_get(project, Phase.Kind.MAIN)
    for phase in (cal1, cal2, main):
        _require_draft(phase)
    all_ids = list(project.images.order_by("id").values_list("id", flat=True))
    if not all_ids:
        raise ValidationError("Import images before choosing a calibration set.")
    if external_ids:
        image_ids = image_ids_from_external(project, external_ids)
    defaults = calibration_defaults(len(all_ids))
    if image_ids:
        chosen = list(dict.fromkeys(int(i) for i in image_ids))
        missing = set(chosen) - set(all_ids)
        if missing:
            raise ValidationError(f"{len(missing)} chosen image(s) are not in this project.")
        method = "manual"
        seed = seed if seed is not None else new_seed()
    else:
        size = min(size if size is not None else defaults["size"], len(all_ids))
        if size < 1:
            raise ValidationError("The calibration set needs at least one image.")
        seed = seed if seed is not None else new_seed()
        rng = np.random.default_rng(seed)
        chosen = [int(i) for i in rng.choice(all_ids, size=size, replace=False)]
        method = "random"
    size = len(chosen)
    n1 = calibration_1_size if calibration_1_size is not None else size - size // 2
    if not 1 <= n1 <= size:
        raise ValidationError(
            {"calibration_1_size": f"Calibration 1 takes part of the {size} calibration images: between 1 and {size}."}
        )
    set1, rest = chosen[:n1], chosen[n1:]
    n_rep = n_repeated if n_repeated is not None else min(DEFAULT_REPEATED, n1)
    if not 0 <= n_rep <= n1:
        raise ValidationError(
            {
                "n_repeated": f"Calibration 2 can repeat at most the {n1} images of calibration 1; "
                f"choose between 0 and {n1}."
            }
        )
    rng = np.random.default_rng(seed + 1)
    repeated = [int(i) for i in rng.choice(set1, size=n_rep, replace=False)] if n_rep else []

    PhaseImage.objects.filter(phase__in=[cal1, cal2, main]).delete()
    PhaseImage.objects.bulk_create([PhaseImage(phase=cal1, image_id=i) for i in set1])
    PhaseImage.objects.bulk_create(
        [PhaseImage(phase=cal2, image_id=i, is_repeat=True) for i in repeated]
        + [PhaseImage(phase=cal2, image_id=i) for i in rest]
    )
    in_calibration = set(chosen)
    PhaseImage.objects.bulk_create([PhaseImage(phase=main, image_id=i) for i in all_ids if i not in in_calibration])
    for phase in (cal1, cal2):
        phase.selection_seed = seed
        phase.selection_method = method
        if every_labeler is not None:
            phase.every_labeler = bool(every_labeler)
    cal2.n_repeated = n_rep
    cal1.save()
    cal2.save()
    main.selection_method = "rest"
    main.save()
    audit(project, "calibration.configure", cal1, method=method, seed=seed, size=size, calibration_1=n1, repeated=n_rep)
    return cal1, cal2


def phase_images_set(*, phase: Phase, image_ids: Iterable[int]) -> None:
    """Set a draft phase's images by hand (e.g. main or post-calibration)."""
    project_refuse_if_archived(phase.project_id, "change its phases")
    _require_draft(phase)
    ids = list(dict.fromkeys(int(i) for i in image_ids))
    if phase.project.images.filter(id__in=ids).count() != len(ids):
        raise ValidationError("Some images are not in this project.")
    with transaction.atomic():
        phase.phase_images.all().delete()
        PhaseImage.objects.bulk_create([PhaseImage(phase=phase, image_id=i) for i in ids])
        audit(phase.project_id, "phase.images_set", phase, kind=phase.kind, n_images=len(ids), image_ids=ids)


def spread_order(image_ids: list[int], subjects: dict[int, object], rng: np.random.Generator) -> list[int]:
    """Shuffle ``image_ids`` so that images of one subject are spread apart.

    Each subject's images get evenly spaced keys ``(k + u) / n`` (k-th of n images
    of that subject, ``u`` one uniform draw per subject) with a little jitter;
    sorting by key interleaves subjects. Images without a subject are their own group.
    """
    groups: dict[object, list[int]] = defaultdict(list)
    for image_id in image_ids:
        subject = subjects.get(image_id)
        groups[subject if subject is not None else ("image", image_id)].append(image_id)
    keyed = []
    for members in groups.values():
        members = list(members)
        rng.shuffle(members)
        n = len(members)
        offset = rng.random()
        for k, image_id in enumerate(members):
            keyed.append(((k + offset) / n + rng.random() * 1e-3, image_id))
    keyed.sort()
    return [image_id for _, image_id in keyed]


def calibration_1_pairs(project: Project) -> set[tuple[int, int]]:
    """(image_id, labeler_id) of every calibration-1 label: a calibration-2 label is a repeat
    (test-retest, kept out of between-labeler statistics) only when its pair is in here."""
    return set(
        Label.objects.filter(phase__project=project, phase__kind=Phase.Kind.CALIBRATION_1).values_list(
            "image_id", "labeler_id"
        )
    )


def _distribute(phase: Phase, labelers: list[Membership], rng: np.random.Generator) -> dict[int, list[int]]:
    """Pick which labelers label each image: ``labels_per_image`` each, balanced loads.

    A repeated calibration image goes first to the labelers who labelled it in
    calibration 1, so that each of them has a test-retest pair.
    """
    rows = list(phase.phase_images.values_list("image_id", "is_repeat"))
    per_labeler: dict[int, list[int]] = {m.id: [] for m in labelers}
    k = len(labelers) if phase.every_labeler else min(phase.labels_per_image, len(labelers))
    load = {m.id: 0 for m in labelers}
    ids = [m.id for m in labelers]
    earlier: dict[int, set[int]] = defaultdict(set)
    if phase.kind == Phase.Kind.CALIBRATION_2:
        for image_id, labeler_id in calibration_1_pairs(phase.project):
            earlier[image_id].add(labeler_id)
    for image_id, is_repeat in rows:
        first = earlier[image_id] if is_repeat else set()
        order = sorted(ids, key=lambda i: (i not in first, load[i], rng.random()))
        if is_repeat:
            k_image = max(k, sum(1 for i in ids if i in first))
        else:
            k_image = k
        for labeler_id in order[:k_image]:
            per_labeler[labeler_id].append(image_id)
            load[labeler_id] += 1
    return per_labeler


def phase_repeat_pairs(phase: Phase) -> set[tuple[int, int]]:
    """(image, labeler) pairs that are test-retest repeats in ``phase``: a repeated calibration
    image labelled by that labeler in calibration 1. Anyone else labels it for the first time."""
    repeated = set(phase.phase_images.filter(is_repeat=True).values_list("image_id", flat=True))
    if not repeated:
        return set()
    return {
        (image_id, labeler_id) for image_id, labeler_id in calibration_1_pairs(phase.project) if image_id in repeated
    }


@transaction.atomic
def phase_open(*, phase: Phase, labeler_ids: list[int] | None = None, labels_per_image: int | None = None) -> Phase:
    """Open a phase: the previous phase must be closed; queues are built for the labelers."""
    phase = Phase.objects.select_for_update().get(pk=phase.pk)
    project_refuse_if_archived(phase.project_id)
    _require_draft(phase)
    project = phase.project
    refusal = phase_order_refusal(phase)
    if refusal:
        raise ValidationError(refusal)
    if phase.kind == Phase.Kind.MAIN and not phase.phase_images.exists():
        # Main defaults to every image outside the calibration set.
        calibration = PhaseImage.objects.filter(
            phase__project=project, phase__kind__in=[Phase.Kind.CALIBRATION_1, Phase.Kind.CALIBRATION_2]
        ).values_list("image_id", flat=True)
        PhaseImage.objects.bulk_create(
            PhaseImage(phase=phase, image_id=i)
            for i in project.images.exclude(id__in=calibration).values_list("id", flat=True)
        )
    if not phase.phase_images.exists() and phase.kind != Phase.Kind.POST_CALIBRATION:
        raise ValidationError(f"{phase.get_kind_display()} has no images.")
    labelers = project.memberships.filter(role=Membership.Role.LABELER, is_active=True)
    if labeler_ids:
        labelers = labelers.filter(id__in=labeler_ids)
        if labelers.count() != len(set(labeler_ids)):
            raise ValidationError("Some chosen labelers are not active labelers of this project.")
    labelers = list(labelers.order_by("id"))
    if not labelers:
        raise ValidationError("Add labelers to the project before opening a phase.")
    if phase.every_labeler:
        # Every labeler labels every image: labels per image is the team's size.
        phase.labels_per_image = len(labelers)
    elif labels_per_image is not None:
        if labels_per_image < 1:
            raise ValidationError("Labels per image must be at least 1.")
        phase.labels_per_image = labels_per_image
    if phase.kind != Phase.Kind.POST_CALIBRATION:
        labels_per_image_check(phase, phase.labels_per_image, len(labelers))
    phase.selection_seed = phase.selection_seed if phase.selection_seed is not None else new_seed()
    rng = np.random.default_rng(phase.selection_seed + 7)
    per_labeler = _distribute(phase, labelers, rng)
    repeats = phase_repeat_pairs(phase)
    subjects = dict(phase.project.images.values_list("id", "subject_id"))
    for membership in labelers:
        seed = new_seed()
        PhaseParticipant.objects.create(phase=phase, labeler=membership, shuffle_seed=seed)
        order = spread_order(per_labeler[membership.id], subjects, np.random.default_rng(seed))
        Assignment.objects.bulk_create(
            Assignment(
                phase=phase,
                labeler=membership,
                image_id=image_id,
                position=pos,
                is_repeat=(image_id, membership.id) in repeats,
            )
            for pos, image_id in enumerate(order, start=1)
        )
    phase.status = Phase.Status.OPEN
    phase.opened_at = timezone.now()
    phase.save()
    audit(project, "phase.open", phase, kind=phase.kind, labelers=[m.pseudonym for m in labelers])
    return phase


def labels_per_image_check(phase: Phase, labels_per_image: int, n_labelers: int) -> None:
    """Refuse more labels per image than labelers take part: a labeler labels an image once, so the
    surplus could never be given (4 asked of 3 labelers was accepted and silently gave 3)."""
    if labels_per_image > n_labelers:
        who = "1 active labeler takes" if n_labelers == 1 else f"{n_labelers} active labelers take"
        raise ValidationError(
            f"Labels per image is {labels_per_image} but only {who} part in {phase.get_kind_display()}: an image "
            f"can get at most {n_labelers} label{'s' if n_labelers != 1 else ''}. Ask for {n_labelers} or fewer, or "
            "add labelers to the team first."
        )


def phase_close_summary(phase: Phase) -> dict:
    """What closing ``phase`` means: the assignments left unfinished, in total and per labeler."""
    rows = (
        phase.assignments.filter(done_at__isnull=True)
        .values("labeler__pseudonym")
        .annotate(n=Count("id"))
        .order_by("labeler__pseudonym")
    )
    per_labeler = {r["labeler__pseudonym"]: r["n"] for r in rows}
    return {"n_unfinished": sum(per_labeler.values()), "unfinished_by_labeler": per_labeler}


@transaction.atomic
def phase_close(*, phase: Phase) -> Phase:
    phase = Phase.objects.select_for_update().get(pk=phase.pk)
    project_refuse_if_archived(phase.project_id, "close a phase")
    if phase.status != Phase.Status.OPEN:
        raise ValidationError(f"{phase.get_kind_display()} is not open.")
    phase.status = Phase.Status.CLOSED
    phase.closed_at = timezone.now()
    phase.save()
    audit(phase.project_id, "phase.close", phase, kind=phase.kind)
    return phase


def phase_next(phase: Phase) -> Phase | None:
    """The phase after ``phase`` in the project's order (None after post-calibration)."""
    if phase.index + 1 >= len(Phase.ORDER):
        return None
    return phase.project.phases.filter(kind=Phase.ORDER[phase.index + 1]).first()


def phase_order_refusal(phase: Phase) -> str | None:
    """Why ``phase`` cannot be opened yet for the order of the phases (None when every earlier phase is closed),
    naming the earliest phase that is not: "Close Calibration 2 first" was said while Calibration 1 had not
    even been opened."""
    earlier = {p.kind: p for p in phase.project.phases.filter(kind__in=Phase.ORDER[: phase.index])}
    for kind in Phase.ORDER[: phase.index]:
        previous = earlier.get(kind)
        if previous is None or previous.status == Phase.Status.CLOSED:
            continue
        name = previous.get_kind_display()
        if previous.status == Phase.Status.OPEN:
            return f"Close {name} first: phases run in order."
        return f"{name} has not been opened yet: phases run in order, so open and close {name} first."
    return None


def phase_reopen_refusal(phase: Phase) -> str | None:
    """Why ``phase`` cannot be reopened now, in plain words (None when it can)."""
    if phase.status != Phase.Status.CLOSED:
        return f"{phase.get_kind_display()} is {phase.get_status_display().lower()}, not closed."
    following = phase_next(phase)
    if following is not None and following.status != Phase.Status.DRAFT:
        return (
            f"{following.get_kind_display()} has already started, so {phase.get_kind_display()} can no longer "
            "be reopened: phases run in order."
        )
    return None


REOPEN_REASON_MAX = 2000


@transaction.atomic
def phase_reopen(*, phase: Phase, user, reason: str):
    """Open a closed phase again, recorded with who, when and why.

    Only while the next phase has not started (phases run in order). Labelers' queues are
    kept as they were: unfinished assignments are offered again, finished ones stay done.
    """
    from ..models import PhaseReopening

    phase = Phase.objects.select_for_update().select_related("project").get(pk=phase.pk)
    project_refuse_if_archived(phase.project_id)
    reason = (reason or "").strip()
    if not reason:
        raise ValidationError({"reason": "Say why the phase is reopened (it is recorded)."})
    if len(reason) > REOPEN_REASON_MAX:
        raise ValidationError({"reason": f"Keep the reason under {REOPEN_REASON_MAX} characters."})
    refusal = phase_reopen_refusal(phase)
    if refusal:
        raise ValidationError(refusal)
    reopening = PhaseReopening.objects.create(phase=phase, reason=reason, reopened_by=user, closed_at=phase.closed_at)
    phase.status = Phase.Status.OPEN
    phase.closed_at = None
    phase.save(update_fields=["status", "closed_at"])
    audit(phase.project, "phase.reopen", phase, user=user, kind=phase.kind, reason=reason)
    return reopening


@transaction.atomic
def phase_set_labels_per_image(*, phase: Phase, labels_per_image: int) -> int:
    """Raise (or set, before opening) the labels wanted per image; returns assignments added.

    On an open phase, new assignments go to the participants with the lightest
    load who do not have the image yet, at the end of their queues (shuffled).
    """
    phase = Phase.objects.select_for_update().get(pk=phase.pk)
    project_refuse_if_archived(phase.project_id)
    if labels_per_image < 1:
        raise ValidationError("Labels per image must be at least 1.")
    if phase.status == Phase.Status.DRAFT:
        phase.labels_per_image = labels_per_image
        phase.save()
        audit(phase.project_id, "phase.labels_per_image", phase, kind=phase.kind, labels_per_image=labels_per_image)
        return 0
    if phase.status == Phase.Status.CLOSED:
        raise ValidationError("The phase is closed.")
    if labels_per_image < phase.labels_per_image:
        raise ValidationError("Labels per image can be raised, not lowered, once a phase is open.")
    active = phase.participants.filter(labeler__is_active=True, labeler__role=Membership.Role.LABELER).count()
    labels_per_image_check(phase, labels_per_image, active)
    phase.labels_per_image = labels_per_image
    phase.save()
    participants = list(phase.participants.select_related("labeler").order_by("id"))
    have = defaultdict(set)
    # Any assignment (relabel requests too) or label (imported ones may have no assignment) counts.
    for labeler_id, image_id in phase.assignments.values_list("labeler_id", "image_id"):
        have[image_id].add(labeler_id)
    for labeler_id, image_id in phase.labels.values_list("labeler_id", "image_id"):
        have[image_id].add(labeler_id)
    repeats = phase_repeat_pairs(phase)
    repeat_images = {image_id for image_id, _ in repeats}
    load = dict(phase.assignments.values("labeler_id").annotate(n=Count("id")).values_list("labeler_id", "n"))
    rng = np.random.default_rng(phase.selection_seed + labels_per_image)
    added: dict[int, list[int]] = defaultdict(list)
    for pi in phase.phase_images.order_by("id"):
        missing = labels_per_image - len(have[pi.image_id])
        if missing <= 0:
            continue
        candidates = [p.labeler_id for p in participants if p.labeler_id not in have[pi.image_id]]
        # A repeated image goes first to who labelled it in calibration 1 (a test-retest pair).
        candidates.sort(
            key=lambda i: (
                (pi.image_id, i) not in repeats if pi.image_id in repeat_images else True,
                load.get(i, 0),
                rng.random(),
            )
        )
        for labeler_id in candidates[:missing]:
            added[labeler_id].append(pi.image_id)
            load[labeler_id] = load.get(labeler_id, 0) + 1
    subjects = dict(phase.project.images.values_list("id", "subject_id"))
    n_added = 0
    for labeler_id, image_ids in added.items():
        start = (phase.assignments.filter(labeler_id=labeler_id).aggregate(m=Max("position"))["m"] or 0) + 1
        order = spread_order(image_ids, subjects, rng)
        Assignment.objects.bulk_create(
            Assignment(
                phase=phase, labeler_id=labeler_id, image_id=i, position=start + k, is_repeat=(i, labeler_id) in repeats
            )
            for k, i in enumerate(order)
        )
        n_added += len(order)
    audit(
        phase.project_id,
        "phase.labels_per_image",
        phase,
        kind=phase.kind,
        labels_per_image=labels_per_image,
        n_added=n_added,
    )
    return n_added


def phase_progress(phase: Phase) -> dict:
    """Done / assigned and time spent, per labeler and for the phase."""
    rows = (
        phase.assignments.values("labeler_id", "labeler__pseudonym")
        .annotate(
            assigned=Count("id"),
            done=Count("id", filter=Q(done_at__isnull=False)),
        )
        .order_by("labeler__pseudonym")
    )
    time_spent = dict(
        Label.objects.filter(phase=phase)
        .values("labeler_id")
        .annotate(t=Sum("time_spent_ms"))
        .values_list("labeler_id", "t")
    )
    labelers = [
        {
            "labeler_id": r["labeler_id"],
            "pseudonym": r["labeler__pseudonym"],
            "assigned": r["assigned"],
            "done": r["done"],
            "time_spent_s": round((time_spent.get(r["labeler_id"]) or 0) / 1000, 1),
        }
        for r in rows
    ]
    assigned = sum(r["assigned"] for r in labelers)
    done = sum(r["done"] for r in labelers)
    return {
        "phase_id": phase.id,
        "kind": phase.kind,
        "status": phase.status,
        "n_images": phase.phase_images.count(),
        "labels_per_image": phase.labels_per_image,
        "assigned": assigned,
        "done": done,
        "fraction_done": (done / assigned) if assigned else None,
        "labelers": labelers,
    }
