import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from labeling.models import Label
from labeling.services.label_imports import labels_import
from labeling.services.phases import calibration_configure, phase_close, phase_get, phase_open
from labeling.services.review import review_candidates
from tests.labeling.helpers import add_images, label_all, open_calibration_1

pytestmark = pytest.mark.django_db


def test_import_labels_with_per_row_report_and_invalid_pairs_flagged(project, labelers, lead, client_for):
    images = add_images(project, 3)
    phase = open_calibration_1(project, size=3, cal1=3)
    ids = [i.external_id for i in images]
    csv = (
        "image_id,labeler,tones,uncertain,skip_reason,time_spent_s\n"
        f"{ids[0]},L1,4,,,3.5\n"
        f"{ids[0]},L2,3+5,yes,,\n"  # non-adjacent: kept, flagged invalid
        f"{ids[0]},L3,4+5,,,\n"
        f"{ids[1]},L1,,,no skin visible,\n"
        f"{ids[1]},L1,6,,,\n"  # duplicate
        f"nope,L1,6,,,\n"
        f"{ids[2]},L9,6,,,\n"
        f"{ids[2]},L2,eleven,,,\n"
        f"{ids[2]},L2,12,,,\n"
    ).encode()
    r = client_for(lead).post(
        f"/api/phases/{phase.id}/labels-import/", {"file": SimpleUploadedFile("l.csv", csv)}, format="multipart"
    )
    assert r.status_code == 200, r.content
    report = r.json()
    assert report["imported"] == 4 and report["rejected"] == 5
    reasons = {row["row"]: row["reason"] for row in report["rows"]}
    assert "already has a label" in reasons[6] and "not in this project" in reasons[7]
    assert "no labeler" in reasons[8] and "whole numbers" in reasons[9] and "not on this scale" in reasons[10]
    invalid = Label.objects.get(phase=phase, image=images[0], labeler=labelers[1])
    assert not invalid.is_valid and invalid.value is None and invalid.revisions.get().source == "import"
    pair = Label.objects.get(phase=phase, image=images[0], labeler=labelers[2])
    assert pair.value == 4.5
    candidates = {c["image_id"]: c for c in review_candidates(phase)["candidates"]}
    assert any("invalid" in r for r in candidates[images[0].id]["reasons"])
    # Imported labels count as done for the labeler's queue.
    assert phase.assignments.get(labeler=labelers[0], image=images[0]).done_at is not None


def test_import_refuses_bad_files(project, labelers, lead, client_for):
    add_images(project, 1)
    phase = open_calibration_1(project, size=1, cal1=1)
    api = client_for(lead)
    r = api.post(
        f"/api/phases/{phase.id}/labels-import/",
        {"file": SimpleUploadedFile("l.csv", b"a,b\n1,2\n")},
        format="multipart",
    )
    assert r.status_code == 400 and "Missing column" in r.content.decode()
    r = api.post(
        f"/api/phases/{phase.id}/labels-import/",
        {"file": SimpleUploadedFile("l.csv", b"\xff\xfe\x00bad")},
        format="multipart",
    )
    assert r.status_code == 400 and "UTF-8" in r.content.decode()
    assert (
        client_for(labelers[0].user).post(f"/api/phases/{phase.id}/labels-import/", {}, format="multipart").status_code
        == 403
    )


