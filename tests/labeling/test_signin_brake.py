"""Issue 13, item 3: one per-username failure counter shared by every way in, and the client address
taken only from the configured number of trusted proxies (``NUM_PROXIES``)."""

import pytest
from django.test import override_settings
from rest_framework.settings import api_settings
from rest_framework.test import APIClient

from labeling.models import SigninFailure
from labeling.signin import MAX_FAILURES, username_key
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PASSWORD = "pw-test-123"


@pytest.fixture
def victim(db):
    return UserFactory(username="victim")


def token(api, username, password, address, forwarded=None):
    extra = {"REMOTE_ADDR": address}
    if forwarded:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded
    return api.post("/api/auth/token/", {"username": username, "password": password}, format="json", **extra)


def test_guesses_from_many_addresses_and_forwarded_headers_share_one_counter(victim):
    api = APIClient()
    codes = [
        token(api, "victim", f"guess{i}", f"198.51.100.{i}", forwarded=f"203.0.113.{i}").status_code
        for i in range(MAX_FAILURES + 5)
    ]
    assert codes[:MAX_FAILURES] == [400] * MAX_FAILURES
    assert set(codes[MAX_FAILURES:]) == {429}
    # The right password from yet another address is refused too while the brake holds; so is the page.
    assert token(api, "victim", PASSWORD, "192.0.2.200").status_code == 429
    assert (
        APIClient(REMOTE_ADDR="192.0.2.201").post("/login/", {"username": "victim", "password": PASSWORD}).status_code
        == 429
    )


def test_locked_out_of_the_page_means_no_token_either(client, victim):
    for i in range(MAX_FAILURES):
        assert (
            client.post("/login/", {"username": "Victim ", "password": f"g{i}"}, REMOTE_ADDR="10.1.1.1").status_code
            == 200
        )
    r = token(APIClient(), "victim", PASSWORD, "10.2.2.2")
    assert r.status_code == 429 and "token" not in r.json()


def test_a_right_password_resets_the_counter(victim):
    api = APIClient()
    for i in range(MAX_FAILURES - 1):
        token(api, "victim", f"g{i}", "10.0.0.1")
    assert token(api, "victim", PASSWORD, "10.0.0.1").status_code == 200
    for i in range(MAX_FAILURES - 1):
        assert token(api, "victim", f"h{i}", "10.0.0.1").status_code == 400
    assert token(api, "victim", PASSWORD, "10.0.0.1").status_code == 200


def test_a_forged_forwarded_for_does_not_escape_the_address_rate(db):
    """Different usernames (no per-username lock), one real address, a new X-Forwarded-For each time."""
    api = APIClient()
    codes = [token(api, f"user{i}", "x", "10.9.9.9", forwarded=f"203.0.113.{i}").status_code for i in range(25)]
    assert codes[0] == 400 and codes[-1] == 429


def test_behind_one_trusted_proxy_the_address_is_the_one_it_added(db):
    """NUM_PROXIES=1: the last X-Forwarded-For entry counts; whatever the client put before it is ignored."""
    rest = {**api_settings.user_settings, "NUM_PROXIES": 1}
    with override_settings(REST_FRAMEWORK=rest):
        api_settings.reload()
        try:
            api = APIClient()
            codes = [
                token(api, f"user{i}", "x", "10.0.0.2", forwarded=f"203.0.113.{i}, 198.51.100.7").status_code
                for i in range(25)
            ]
            assert codes[0] == 400 and codes[-1] == 429
            # Another client behind the same proxy is not slowed down by the first one.
            assert token(api, "someone", "x", "10.0.0.2", forwarded="198.51.100.8").status_code == 400
        finally:
            api_settings.reload()
    api_settings.reload()


# --------------------------------------------------------------------------- issue 26: one counter per account


def test_fullwidth_and_other_nfkc_variants_of_a_name_count_for_the_account_they_sign_in_to(client):
    UserFactory(username="labA1")
    variants = ["ｌａｂＡ１", "labＡ1", "ｌabA1", "LABA1", " labA1 "]  # NFKC: "labA1" (the last two: case, space)
    codes = [
        client.post(
            "/login/", {"username": variants[i % len(variants)], "password": f"g{i}"}, REMOTE_ADDR=f"10.2.0.{i}"
        ).status_code
        for i in range(MAX_FAILURES)
    ]
    assert set(codes) == {200}  # the form again, with its error
    # Locked: the right password is refused too, through the page and through the API.
    assert (
        client.post("/login/", {"username": "labA1", "password": PASSWORD}, REMOTE_ADDR="10.2.1.1").status_code == 429
    )
    assert token(APIClient(), "ｌａｂＡ１", PASSWORD, "10.2.1.2").status_code == 429
    assert SigninFailure.objects.count() == 1


def test_an_account_whose_name_differs_in_case_keeps_its_own_counter(client):
    victim = UserFactory(username="labA1")
    # Two accounts that differ only in case (made before new names had to differ by more: straight in the table).
    other = UserFactory(username="LABA1")
    for i in range(MAX_FAILURES - 1):
        client.post("/login/", {"username": "labA1", "password": f"g{i}"}, REMOTE_ADDR="10.3.0.1")
    # The other account signs in: the victim's counter stays.
    assert (
        client.post("/login/", {"username": "LABA1", "password": PASSWORD}, REMOTE_ADDR="10.3.0.2").status_code == 302
    )
    assert SigninFailure.objects.get(username=username_key("labA1")).failures == MAX_FAILURES - 1
    assert username_key("labA1") == f"#{victim.pk}" and username_key("LABA1") == f"#{other.pk}"
    client.post("/logout/")
    client.post("/login/", {"username": "labA1", "password": "last"}, REMOTE_ADDR="10.3.0.3")
    assert (
        client.post("/login/", {"username": "labA1", "password": PASSWORD}, REMOTE_ADDR="10.3.0.4").status_code == 429
    )


def test_names_without_an_account_are_counted_by_their_fold():
    assert username_key("ＮＯＢＯＤＹ") == username_key("nobody ") == "nobody"
    assert username_key("") == username_key("   ") == username_key(None) == ""


@pytest.mark.parametrize("typed", ["LABA1", "ｌａｂＡ１", "Laba1"])
def test_a_new_username_that_reads_like_an_existing_one_is_refused(typed, project):
    from django.core.exceptions import ValidationError

    from labeling.services.projects import labeler_create

    UserFactory(username="labA1")
    with pytest.raises(ValidationError) as caught:
        labeler_create(project=project, username=typed, password="long-enough-1")
    message = str(caught.value)
    assert "labA1" in message and ("only in case" in message or "is taken" in message)
