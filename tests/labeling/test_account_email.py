"""Issue 14, password reset for every account: a lead gives the email address of a sign-in they create, the members
page shows it, every person sets or changes their own on their account page, and the reset page says plainly what
happens to an account without one (without ever saying whether an account exists)."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client

from labeling.models import Membership, SigninFailure
from labeling.signin import MAX_FAILURES, username_key
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

PASSWORD = "pw-test-123"
NEW_PASSWORD = "a-new-Passphrase-42"


def signs_in(username: str, password: str) -> bool:
    return (
        Client(REMOTE_ADDR="192.0.2.9").post("/login/", {"username": username, "password": password}).status_code == 302
    )


def test_a_lead_gives_the_email_of_a_new_sign_in_on_the_members_page(client, lead, project):
    MembershipFactory(project=project, pseudonym="L7", user=UserFactory(username="quiet", email=""))
    client.force_login(lead)
    page = client.get(f"/projects/{project.pk}/members/").content.decode()
    assert "Email (recommended)" in page and "reset a forgotten password" in page
    r = client.post(
        f"/projects/{project.pk}/members/",
        {"username": "ada", "password": "long-enough-1", "email": " Ada@Example.ORG ", "role": "labeler"},
    )
    assert r.status_code == 302
    ada = get_user_model().objects.get(username="ada")
    assert ada.email == "Ada@example.org"  # stripped, the domain in lower case
    page = client.get(f"/projects/{project.pk}/members/").content.decode()
    assert "Ada@example.org" in page
    # A member without an address is shown as such.
    quiet_row = next(row for row in page.split("<tr>") if "quiet" in row)
    assert ">none<" in quiet_row


def test_the_email_is_optional_and_checked(client, lead, project):
    client.force_login(lead)
    url = f"/projects/{project.pk}/members/"
    r = client.post(url, {"username": "bob", "password": "long-enough-1", "email": "not an address", "role": "labeler"})
    assert r.status_code == 200 and "Give an email address such as name@example.org" in r.content.decode()
    assert not get_user_model().objects.filter(username="bob").exists()
    r = client.post(url, {"username": "bob", "password": "long-enough-1", "role": "labeler"})
    assert r.status_code == 302 and get_user_model().objects.get(username="bob").email == ""


def test_the_api_takes_and_shows_the_email(lead, project, client_for):
    api = client_for(lead)
    url = f"/api/projects/{project.pk}/members/"
    r = api.post(url, {"username": "cy", "password": "long-enough-1", "email": "cy@example.org"}, format="json")
    assert r.status_code == 201 and r.json()["email"] == "cy@example.org"
    r = api.post(url, {"username": "di", "password": "long-enough-1", "email": "di@"}, format="json")
    assert r.status_code == 400 and "name@example.org" in r.json()["email"][0]
    assert not get_user_model().objects.filter(username="di").exists()
    emails = {m["username"]: m["email"] for m in api.get(url).json()}
    assert emails["cy"] == "cy@example.org" and emails[lead.username] == lead.email


def test_an_existing_account_keeps_its_own_address(lead, project, client_for):
    """A lead re-adding a sign-in they created cannot point its password resets elsewhere."""
    from labeling.services import projects as project_services

    other = project_services.project_create(name="Second study", created_by=lead)
    api = client_for(lead)
    api.post(
        f"/api/projects/{project.pk}/members/",
        {"username": "eve", "password": "long-enough-1", "email": "eve@example.org"},
        format="json",
    )
    r = api.post(f"/api/projects/{other.pk}/members/", {"username": "eve", "email": "lead@evil.example"}, format="json")
    assert r.status_code == 400 and "theirs to set" in r.json()["email"][0]
    assert get_user_model().objects.get(username="eve").email == "eve@example.org"
    assert not other.memberships.filter(user__username="eve").exists()
    # The same address, or none, adds them.
    r = api.post(f"/api/projects/{other.pk}/members/", {"username": "eve", "email": ""}, format="json")
    assert r.status_code == 201


def test_the_reset_mail_of_a_lead_created_account_arrives_with_a_working_link(lead, project, client_for):
    client_for(lead).post(
        f"/api/projects/{project.pk}/members/",
        {"username": "fay", "password": PASSWORD, "email": "fay@example.org"},
        format="json",
    )
    mail.outbox.clear()
    r = Client(REMOTE_ADDR="192.0.2.60").post("/account/password-reset/", {"email": "FAY@example.org"})
    assert r.status_code == 302 and r["Location"] == "/account/password-reset/sent/"
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["fay@example.org"]
    assert "fay" in mail.outbox[0].body
    link = re.search(r"http://testserver(/account/reset/\S+/)", mail.outbox[0].body).group(1)
    browser = Client()
    form = browser.get(link, follow=True)
    assert form.status_code == 200 and b"Choose a new password" in form.content
    done = browser.post(form.redirect_chain[-1][0], {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert done.status_code == 302 and done["Location"] == "/account/reset/done/"
    assert signs_in("fay", NEW_PASSWORD) and not signs_in("fay", PASSWORD)


def test_the_reset_pages_say_plainly_what_happens_without_an_address_and_nothing_about_accounts(lead, project):
    MembershipFactory(project=project, pseudonym="L8", user=UserFactory(username="noaddress", email=""))
    lead.email = "lead@example.org"
    lead.save()
    form = Client().get("/account/password-reset/").content.decode()
    assert "an account a project lead created may have none" in form and "ask your project lead" in form
    # An address no account has and an account's address: the same answer (only the second gets a mail).
    mail.outbox.clear()
    answers = [
        Client(REMOTE_ADDR=f"192.0.2.{70 + i}").post("/account/password-reset/", {"email": email})
        for i, email in enumerate(["nobody@example.org", "lead@example.org"])
    ]
    assert [(a.status_code, a["Location"]) for a in answers] == [(302, "/account/password-reset/sent/")] * 2
    assert len(mail.outbox) == 1  # the lead's, who has an address
    sent = Client().get("/account/password-reset/sent/").content.decode()
    assert "An account without an email address gets no mail" in sent and "ask your project lead" in sent


@pytest.fixture
def person(db):
    return UserFactory(username="person", email="")


def test_every_account_sets_and_changes_its_own_address(client, person):
    client.force_login(person)
    assert b'href="/account/"' in client.get("/").content
    page = client.get("/account/").content.decode()
    assert 'id="no-email"' in page and "ask your project lead" in page and "/account/password/" in page
    r = client.post("/account/", {"email": "me@Example.org", "password": PASSWORD})
    assert r.status_code == 302 and r["Location"] == "/account/"
    person.refresh_from_db()
    assert person.email == "me@example.org"
    page = client.get("/account/").content.decode()
    assert "me@example.org" in page and 'id="no-email"' not in page
    r = client.post("/account/", {"email": "new@example.org", "password": PASSWORD})
    assert r.status_code == 302
    person.refresh_from_db()
    assert person.email == "new@example.org"
    # Removing it is allowed too.
    assert client.post("/account/", {"email": "", "password": PASSWORD}).status_code == 302
    person.refresh_from_db()
    assert person.email == ""


def test_the_previous_address_is_told_of_the_change(client, person, django_capture_on_commit_callbacks):
    person.email = "old@example.org"
    person.save()
    client.force_login(person)
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/account/", {"email": "new@example.org", "password": PASSWORD})
    assert [m.to for m in mail.outbox] == [["old@example.org"]]
    assert "new@example.org" in mail.outbox[0].body and "person" in mail.outbox[0].body


def test_changing_the_address_needs_the_current_password_and_counts_against_the_brake(client, person):
    client.force_login(person)
    r = client.post("/account/", {"email": "thief@example.org", "password": "wrong-guess"}, REMOTE_ADDR="198.51.100.1")
    assert r.status_code == 200 and "That is not your current password." in r.content.decode()
    assert SigninFailure.objects.get(username=username_key("person")).failures == 1
    r = client.post("/account/", {"email": "not-an-address", "password": PASSWORD}, REMOTE_ADDR="198.51.100.2")
    assert r.status_code == 200 and "name@example.org" in r.content.decode()
    for i in range(MAX_FAILURES):
        client.post(
            "/account/", {"email": "thief@example.org", "password": f"g{i}"}, REMOTE_ADDR=f"198.51.100.{10 + i}"
        )
    # Locked: even the right password is refused, and nothing changed.
    r = client.post("/account/", {"email": "thief@example.org", "password": PASSWORD}, REMOTE_ADDR="203.0.113.9")
    assert r.status_code == 429
    person.refresh_from_db()
    assert person.email == ""


def test_the_account_page_is_for_signed_in_people_only(client):
    r = client.get("/account/")
    assert r.status_code == 302 and r["Location"].startswith("/login/")
    assert Membership.objects.count() == 0


def test_a_lead_gives_an_address_to_a_sign_in_they_created_and_mails_it_a_reset_link(lead, project, client_for):
    """A lead-created sign-in without an address: its lead adds one (never replaces one) and can mail a reset
    link that works; another lead of the project, who did not create it, can do neither."""
    client_for(lead).post(
        f"/api/projects/{project.pk}/members/", {"username": "gus", "password": PASSWORD}, format="json"
    )
    gus = Membership.objects.get(project=project, user__username="gus")
    other_lead = UserFactory(username="other-lead")
    MembershipFactory(project=project, user=other_lead, role=Membership.Role.LEAD, pseudonym="LEAD2")
    browser = Client()
    browser.force_login(lead)
    page = browser.get(f"/projects/{project.pk}/members/").content.decode()
    assert 'name="action" value="email"' in page
    r = browser.post(f"/projects/{project.pk}/members/", {"action": "email", "member": gus.pk, "email": "gus@x.org"})
    assert r.status_code == 302
    gus.user.refresh_from_db()
    assert gus.user.email == "gus@x.org"
    # Never replaced by a lead (only the owner changes it).
    browser.post(f"/projects/{project.pk}/members/", {"action": "email", "member": gus.pk, "email": "evil@x.org"})
    gus.user.refresh_from_db()
    assert gus.user.email == "gus@x.org"
    # Another lead did not create the sign-in: no reset link from them.
    other = Client()
    other.force_login(other_lead)
    mail.outbox.clear()
    other.post(f"/projects/{project.pk}/members/", {"action": "reset", "member": gus.pk}, follow=True)
    assert mail.outbox == []
    assert 'value="reset"' not in other.get(f"/projects/{project.pk}/members/").content.decode()
    # Its creator mails the link; it sets a new password.
    done = browser.post(f"/projects/{project.pk}/members/", {"action": "reset", "member": gus.pk}, follow=True)
    assert b"A password reset link was mailed to gus" in done.content
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["gus@x.org"]
    link = re.search(r"http://testserver(/account/reset/\S+/)", mail.outbox[0].body).group(1)
    stranger = Client()
    form = stranger.get(link, follow=True)
    stranger.post(form.redirect_chain[-1][0], {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert signs_in("gus", NEW_PASSWORD)
