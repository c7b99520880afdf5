"""Issue 14, missing basics: every account changes its password and can ask for a reset link by mail, without a
way around the sign-in brake (``labeling.signin``) and without saying whether an address has an account."""

import re

import pytest
from django.core import mail
from django.test import Client

from labeling.signin import MAX_FAILURES
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PASSWORD = "pw-test-123"
NEW_PASSWORD = "a-new-Passphrase-42"


@pytest.fixture
def person(db):
    return UserFactory(username="person", email="Person@Example.org")


def signs_in(username: str, password: str, address: str = "192.0.2.9") -> bool:
    r = Client(REMOTE_ADDR=address).post("/login/", {"username": username, "password": password})
    return r.status_code == 302


def change(client, old: str, new: str = NEW_PASSWORD, address: str = "192.0.2.1"):
    return client.post(
        "/account/password/",
        {"old_password": old, "new_password1": new, "new_password2": new},
        REMOTE_ADDR=address,
    )


def test_an_account_changes_its_password(client, person):
    client.force_login(person)
    page = client.get("/account/password/")
    assert page.status_code == 200 and b"Current password" in page.content
    r = change(client, PASSWORD)
    assert r.status_code == 302 and r["Location"] == "/account/password/done/"
    assert client.get("/").status_code == 200  # still signed in here
    assert signs_in("person", NEW_PASSWORD) and not signs_in("person", PASSWORD)


def test_the_header_and_the_sign_in_page_link_the_password_pages(client, person):
    assert b'href="/account/password-reset/"' in client.get("/login/").content
    client.force_login(person)
    assert b'href="/account/password/"' in client.get("/").content


def test_a_wrong_current_password_counts_against_the_brake_and_the_brake_holds(client, person):
    client.force_login(person)
    for i in range(MAX_FAILURES):
        r = change(client, f"guess{i}", address=f"198.51.100.{i}")
        assert r.status_code == 200 and b"That is not your current password." in r.content
    # Locked: the right current password is refused too, here and at the sign-in page.
    r = change(client, PASSWORD, address="203.0.113.7")
    assert r.status_code == 429
    assert not signs_in("person", PASSWORD)
    person.refresh_from_db()
    assert person.check_password(PASSWORD)


def test_a_username_locked_at_the_sign_in_page_cannot_change_its_password(client, person):
    for i in range(MAX_FAILURES):
        Client(REMOTE_ADDR=f"10.9.0.{i}").post("/login/", {"username": "person", "password": f"g{i}"})
    client.force_login(person)
    assert change(client, PASSWORD).status_code == 429
    person.refresh_from_db()
    assert person.check_password(PASSWORD)


def reset(email: str, address: str = "192.0.2.50"):
    return Client(REMOTE_ADDR=address).post("/account/password-reset/", {"email": email})


def test_reset_mails_a_link_that_sets_a_new_password(person):
    r = reset("person@example.org")
    assert r.status_code == 302 and r["Location"] == "/account/password-reset/sent/"
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["Person@Example.org"] and "new password" in message.subject
    link = re.search(r"http://testserver(/account/reset/\S+/)", message.body).group(1)
    browser = Client()
    form = browser.get(link, follow=True)
    assert form.status_code == 200 and b"Choose a new password" in form.content
    set_url = form.redirect_chain[-1][0]
    done = browser.post(set_url, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert done.status_code == 302 and done["Location"] == "/account/reset/done/"
    assert signs_in("person", NEW_PASSWORD) and not signs_in("person", PASSWORD)
    # The link works once.
    assert b"This link does not work" in Client().get(link, follow=True).content


def test_reset_answers_the_same_for_an_unknown_address(person):
    known = reset("person@example.org", address="192.0.2.51")
    unknown = reset("nobody@example.org", address="192.0.2.52")
    assert (known.status_code, known["Location"]) == (unknown.status_code, unknown["Location"])
    assert len(mail.outbox) == 1
    page_known = Client().get(known["Location"]).content
    assert page_known == Client().get(unknown["Location"]).content


def test_reset_does_not_lift_the_brake(person):
    for i in range(MAX_FAILURES):
        Client(REMOTE_ADDR=f"10.8.0.{i}").post("/login/", {"username": "person", "password": f"g{i}"})
    reset("person@example.org")
    link = re.search(r"http://testserver(/account/reset/\S+/)", mail.outbox[0].body).group(1)
    browser = Client()
    set_url = browser.get(link, follow=True).redirect_chain[-1][0]
    browser.post(set_url, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    person.refresh_from_db()
    assert person.check_password(NEW_PASSWORD)
    # The new password is right, but the username stays locked until its window ends.
    r = Client(REMOTE_ADDR="10.7.7.7").post("/login/", {"username": "person", "password": NEW_PASSWORD})
    assert r.status_code == 429


def test_reset_requests_share_the_per_address_rate(person):
    codes = [reset(f"someone{i}@example.org", address="192.0.2.77").status_code for i in range(25)]
    assert codes[:20] == [302] * 20 and set(codes[20:]) == {429}
