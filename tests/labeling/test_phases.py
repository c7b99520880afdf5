from collections import Counter

import numpy as np
import pytest
from django.core.exceptions import ValidationError

from labeling.models import Assignment, Phase
from labeling.services.label_imports import labels_import
from labeling.services.labels import relabel_request
from labeling.services.phases import (
    calibration_configure,
    phase_close,
    phase_get,
    phase_images_set,
    phase_open,
    phase_progress,
    phase_set_labels_per_image,
    spread_order,
)
from tests.labeling.helpers import add_images, label_all, open_calibration_1

pytestmark = pytest.mark.django_db


def test_calibration_split_is_recorded_and_reproducible(project, labelers):
    add_images(project, 20)
    cal1, cal2 = calibration_configure(project=project, size=12, calibration_1_size=7, n_repeated=4, seed=123)
    set1 = set(cal1.phase_images.values_list("image_id", flat=True))
    repeats = set(cal2.phase_images.filter(is_repeat=True).values_list("image_id", flat=True))
    rest = set(cal2.phase_images.filter(is_repeat=False).values_list("image_id", flat=True))
    assert len(set1) == 7 and len(repeats) == 4 and len(rest) == 5
    assert repeats <= set1 and not (rest & set1)
    main = phase_get(project, Phase.Kind.MAIN)
    main_ids = set(main.phase_images.values_list("image_id", flat=True))
    assert len(main_ids) == 8 and not (main_ids & (set1 | rest))
    assert cal1.selection_seed == 123 and cal1.selection_method == "random"
    # Same seed, same draw.
    calibration_configure(project=project, size=12, calibration_1_size=7, n_repeated=4, seed=123)
    assert set(phase_get(project, "calibration_1").phase_images.values_list("image_id", flat=True)) == set1


def test_calibration_by_hand_and_bad_sizes(project, labelers):
    images = add_images(project, 6)
    ids = [i.id for i in images[:4]]
    cal1, cal2 = calibration_configure(project=project, image_ids=ids, calibration_1_size=2, n_repeated=2)
    assert cal1.selection_method == "manual"
    assert set(cal1.phase_images.values_list("image_id", flat=True)) == set(ids[:2])
    with pytest.raises(ValidationError, match="between 0 and 2"):
        calibration_configure(project=project, image_ids=ids, calibration_1_size=2, n_repeated=3)
    with pytest.raises(ValidationError, match="not in this project"):
        calibration_configure(project=project, image_ids=[999999])


def test_phases_open_in_order_and_assign_labels_per_image(project, labelers):
    add_images(project, 10)
    calibration_configure(project=project, size=6, calibration_1_size=3, n_repeated=2, seed=1)
    # Calibration 1 not opened yet: said so (issue 23), not "close it first".
    with pytest.raises(ValidationError, match="Calibration 1 has not been opened yet"):
        phase_open(phase=phase_get(project, "calibration_2"))
    cal1 = phase_open(phase=phase_get(project, "calibration_1"), labels_per_image=2)
    with pytest.raises(ValidationError, match="Close Calibration 1 first"):
        phase_open(phase=phase_get(project, "calibration_2"))
    per_image = Counter(cal1.assignments.values_list("image_id", flat=True))
    assert set(per_image.values()) == {2}
    loads = Counter(cal1.assignments.values_list("labeler_id", flat=True))
    assert max(loads.values()) - min(loads.values()) <= 1
    with pytest.raises(ValidationError):
        phase_open(phase=cal1)
    from tests.labeling.helpers import label_all

    for m in labelers:
        label_all(cal1, m)
    phase_close(phase=cal1)
    cal2 = phase_open(phase=phase_get(project, "calibration_2"), labels_per_image=1)
    # Each repeated image goes back to the labelers who labelled it in calibration 1
    # (here 2 per image), even though calibration 2 asks for 1 label per image.
    repeats = cal2.assignments.filter(is_repeat=True)
    assert repeats.count() == 2 * 2
    for a in repeats:
        assert cal1.labels.filter(image_id=a.image_id, labeler_id=a.labeler_id).exists()


def test_raising_labels_per_image_after_opening(project, labelers):
    add_images(project, 8)
    cal1 = open_calibration_1(project, size=8, cal1=8, labels_per_image=1)
    assert cal1.assignments.count() == 8
    label_all(cal1, labelers[0])
    added = phase_set_labels_per_image(phase=cal1, labels_per_image=3)
    assert added == 16
    assert set(Counter(cal1.assignments.values_list("image_id", flat=True)).values()) == {3}
    with pytest.raises(ValidationError, match="raised, not lowered"):
        phase_set_labels_per_image(phase=cal1, labels_per_image=2)
    # Positions stay unique per labeler and new work goes after the old.
    for labeler in labelers:
        positions = list(cal1.assignments.filter(labeler=labeler).values_list("position", flat=True))
        assert len(positions) == len(set(positions))


def test_labeler_orders_are_shuffled_with_recorded_seeds(project, labelers):
    add_images(project, 12)
    cal1 = open_calibration_1(project, size=12, cal1=12)
    orders = [
        list(cal1.assignments.filter(labeler=m).order_by("position").values_list("image_id", flat=True))
        for m in labelers
    ]
    assert all(sorted(o) == sorted(orders[0]) for o in orders)
    assert len({tuple(o) for o in orders}) > 1  # shuffled per labeler
    seeds = list(cal1.participants.values_list("shuffle_seed", flat=True))
    assert len(set(seeds)) == len(labelers)


