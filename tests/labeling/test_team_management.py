"""A lead manages the team (issue 23, "A lead cannot undo a team mistake"): role changes, deactivation and
reactivation on the API and the team page, the last lead protected, every change audited; relabel requests to a
deactivated labeler refused; an existing username given with a password refused instead of "added"."""

import uuid

import pytest

from labeling.models import AuditEntry, Membership, Phase
from labeling.services import phases as phase_services
from tests.factories import ProjectFactory, UserFactory
from tests.labeling.helpers import add_images, open_calibration_1, submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def lead_api(lead, client_for):
    return client_for(lead)


def _url(project, member) -> str:
    return f"/api/projects/{project.pk}/members/{member.pk}/"


def _lead_membership(project):
    return project.memberships.get(role=Membership.Role.LEAD)


def test_lead_changes_role_and_deactivates_with_audit(project, labelers, lead_api):
    m = labelers[0]
    r = lead_api.patch(_url(project, m), {"role": "reviewer"}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["role"] == "reviewer" and r.json()["is_active"] is True
    r = lead_api.patch(_url(project, m), {"role": "labeler", "is_active": False}, format="json")
    assert r.status_code == 200 and r.json() == {**r.json(), "role": "labeler", "is_active": False}
    m.refresh_from_db()
    assert m.role == "labeler" and not m.is_active
    r = lead_api.patch(_url(project, m), {"is_active": True}, format="json")
    assert r.status_code == 200 and r.json()["is_active"] is True
    actions = list(
        AuditEntry.objects.filter(project_id=project.pk, object_id=str(m.pk))
        .order_by("id")
        .values_list("action", "username")
    )
    assert [a for a, _ in actions if a != "membership.add"] == [
        "membership.role",
        "membership.role",
        "membership.deactivate",
        "membership.reactivate",
    ]
    assert {u for a, u in actions if a != "membership.add"} == {"lead"}
    # Unknown role, unknown member, a member of another project.
    assert lead_api.patch(_url(project, m), {"role": "boss"}, format="json").status_code == 400
    assert lead_api.patch(f"/api/projects/{project.pk}/members/999999/", {}, format="json").status_code == 404
    assert lead_api.patch(f"/api/projects/{project.pk}/members/{10**30}/", {}, format="json").status_code == 404
    other = ProjectFactory(created_by=UserFactory(username="other-lead"))
    stranger = other.memberships.first()
    assert lead_api.patch(_url(project, stranger), {"is_active": False}, format="json").status_code == 404


def test_only_leads_of_the_project(project, labelers, client_for):
    target = labelers[1]
    r = client_for(labelers[0].user).patch(_url(project, target), {"is_active": False}, format="json")
    assert r.status_code == 403  # a member with another role, as on the other member routes
    outsider = ProjectFactory(created_by=UserFactory(username="other-lead"))
    r = client_for(outsider.created_by).patch(_url(project, target), {"is_active": False}, format="json")
    assert r.status_code == 404  # not a member: the project is not disclosed
    target.refresh_from_db()
    assert target.is_active


def test_the_last_lead_is_protected(project, labelers, lead_api, lead):
    me = _lead_membership(project)
    r = lead_api.patch(_url(project, me), {"role": "labeler"}, format="json")
    assert r.status_code == 400 and "last active lead" in r.json()["role"][0]
    r = lead_api.patch(_url(project, me), {"is_active": False}, format="json")
    assert r.status_code == 400 and "last active lead" in r.json()["is_active"][0]
    me.refresh_from_db()
    assert me.role == "lead" and me.is_active
    # With a second lead, the first may step down.
    assert lead_api.patch(_url(project, labelers[0]), {"role": "lead"}, format="json").status_code == 200
    assert lead_api.patch(_url(project, me), {"role": "reviewer"}, format="json").status_code == 200
    assert not AuditEntry.objects.filter(project_id=project.pk, object_id=str(me.pk), action="membership.deactivate")


def test_a_deactivated_labeler_cannot_submit(project, labelers, lead_api, client_for):
    add_images(project, 3)
    cal1 = open_calibration_1(project, size=3, cal1=3)
    api = client_for(labelers[0].user)
    image_id = api.get(f"/api/phases/{cal1.id}/next/").json()["current"]["image"]["id"]
    assert lead_api.patch(_url(project, labelers[0]), {"is_active": False}, format="json").status_code == 200
    payload = {"client_id": str(uuid.uuid4()), "image": image_id, "tones": [4]}
    r = api.post(f"/api/phases/{cal1.id}/labels/", payload, format="json")
    assert r.status_code in (403, 404), r.content
    assert not cal1.labels.filter(labeler=labelers[0]).exists()
    assert api.get(f"/api/projects/{project.pk}/").status_code == 404


def test_relabel_to_a_deactivated_labeler_is_refused(project, labelers, lead_api):
    add_images(project, 3)
    cal1 = open_calibration_1(project, size=3, cal1=3)
    image_id = cal1.phase_images.first().image_id
    for m in labelers:
        submit(cal1, m, image_id, tones=[4])
    phase_services.phase_close(phase=cal1)
    post = phase_services.phase_get(project, Phase.Kind.POST_CALIBRATION)
    Phase.objects.filter(pk=post.pk).update(status=Phase.Status.OPEN)
    gone = labelers[0]
    assert lead_api.patch(_url(project, gone), {"is_active": False}, format="json").status_code == 200
    url = f"/api/images/{image_id}/relabel/"
    r = lead_api.post(url, {"labeler_ids": [gone.pk, labelers[1].pk], "reason": "look again"}, format="json")
    assert r.status_code == 400 and gone.pseudonym in str(r.json()) and "deactivated" in str(r.json())
    assert not post.assignments.exists()  # nothing partial
    r = lead_api.post(url, {"labeler_ids": [labelers[1].pk], "reason": "look again"}, format="json")
    assert r.status_code == 201 and r.json()["requested"] == 1
    # The data manager's default (those who labelled it) leaves the deactivated labeler out.
    bulk = f"/api/projects/{project.pk}/data/bulk/"
    r = lead_api.post(bulk, {"action": "relabel", "image_ids": [image_id], "reason": "again"}, format="json")
    assert r.status_code == 200, r.content
    assert not post.assignments.filter(labeler=gone).exists()
    assert post.assignments.filter(image_id=image_id).count() == len(labelers) - 1


def test_existing_username_with_a_password_is_refused(project, lead_api, lead):
    r = lead_api.post(
        f"/api/projects/{project.pk}/members/", {"username": "newbie", "password": "long-enough-pw"}, format="json"
    )
    assert r.status_code == 201
    second = ProjectFactory(created_by=lead)
    url = f"/api/projects/{second.pk}/members/"
    r = lead_api.post(url, {"username": "newbie", "password": "another-password"}, format="json")
    assert r.status_code == 400 and "password is not changed" in r.json()["password"][0]
    assert not second.memberships.filter(user__username="newbie").exists()
    assert lead_api.post(url, {"username": "newbie"}, format="json").status_code == 201


def test_team_page_manages_members_and_marks_the_inactive(project, labelers, lead, client):
    client.force_login(lead)
    page = f"/projects/{project.pk}/members/"
    m = labelers[0]
    r = client.post(page, {"action": "deactivate", "member": m.pk}, follow=True)
    assert r.status_code == 200 and "is deactivated" in r.content.decode()
    m.refresh_from_db()
    assert not m.is_active
    html = client.get(page).content.decode()
    assert "<strong>inactive</strong>" in html and 'value="reactivate"' in html
    r = client.post(page, {"action": "role", "member": m.pk, "role": "reviewer"}, follow=True)
    assert "is now fairness reviewer" in r.content.decode()
    m.refresh_from_db()
    assert m.role == "reviewer"
    r = client.post(page, {"action": "reactivate", "member": m.pk}, follow=True)
    m.refresh_from_db()
    assert m.is_active and "active again" in r.content.decode()
    # The last lead: refused, with the reason on the page.
    r = client.post(page, {"action": "deactivate", "member": _lead_membership(project).pk}, follow=True)
    assert "last active lead" in r.content.decode()
    assert _lead_membership(project).is_active
    r = client.post(page, {"action": "deactivate", "member": "abc"}, follow=True)
    assert "No such member" in r.content.decode()
    # An existing sign-in (this lead's) given with a password, on the page too: refused, not "added".
    assert client.post(page, {"username": "newbie", "password": "long-enough-pw", "role": "labeler"}).status_code == 302
    second = ProjectFactory(created_by=lead)
    r = client.post(
        f"/projects/{second.pk}/members/", {"username": "newbie", "password": "another-password", "role": "labeler"}
    )
    assert r.status_code == 200 and "password is not changed here" in r.content.decode()
    assert not second.memberships.filter(user__username="newbie").exists()
    assert AuditEntry.objects.filter(project_id=project.pk, action="membership.deactivate").count() == 1


def test_data_manager_marks_inactive_labelers_and_leaves_them_out_of_relabel(project, labelers, lead, client):
    Membership.objects.filter(pk=labelers[0].pk).update(is_active=False)
    client.force_login(lead)
    html = client.get(f"/projects/{project.pk}/data/").content.decode()
    assert f"{labelers[0].pseudonym} (inactive)</option>" in html
    assert f'name="labeler_ids" value="{labelers[0].pk}"' not in html
    assert f'name="labeler_ids" value="{labelers[1].pk}"' in html
    overview = client.get(f"/projects/{project.pk}/").content.decode()
    assert "(inactive)" in overview
