"""Regression tests from a review: test-retest marking, label imports, labels-per-image, tone order."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from labeling.models import Label
from labeling.services.label_imports import labels_import
from labeling.services.phases import (
    calibration_configure,
    phase_close,
    phase_get,
    phase_open,
    phase_set_labels_per_image,
)
from tests.labeling.helpers import add_images, label_all
from tests.labeling.test_api import client_for

pytestmark = pytest.mark.django_db


def _cal2(project, labelers, cal1_lpi=2, cal2_lpi=1):
    add_images(project, 10)
    calibration_configure(project=project, size=6, calibration_1_size=3, n_repeated=2, seed=1)
    cal1 = phase_open(phase=phase_get(project, "calibration_1"), labels_per_image=cal1_lpi)
    for m in labelers:
        label_all(cal1, m)
    phase_close(phase=cal1)
    cal2 = phase_open(phase=phase_get(project, "calibration_2"), labels_per_image=cal2_lpi)
    return cal1, cal2


def _bad_repeats(cal1, cal2):
    return [
        (a.image_id, a.labeler_id)
        for a in cal2.assignments.filter(is_repeat=True)
        if not cal1.labels.filter(image_id=a.image_id, labeler_id=a.labeler_id).exists()
    ]


def test_open_cal2_with_more_labels_than_cal1_marks_first_time_labelers_as_repeats(project, labelers):
    cal1, cal2 = _cal2(project, labelers, cal1_lpi=2, cal2_lpi=3)
    assert _bad_repeats(cal1, cal2) == []


def test_raising_labels_per_image_in_cal2_marks_first_time_labelers_as_repeats(project, labelers):
    cal1, cal2 = _cal2(project, labelers, cal1_lpi=2, cal2_lpi=1)
    assert _bad_repeats(cal1, cal2) == []  # phase_open is right here
    phase_set_labels_per_image(phase=cal2, labels_per_image=3)
    assert _bad_repeats(cal1, cal2) == []  # fails: new labelers got is_repeat=True


def test_label_import_into_cal2_loses_is_repeat(project, labelers, lead):
    cal1, cal2 = _cal2(project, labelers)
    a = cal2.assignments.filter(is_repeat=True, done_at__isnull=True).select_related("image", "labeler").first()
    data = f"image_id,labeler,tones\n{a.image.external_id},{a.labeler.pseudonym},4\n".encode()
    report = labels_import(phase=cal2, data=data, user=lead)
    assert report["imported"] == 1
    label = Label.objects.get(phase=cal2, image=a.image, labeler=a.labeler)
    assert label.is_repeat  # fails: retest label counted as a between-labeler label


def test_label_import_row_with_extra_cell_crashes_after_partial_import(project, labelers, lead):
    images = add_images(project, 3)
    calibration_configure(project=project, size=3, calibration_1_size=3, n_repeated=0, seed=1)
    phase = phase_open(phase=phase_get(project, "calibration_1"), labels_per_image=4)
    ids = [i.external_id for i in images]
    csv = f"image_id,labeler,tones\n{ids[0]},L1,4\n{ids[1]},L1,4,EXTRA\n".encode()
    r = client_for(lead).post(
        f"/api/phases/{phase.id}/labels-import/", {"file": SimpleUploadedFile("l.csv", csv)}, format="multipart"
    )
    assert r.status_code == 200, (r.status_code, Label.objects.count())


def test_label_import_infinite_time_crashes(project, labelers, lead):
    images = add_images(project, 2)
    calibration_configure(project=project, size=2, calibration_1_size=2, n_repeated=0, seed=1)
    phase = phase_open(phase=phase_get(project, "calibration_1"), labels_per_image=4)
    csv = f"image_id,labeler,tones,time_spent_s\n{images[0].external_id},L1,4,1\n{images[1].external_id},L1,4,inf\n".encode()
    report = labels_import(phase=phase, data=csv, user=lead)  # OverflowError
    assert report["rejected"] == 1


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
        if m.id not in (other.id,):
            assert phase.assignments.filter(labeler=m, image=a.image).count() == 1
    assert len(images) == 4


def test_token_endpoint_is_not_throttled(lead):
    from rest_framework.test import APIClient

    c = APIClient()
    codes = [c.post("/api/auth/token/", {"username": "lead", "password": f"guess{i}"}).status_code for i in range(30)]
    assert 429 in codes, codes  # the "login": "20/min" rate in settings is never applied


def test_raising_labels_per_image_in_post_calibration_collides_with_relabel(project, labelers, lead):
    from labeling.services.labels import relabel_request
    from labeling.services.phases import phase_images_set

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
    phase_set_labels_per_image(phase=post, labels_per_image=4)  # IntegrityError: unique_assignment_image


def test_patch_tone_order_with_duplicates_blocks_every_submit(project, labelers, lead):
    add_images(project, 2)
    r = client_for(lead).patch(
        f"/api/projects/{project.id}/", {"tone_order": [1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}, format="json"
    )
    assert r.status_code == 400, r.content  # accepted: project_update never checks the order against the scale
