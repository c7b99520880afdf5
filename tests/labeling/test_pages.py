"""Lead and labeler pages: they render, they are guarded by role, forms report errors."""

import pytest
from django.core.exceptions import ValidationError

from labeling.models import Project
from labeling.services.projects import tone_examples_set
from tests.labeling.helpers import add_images, open_calibration_1, submit

pytestmark = pytest.mark.django_db


def lead_pages(project, phase):
    return [
        f"/projects/{project.id}/",
        f"/projects/{project.id}/settings/",
        f"/projects/{project.id}/images/",
        f"/projects/{project.id}/images/?key=gender&value=woman",
        f"/projects/{project.id}/import/",
        f"/projects/{project.id}/members/",
        f"/projects/{project.id}/examples/",
        f"/projects/{project.id}/calibration/",
        f"/phases/{phase.id}/",
        f"/phases/{phase.id}/review/",
        f"/images/{project.images.first().id}/",
    ]


def test_lead_pages_render_and_labelers_get_404(client, project, lead, labelers):
    add_images(project, 4)
    phase = open_calibration_1(project, size=4, cal1=4)
    a = phase.assignments.filter(labeler=labelers[1]).first()
    submit(phase, labelers[1], a.image_id, tones=[2])
    client.force_login(lead)
    for url in lead_pages(project, phase):
        r = client.get(url)
        assert r.status_code == 200, url
    client.force_login(labelers[0].user)
    for url in lead_pages(project, phase):
        assert client.get(url).status_code == 404, url
    assert client.get("/").status_code == 200
    assert client.get(f"/phases/{phase.id}/label/").status_code == 200
    assert client.get(f"/phases/{phase.id}/reflection/").status_code == 200


def test_anonymous_is_sent_to_login(client, project):
    for url in ["/", f"/projects/{project.id}/", "/projects/new/"]:
        r = client.get(url)
        assert r.status_code == 302 and r.url.startswith("/login/")


def test_project_form_reports_errors_and_creates_custom_scale(client, lead):
    client.force_login(lead)
    r = client.post("/projects/new/", {"name": "", "labels_per_image": 0, "skip_reasons": "x"})
    assert r.status_code == 200 and b"errorlist" in r.content
    r = client.post(
        "/projects/new/",
        {
            "name": "Custom",
            "labels_per_image": 3,
            "skip_reasons": "no skin visible",
            "custom_tones": "pale, #eeeeee\nnot a tone",
        },
    )
    assert r.status_code == 200 and "Line 2" in r.content.decode()
    r = client.post(
        "/projects/new/",
        {
            "name": "Custom",
            "labels_per_image": 3,
            "skip_reasons": "no skin visible",
            "custom_tones": "pale, #eeeeee\ndeep, #222222\n",
            "allow_adjacent_pairs": "on",
        },
    )
    assert r.status_code == 302
    project = Project.objects.get(name="Custom")
    assert [t.name for t in project.ordered_tones()] == ["pale", "deep"]
    assert project.phases.count() == 4 and project.memberships.get(user=lead).role == "lead"


def test_members_page_adds_a_labeler_with_profile(client, project, lead):
    client.force_login(lead)
    r = client.post(
        f"/projects/{project.id}/members/",
        {"username": "ana", "password": "long-password-1", "role": "labeler", "region_of_upbringing": "Andes"},
    )
    assert r.status_code == 302
    m = project.memberships.get(user__username="ana")
    assert m.pseudonym == "L01" and m.region_of_upbringing == "Andes"
    r = client.post(f"/projects/{project.id}/members/", {"username": "bo", "password": "short", "role": "labeler"})
    assert "at least 8" in r.content.decode()