def test_spread_order_keeps_same_subject_images_apart():
    ids = list(range(40))
    subjects = {i: i % 4 for i in ids}  # 4 subjects x 10 images
    order = spread_order(ids, subjects, np.random.default_rng(0))
    assert sorted(order) == ids
    runs = sum(1 for a, b in zip(order, order[1:]) if subjects[a] == subjects[b])
    # A naive shuffle puts ~1/4 of neighbours on the same subject (~10 of 39).
    assert runs <= 3


def test_progress_counts_done_and_time(project, labelers):
    add_images(project, 4)
    cal1 = open_calibration_1(project, size=4, cal1=4)
    label_all(cal1, labelers[0])
    report = phase_progress(cal1)
    assert report["assigned"] == 16 and report["done"] == 4
    row = next(r for r in report["labelers"] if r["labeler_id"] == labelers[0].id)
    assert row["done"] == row["assigned"] == 4


def test_assignments_are_unique_per_labeler_and_image(project, labelers):
    add_images(project, 3)
    cal1 = open_calibration_1(project, size=3, cal1=3)
    a = cal1.assignments.first()
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        Assignment.objects.create(phase=cal1, labeler=a.labeler, image=a.image, position=999)


def _calibration_2(project, labelers, cal1_lpi=2, cal2_lpi=1):
    add_images(project, 10)
    calibration_configure(project=project, size=6, calibration_1_size=3, n_repeated=2, seed=1)
    cal1 = phase_open(phase=phase_get(project, "calibration_1"), labels_per_image=cal1_lpi)
    for m in labelers:
        label_all(cal1, m)
    phase_close(phase=cal1)
    cal2 = phase_open(phase=phase_get(project, "calibration_2"), labels_per_image=cal2_lpi)
    return cal1, cal2


def _repeats_without_a_first_label(cal1, cal2):
    """Calibration-2 assignments marked as repeats for a labeler who never labelled the image before."""
    return [
        (a.image_id, a.labeler_id)
        for a in cal2.assignments.filter(is_repeat=True)
        if not cal1.labels.filter(image_id=a.image_id, labeler_id=a.labeler_id).exists()
    ]


def test_calibration_2_marks_as_repeats_only_labelers_who_labelled_the_image_in_calibration_1(project, labelers):
    cal1, cal2 = _calibration_2(project, labelers, cal1_lpi=2, cal2_lpi=3)
    assert _repeats_without_a_first_label(cal1, cal2) == []


def test_raising_labels_per_image_in_calibration_2_adds_no_false_repeats(project, labelers):
    cal1, cal2 = _calibration_2(project, labelers, cal1_lpi=2, cal2_lpi=1)
    assert _repeats_without_a_first_label(cal1, cal2) == []
    phase_set_labels_per_image(phase=cal2, labels_per_image=3)
    assert _repeats_without_a_first_label(cal1, cal2) == []


def test_an_imported_label_counts_when_labels_per_image_is_raised(project, labelers, lead):
    images = add_images(project, 4)
    calibration_configure(project=project, size=4, calibration_1_size=4, n_repeated=0, seed=1)
    phase = phase_open(phase=phase_get(project, "calibration_1"), labels_per_image=1)
    a = phase.assignments.select_related("image").first()
    other = next(m for m in labelers if m.id != a.labeler_id)
    data = f"image_id,labeler,tones\n{a.image.external_id},{other.pseudonym},4\n".encode()
    assert labels_import(phase=phase, data=data, user=lead)["imported"] == 1
    phase_set_labels_per_image(phase=phase, labels_per_image=4)
    # The imported label counts: no second (unanswerable) assignment for that labeler and image.
    assert not phase.assignments.filter(labeler=other, image=a.image).exists()
    for m in labelers:
        if m.id != other.id:
            assert phase.assignments.filter(labeler=m, image=a.image).count() == 1
    assert len(images) == 4


def test_raising_labels_per_image_in_post_calibration_counts_relabel_assignments(project, labelers, lead):
    images = add_images(project, 6)
    calibration_configure(project=project, size=2, calibration_1_size=1, n_repeated=0, seed=1)
    for kind in ("calibration_1", "calibration_2", "main"):
        ph = phase_open(phase=phase_get(project, kind), labels_per_image=4)
        for m in labelers:
            label_all(ph, m)
        phase_close(phase=ph)
    post = phase_get(project, "post_calibration")
    phase_images_set(phase=post, image_ids=[images[0].id])
    post = phase_open(phase=post, labels_per_image=1)
    image = images[0]
    target = next(m for m in labelers if not post.assignments.filter(labeler=m, image=image).exists())
    relabel_request(image=image, labelers=[target], reason="check", user=lead)
    phase_set_labels_per_image(phase=post, labels_per_image=4)  # once an IntegrityError (unique_assignment_image)
    assert post.assignments.filter(labeler=target, image=image).count() == 1
    assert post.assignments.filter(image=image).values("labeler").distinct().count() == 4
