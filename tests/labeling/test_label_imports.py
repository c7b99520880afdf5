import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from labeling.models import Label
from labeling.services.review import review_candidates
from tests.labeling.helpers import add_images, open_calibration_1
from tests.labeling.test_api import client_for

pytestmark = pytest.mark.django_db


def test_import_labels_with_per_row_report_and_invalid_pairs_flagged(project, labelers, lead):
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


def test_import_refuses_bad_files(project, labelers, lead):
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