def test_phase_page_controls(client, project, lead, labelers):
    add_images(project, 6)
    client.force_login(lead)
    r = client.post(
        f"/projects/{project.id}/calibration/",
        {"size": 4, "calibration_1_size": 2, "n_repeated": 1, "seed": 3, "accept_too_few": "on"},
    )
    assert r.status_code == 302
    cal1 = project.phases.get(kind="calibration_1")
    r = client.post(
        f"/phases/{cal1.id}/",
        {"action": "open", "labeler_ids": [labelers[0].id, labelers[1].id], "labels_per_image": 2},
    )
    cal1.refresh_from_db()
    assert cal1.status == "open" and set(cal1.participants.values_list("labeler_id", flat=True)) == {
        labelers[0].id,
        labelers[1].id,
    }
    r = client.get(f"/phases/{cal1.id}/", HTTP_ACCEPT="application/json")
    assert r.json()["assigned"] == 4
    cal2 = project.phases.get(kind="calibration_2")
    r = client.post(f"/phases/{cal2.id}/", {"action": "open"}, follow=True)
    assert "Close Calibration 1 first" in r.content.decode()


def test_tone_examples_are_shown_to_labelers(client, project, lead, labelers):
    images = add_images(project, 3)
    phase = open_calibration_1(project, size=2, cal1=2)
    queued = set(phase.phase_images.values_list("image_id", flat=True))
    example = next(i for i in images if i.id not in queued)
    with pytest.raises(ValidationError, match="Not in this project"):
        tone_examples_set(project=project, tone_position=6, external_ids=["nope"])
    with pytest.raises(ValidationError, match="not on this project's scale"):
        tone_examples_set(project=project, tone_position=42, external_ids=[example.external_id])
    client.force_login(labelers[0].user)
    assert client.get(f"/images/{example.id}/file/display/").status_code == 404
    tone_examples_set(project=project, tone_position=6, external_ids=[example.external_id])
    page = client.get(f"/phases/{phase.id}/label/").content.decode()
    assert f"/images/{example.id}/file/display/" in page
    assert client.get(f"/images/{example.id}/file/display/").status_code == 200
    client.force_login(lead)
    r = client.post(f"/projects/{project.id}/examples/", {"tone_6": "missing-id"})
    assert "Not in this project" in r.content.decode()


def test_password_guessing_is_slowed_down(client, lead):
    for _ in range(10):
        r = client.post("/login/", {"username": "lead", "password": "wrong"})
        assert r.status_code == 200
    r = client.post("/login/", {"username": "lead", "password": "pw-test-123"})
    assert r.status_code == 429 and "Too many failed attempts" in r.content.decode()
    # Another username from the same address is not locked out.
    from tests.factories import UserFactory

    UserFactory(username="other")
    assert client.post("/login/", {"username": "other", "password": "pw-test-123"}).status_code == 302


def test_token_endpoint_is_rate_limited(lead):
    from rest_framework.test import APIClient

    api = APIClient()
    codes = [
        api.post("/api/auth/token/", {"username": "lead", "password": "wrong"}, format="json").status_code
        for _ in range(25)
    ]
    assert codes[0] == 400 and codes[-1] == 429


def test_members_page_and_api_add_people_the_same_way(client, project, lead):
    """One service behind both: a new person needs a password; an existing account is added only by staff or the
    lead who created it (tests/labeling/test_enrolment.py)."""
    from rest_framework.test import APIClient

    from tests.factories import UserFactory

    client.force_login(lead)
    r = client.post(f"/projects/{project.id}/members/", {"username": "nopass", "role": "labeler"})
    page = r.content.decode()
    assert "No account is called “nopass”" in page and "also give a password" in page
    assert "password:" not in page and "username:" not in page
    api = APIClient()
    api.force_authenticate(lead)
    r = api.post(f"/api/projects/{project.id}/members/", {"username": "nopass"}, format="json")
    assert r.status_code == 400 and "No account is called" in r.json()["username"][0]
    UserFactory(username="known")
    r = client.post(f"/projects/{project.id}/members/", {"username": "known", "role": "reviewer"})
    assert r.status_code == 200 and not project.memberships.filter(user__username="known").exists()