def test_every_rejection_step_reports_its_row(project, labelers, lead):
    """Each check a row goes through, in order, with the whole report (service level)."""
    from django.core.exceptions import ValidationError

    from labeling.models import Phase
    from labeling.services.label_imports import labels_import

    images = add_images(project, 3)
    phase = open_calibration_1(project, size=2, cal1=2)
    in_phase = set(phase.phase_images.values_list("image__external_id", flat=True))
    inside = sorted(in_phase)[0]
    outside = next(i.external_id for i in images if i.external_id not in in_phase)
    csv = (
        "image_id,labeler,tones,uncertain,skip_reason,time_spent_s\n"
        f"{inside},L1,4,,,2,extra\n"  # more cells than columns
        f"{outside},L1,4,,,\n"  # not in the phase
        f"{inside},L1,4,,,99999\n"  # time out of range
        f"{inside},L1,4,x,,1.5\n"
        f"{inside},L1,5,,,\n"  # the same labeler again
    ).encode()
    report = labels_import(phase=phase, data=csv, user=lead)
    assert report == {
        "imported": 1,
        "rejected": 4,
        "rows": [
            {
                "row": 2,
                "image_id": inside,
                "outcome": "rejected",
                "reason": "this row has more cells than the header has columns",
            },
            {
                "row": 3,
                "image_id": outside,
                "outcome": "rejected",
                "reason": f"image {outside!r} is not in {phase.get_kind_display()}",
            },
            {
                "row": 4,
                "image_id": inside,
                "outcome": "rejected",
                "reason": "tones must be whole numbers like 4 or 3+4; time_spent_s a number of seconds",
            },
            {"row": 5, "image_id": inside, "outcome": "imported", "reason": ""},
            {
                "row": 6,
                "image_id": inside,
                "outcome": "rejected",
                "reason": "this labeler already has a label for this image in this phase",
            },
        ],
    }
    label = Label.objects.get(phase=phase, labeler=labelers[0])
    assert label.uncertain and label.time_spent_ms == 1500 and label.revisions.get().author == lead
    draft = project.phases.get(kind=Phase.Kind.MAIN)
    with pytest.raises(ValidationError, match="Open the phase"):
        labels_import(phase=draft, data=csv, user=lead)


def test_a_label_imported_into_calibration_2_keeps_its_repeat_flag(project, labelers, lead):
    add_images(project, 10)
    calibration_configure(project=project, size=6, calibration_1_size=3, n_repeated=2, seed=1)
    cal1 = phase_open(phase=phase_get(project, "calibration_1"), labels_per_image=2)
    for m in labelers:
        label_all(cal1, m)
    phase_close(phase=cal1)
    cal2 = phase_open(phase=phase_get(project, "calibration_2"), labels_per_image=1)
    a = cal2.assignments.filter(is_repeat=True, done_at__isnull=True).select_related("image", "labeler").first()
    data = f"image_id,labeler,tones\n{a.image.external_id},{a.labeler.pseudonym},4\n".encode()
    report = labels_import(phase=cal2, data=data, user=lead)
    assert report["imported"] == 1
    label = Label.objects.get(phase=cal2, image=a.image, labeler=a.labeler)
    assert label.is_repeat  # a retest label stays out of between-labeler statistics


def test_a_row_with_an_extra_cell_is_rejected_and_nothing_half_imported(project, labelers, lead, client_for):
    images = add_images(project, 3)
    calibration_configure(project=project, size=3, calibration_1_size=3, n_repeated=0, seed=1)
    phase = phase_open(phase=phase_get(project, "calibration_1"), labels_per_image=4)
    ids = [i.external_id for i in images]
    csv = f"image_id,labeler,tones\n{ids[0]},L1,4\n{ids[1]},L1,4,EXTRA\n".encode()
    r = client_for(lead).post(
        f"/api/phases/{phase.id}/labels-import/", {"file": SimpleUploadedFile("l.csv", csv)}, format="multipart"
    )
    assert r.status_code == 200, (r.status_code, Label.objects.count())


def test_an_infinite_time_spent_is_rejected_with_its_row(project, labelers, lead):
    images = add_images(project, 2)
    calibration_configure(project=project, size=2, calibration_1_size=2, n_repeated=0, seed=1)
    phase = phase_open(phase=phase_get(project, "calibration_1"), labels_per_image=4)
    rows = f"{images[0].external_id},L1,4,1\n{images[1].external_id},L1,4,inf\n"
    report = labels_import(phase=phase, data=f"image_id,labeler,tones,time_spent_s\n{rows}".encode(), user=lead)
    assert report["rejected"] == 1
