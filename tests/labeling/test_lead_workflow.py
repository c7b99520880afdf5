"""Issue 14, the lead's workflow: closing with a confirmation, reopening with a recorded reason."""

import pytest

from labeling.models import Phase, PhaseReopening
from labeling.services.phases import phase_close, phase_close_summary, phase_get, phase_open, phase_reopen
from tests.labeling.helpers import add_images, label_all, open_calibration_1

pytestmark = pytest.mark.django_db


def test_close_summary_counts_unfinished_assignments(project, labelers):
    add_images(project, 6)
    cal1 = open_calibration_1(project, labels_per_image=2)
    label_all(cal1, labelers[0])
    summary = phase_close_summary(cal1)
    assert summary["n_unfinished"] == 12 - cal1.assignments.filter(labeler=labelers[0]).count()
    assert labelers[0].pseudonym not in summary["unfinished_by_labeler"]
    assert sum(summary["unfinished_by_labeler"].values()) == summary["n_unfinished"]


def test_reopen_is_recorded_and_only_before_the_next_phase_starts(project, labelers, lead):
    add_images(project, 6)
    cal1 = open_calibration_1(project, size=4, cal1=2, labels_per_image=2)
    phase_close(phase=cal1)
    with pytest.raises(Exception, match="Say why"):
        phase_reopen(phase=cal1, user=lead, reason="  ")
    phase_reopen(phase=cal1, user=lead, reason="Closed by mistake")
    cal1.refresh_from_db()
    assert cal1.status == Phase.Status.OPEN and cal1.closed_at is None
    reopening = PhaseReopening.objects.get(phase=cal1)
    assert reopening.reason == "Closed by mistake" and reopening.reopened_by == lead and reopening.closed_at
    with pytest.raises(Exception, match="not closed"):
        phase_reopen(phase=cal1, user=lead, reason="again")
    phase_close(phase=cal1)
    phase_open(phase=phase_get(project, Phase.Kind.CALIBRATION_2))
    with pytest.raises(Exception, match="Calibration 2 has already started"):
        phase_reopen(phase=cal1, user=lead, reason="too late")


def test_reopen_api(project, labelers, lead, client_for):
    add_images(project, 6)
    cal1 = open_calibration_1(project, size=4, cal1=2, labels_per_image=2)
    api = client_for(lead)
    summary = api.get(f"/api/phases/{cal1.id}/close-summary/").json()
    assert summary == {
        "n_unfinished": 4,
        "unfinished_by_labeler": {"L1": 1, "L2": 1, "L3": 1, "L4": 1},
        "can_reopen_after_close": True,
    }
    assert api.post(f"/api/phases/{cal1.id}/close/").status_code == 200
    assert api.post(f"/api/phases/{cal1.id}/reopen/", {}, format="json").json() == {
        "reason": ["This field is required."]
    }
    for bad in ([1], {"reason": 5 * "x" * 1000}, "nonsense"):
        assert api.post(f"/api/phases/{cal1.id}/reopen/", bad, format="json").status_code == 400
    answer = api.post(f"/api/phases/{cal1.id}/reopen/", {"reason": "One labeler was ill"}, format="json")
    assert answer.status_code == 200
    body = answer.json()
    assert body["status"] == "open" and body["reopenings"][0]["reason"] == "One labeler was ill"
    assert body["reopenings"][0]["reopened_by"] == lead.username
    assert api.post(f"/api/phases/{cal1.id}/reopen/", {"reason": "x"}, format="json").json() == {
        "detail": "Calibration 1 is open, not closed."
    }
    labeler_api = client_for(labelers[0].user)
    assert labeler_api.post(f"/api/phases/{cal1.id}/reopen/", {"reason": "x"}, format="json").status_code == 403


def test_phase_page_confirms_close_and_reopens(project, labelers, lead, client):
    add_images(project, 6)
    cal1 = open_calibration_1(project, size=4, cal1=2, labels_per_image=2)
    client.force_login(lead)
    page = client.get(f"/phases/{cal1.id}/").content.decode()
    assert "4 assignments will stay unfinished" in page.replace("</strong>", "").replace(
        '<strong id="n-unfinished">', ""
    )
    # Without the confirmation nothing closes.
    client.post(f"/phases/{cal1.id}/", {"action": "close"})
    cal1.refresh_from_db()
    assert cal1.status == Phase.Status.OPEN
    client.post(f"/phases/{cal1.id}/", {"action": "close", "confirm": "yes"})
    cal1.refresh_from_db()
    assert cal1.status == Phase.Status.CLOSED
    answer = client.post(f"/phases/{cal1.id}/", {"action": "reopen", "reason": ""}, follow=True)
    assert "Say why the phase is reopened" in answer.content.decode()
    client.post(f"/phases/{cal1.id}/", {"action": "reopen", "reason": "Mis-click"})
    cal1.refresh_from_db()
    assert cal1.status == Phase.Status.OPEN
    assert "Mis-click" in client.get(f"/phases/{cal1.id}/").content.decode()


def test_new_project_form_defaults_to_monk_and_a_name_is_enough(client, lead):
    import re

    from labeling.models import Project, Scale

    client.force_login(lead)
    page = client.get("/projects/new/").content.decode()
    selected = re.search(r'<option value="(\d+)" selected>([^<]*)</option>', page)
    monk = Scale.objects.get(kind="monk", is_builtin=True)
    assert selected and int(selected.group(1)) == monk.pk, "Monk is the scale a new project starts with"
    # What the browser sends when the lead types a name only: the form's initial values.
    r = client.post(
        "/projects/new/",
        {"name": "Just a name", "scale": selected.group(1), "labels_per_image": 4, "skip_reasons": "no skin visible"},
    )
    assert r.status_code == 302
    assert Project.objects.get(name="Just a name").scale == monk


def test_member_form_messages_are_plain_words(client, project, lead, labelers):
    client.force_login(lead)
    already = client.post(
        f"/projects/{project.id}/members/", {"username": labelers[0].user.username, "role": "labeler"}
    ).content.decode()
    assert f"{labelers[0].user.username} is already a member of this project." in already
    unknown = client.post(
        f"/projects/{project.id}/members/", {"username": "nobody", "password": "short", "role": "labeler"}
    ).content.decode()
    assert "No account is called “nobody”" in unknown
    for page in (already, unknown):
        assert "user:" not in page and "password:" not in page and "username:" not in page
