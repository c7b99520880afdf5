"""Issue 13, item 4: a lead's correction never reaches the labeler, and the labeler's own later change
never silently replaces it. Corrections and the labeler's answers are two lines of history; the rule
for which counts is ``labeling.services.labels.revision_counts``."""

import uuid

import pytest

from labeling.models import Label
from tests.labeling.helpers import add_images, open_calibration_1

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup(project, labelers, lead, client_for):
    add_images(project, 4)
    phase = open_calibration_1(project, size=4, cal1=4)
    m = labelers[0]
    image_id = phase.assignments.filter(labeler=m).order_by("position").first().image_id
    return phase, m, image_id, client_for(m.user), client_for(lead)


def submit(api, phase, image_id, tones):
    r = api.post(
        f"/api/phases/{phase.id}/labels/",
        {"client_id": str(uuid.uuid4()), "image": image_id, "tones": tones},
        format="json",
    )
    assert r.status_code in (200, 201), r.content
    return r.json()


def mine(api, phase, image_id):
    rows = api.get(f"/api/phases/{phase.id}/labels/").json()
    return next(r for r in rows if r["image"] == image_id)


def test_the_labeler_never_sees_a_lead_correction(setup):
    phase, m, image_id, labeler_api, lead_api = setup
    label_id = submit(labeler_api, phase, image_id, [2])["label"]["id"]
    r = lead_api.post(f"/api/labels/{label_id}/corrections/", {"tones": [7], "reason": "slip"}, format="json")
    assert r.status_code == 201
    assert Label.objects.get(pk=label_id).value == 7  # the correction counts for consensus and releases

    row = mine(labeler_api, phase, image_id)
    assert (row["tones"], row["value"], row["n_revisions"]) == ([2], 2.0, 1)
    body = labeler_api.get(f"/api/phases/{phase.id}/labels/").content.decode()
    assert "slip" not in body


def test_a_labeler_change_after_a_correction_keeps_both_lines_and_the_correction_counts(setup, lead):
    phase, m, image_id, labeler_api, lead_api = setup
    label_id = submit(labeler_api, phase, image_id, [2])["label"]["id"]
    lead_api.post(f"/api/labels/{label_id}/corrections/", {"tones": [7], "reason": "slip"}, format="json")

    changed = submit(labeler_api, phase, image_id, [3])
    # The labeler sees their own second answer, numbered among their own.
    assert (changed["label"]["tones"], changed["label"]["n_revisions"], changed["revision"]) == ([3], 2, 2)
    row = mine(labeler_api, phase, image_id)
    assert (row["tones"], row["n_revisions"]) == ([3], 2)
    # The correction still counts; nothing was lost from either line.
    label = Label.objects.get(pk=label_id)
    assert (label.tone_low, label.value) == (7, 7.0)
    revisions = lead_api.get(f"/api/labels/{label_id}/revisions/").json()
    assert [(r["number"], r["source"], r["tone_low"]) for r in revisions] == [
        (1, "labeler", 2),
        (2, "correction", 7),
        (3, "change", 3),
    ]
    # A later correction by the lead counts again.
    lead_api.post(f"/api/labels/{label_id}/corrections/", {"tones": [4], "reason": "looked again"}, format="json")
    assert Label.objects.get(pk=label_id).value == 4.0
    assert mine(labeler_api, phase, image_id)["tones"] == [3]


def test_release_current_revision_follows_the_same_rule():
    """The release's per-label facts name the revision the label mirrors, not a later own change."""
    import numpy as np

    from labeling.services.releases.finalise import revision_facts

    # Rows by label and number: label 1 = own answer, a correction, a later own change; label 2 = two own
    # answers; label 3 = a correction, then a second correction.
    label_ids = np.array([1, 1, 1, 2, 2, 3, 3])
    is_correction = np.array([False, True, False, False, False, True, True])
    is_own_change = np.array([True, False, True, True, True, False, False])
    starts, current, latest_correction = revision_facts(label_ids, is_correction, is_own_change)
    assert starts.tolist() == [0, 3, 5]
    assert current.tolist() == [1, 4, 6]
    assert latest_correction.tolist() == [1, -1, 6]


def test_a_revision_never_changes_in_the_database_either(setup):
    """Migration 0016: raw SQL and the ORM's update() cannot rewrite history; only the author's deletion
    (``SET NULL``) touches a revision, and only its ``author_id``."""
    from django.contrib.auth import get_user_model
    from django.db import IntegrityError, connection, transaction

    from labeling.models import LabelRevision
    from labeling.services.labels import label_correct

    phase, m, image_id, labeler_api, _lead_api = setup
    submit(labeler_api, phase, image_id, [4])
    revision = LabelRevision.objects.get()
    someone_else = get_user_model().objects.exclude(pk=m.user_id).first()
    for change in (
        lambda: LabelRevision.objects.filter(pk=revision.pk).update(tone_low=9, value=9.0),
        lambda: LabelRevision.objects.filter(pk=revision.pk).update(reason="rewritten"),
        lambda: LabelRevision.objects.filter(pk=revision.pk).update(author=someone_else),
    ):
        with pytest.raises(IntegrityError, match="never changed"), transaction.atomic():
            change()
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE labeling_labelrevision SET tone_low = 1, value = 1.0")
    revision.refresh_from_db()
    assert (revision.tone_low, revision.value, revision.reason) == (4, 4.0, "")

    # A staff member's correction, then their account is deleted: the correction stays, without an author.
    staff = get_user_model().objects.create(username="staff-corrector", is_staff=True, is_superuser=True)
    label = Label.objects.get()
    correction = label_correct(label=label, user=staff, reason="wrong tone", tones=[6])
    staff.delete()
    correction.refresh_from_db()
    assert correction.author_id is None and correction.tone_low == 6 and correction.reason == "wrong tone"
