"""Issue 13, item 6: no enrolment of someone else's account, and no username enumeration.

A lead could put any existing account into their project without its owner's consent, and the
"a new person needs a password" answer told whether a username exists. Now a lead adds only the
sign-ins they created (staff: any account); for any other username the answer is the same whether
or not an account has it.
"""

import re

import pytest
from rest_framework.test import APIClient

from labeling.models import Membership
from tests.factories import ProjectFactory, UserFactory

pytestmark = pytest.mark.django_db


def api_for(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def add(api, project, **body):
    return api.post(f"/api/projects/{project.id}/members/", {"role": "labeler", **body}, format="json")


def test_a_lead_cannot_enrol_someone_elses_account(project, lead):
    stranger = UserFactory(username="alice")
    r = add(api_for(lead), project, username="alice")
    assert r.status_code == 400
    assert not Membership.objects.filter(user=stranger).exists()


def test_the_answer_does_not_tell_whether_a_username_exists(project, lead, client):
    UserFactory(username="alice")
    api = api_for(lead)
    existing = add(api, project, username="alice").json()
    missing = add(api, project, username="zed-nobody").json()
    assert existing == {"username": [missing["username"][0].replace("zed-nobody", "alice")]}
    client.force_login(lead)
    pages = [
        client.post(f"/projects/{project.id}/members/", {"username": name, "role": "labeler"}).content.decode()
        for name in ("alice", "zed-nobody")
    ]
    csrf = re.compile(r'name="csrfmiddlewaretoken" value="[^"]*"')
    assert csrf.sub("", pages[0]).replace("alice", "X") == csrf.sub("", pages[1]).replace("zed-nobody", "X")


def test_a_lead_adds_the_sign_ins_they_created_to_their_other_projects(project, lead):
    api = api_for(lead)
    assert add(api, project, username="bob", password="long-enough-pw").status_code == 201
    second = ProjectFactory(created_by=lead)
    r = add(api, second, username="bob")
    assert r.status_code == 201 and r.json()["username"] == "bob"
    # Another lead may not add the account the first lead created.
    other_lead = UserFactory(username="carol")
    third = ProjectFactory(created_by=other_lead)
    assert add(api_for(other_lead), third, username="bob").status_code == 400
    assert not third.memberships.filter(user__username="bob").exists()


def test_staff_may_add_any_account(project):
    UserFactory(username="alice")
    staff = UserFactory(username="admin", is_staff=True, is_superuser=True)
    r = add(api_for(staff), project, username="alice")
    assert r.status_code == 201
