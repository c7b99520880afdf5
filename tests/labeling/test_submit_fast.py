"""The labeling hot path (``services.submit_fast`` behind ``api.views.submit_fast``) answers exactly as the
general view does, stores the same rows, and leaves every other case, refusals first, to the general view.

PostgreSQL only (the one statement is PostgreSQL's): run by CI's second stage. Transactional tests: the fast
path stands aside inside a transaction, as a test's would be.
"""

import threading
import uuid

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client

from labeling.models import Image, Label, LabelRevision, Membership
from tests.factories import MembershipFactory, ProjectFactory, UserFactory
from tests.labeling.helpers import add_box_images, add_images, open_calibration_1

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="the fast path is one PostgreSQL statement (CI stage 2 runs it)"
    ),
]


@pytest.fixture
def fast_calls(monkeypatch):
    """What the fast path answered for each submit: a ``Stored`` or None (left to the general view)."""
    from labeling.api.views import submit_fast as view_module

    calls = []
    real = view_module.submit_fast

    def spy(**kwargs):
        result = real(**kwargs)
        calls.append(result)
        return result

    monkeypatch.setattr(view_module, "submit_fast", spy)
    return calls


@pytest.fixture
def phase(project, labelers):
    project.allow_adjacent_pairs = True
    project.offer_uncertain = True
    project.save()
    add_images(project, 8)
    return open_calibration_1(project, size=8, cal1=8, labels_per_image=4)


def url(phase, general=False):
    # ?format=json: the same request, answered by the general view (the fast path leaves it alone).
    return f"/api/phases/{phase.id}/labels/" + ("?format=json" if general else "")


def next_image(api, phase) -> int:
    return api.get(f"/api/phases/{phase.id}/next/").json()["current"]["image"]["id"]


def row_fields(label: Label) -> dict:
    revision = label.revisions.get()
    return {
        "label": {
            f: getattr(label, f)
            for f in (
                "phase_id",
                "image_id",
                "is_repeat",
                "tone_low",
                "tone_high",
                "value",
                "uncertain",
                "skip_reason",
                "is_valid",
                "n_revisions",
                "time_spent_ms",
            )
        },
        "revision": {
            f: getattr(revision, f)
            for f in (
                "number",
                "source",
                "tone_low",
                "tone_high",
                "value",
                "uncertain",
                "skip_reason",
                "time_spent_ms",
                "tone_order",
                "client_info",
                "reason",
            )
        },
        "author_is_labeler": revision.author_id == label.labeler.user_id,
        "assignment_done": label.assignment.done_at is not None,
    }


ANSWERS = [
    {"tones": [4]},
    {"tones": [5, 4]},
    {"tones": [7, 7]},
    {"tones": [], "skip_reason": "  no skin visible "},
    {
        "tones": [3],
        "uncertain": True,
        "time_spent_ms": 4100,
        "tone_order": list(range(10, 0, -1)),
        "client_info": {"devicePixelRatio": 2, "ua": "x" * 300, "nested": {"a": 1}, "n": None},
    },
]


@pytest.mark.parametrize("answer", ANSWERS, ids=["one", "pair", "same-twice", "skip", "everything"])
def test_a_first_answer_is_stored_and_answered_as_the_general_view_does(
    phase, labelers, client_for, fast_calls, answer
):
    fast_api, general_api = client_for(labelers[0].user), client_for(labelers[1].user)
    answers = {}
    for api, general in ((fast_api, False), (general_api, True)):
        image = next_image(api, phase)
        body = {"client_id": str(uuid.uuid4()), "image": image, **answer}
        r = api.post(url(phase, general), body, format="json")
        assert r.status_code == 201, r.content
        answers[general] = (r, image)
    assert len(fast_calls) == 1 and fast_calls[0] is not None and not fast_calls[0].replayed

    (fast, fast_image), (slow, slow_image) = answers[False], answers[True]
    assert fast["Content-Type"] == slow["Content-Type"] == "application/json"
    assert fast["Allow"] == slow["Allow"] and fast["Vary"] == slow["Vary"]
    f, s = fast.json(), slow.json()
    assert set(f) == set(s) == {"label", "revision", "next", "preload"}
    assert f["revision"] == s["revision"] == 1
    for side in (f, s):
        side["label"].pop("id")
        side["label"].pop("updated_at")
        side["label"].pop("image")
    assert f["label"] == s["label"]
    # What comes next is the labeler's own queue, as GET next/ gives it.
    for api, data in ((fast_api, f), (general_api, s)):
        queue = api.get(f"/api/phases/{phase.id}/next/").json()
        assert data["next"] == queue["current"] and data["preload"] == queue["preload"]

    fast_label = Label.objects.get(labeler=labelers[0])
    slow_label = Label.objects.get(labeler=labelers[1])
    assert fast_label.image_id == fast_image and slow_label.image_id == slow_image
    expected, got = row_fields(slow_label), row_fields(fast_label)
    expected["label"].pop("image_id"), got["label"].pop("image_id")
    assert got == expected


@pytest.fixture
def boxed_phase(project, labelers):
    """Every image one person's box in a group photo (issue 23): the payloads carry the box."""
    add_box_images(project, 8)
    return open_calibration_1(project, size=8, cal1=8, labels_per_image=4)


def test_a_box_comes_next_with_its_box_as_the_general_view_gives_it(boxed_phase, labelers, client_for, fast_calls):
    phase = boxed_phase
    for labeler, general in ((labelers[0], False), (labelers[1], True)):
        api = client_for(labeler.user)
        body = {"client_id": str(uuid.uuid4()), "image": next_image(api, phase), "tones": [4]}
        data = api.post(url(phase, general), body, format="json").json()
        queue = api.get(f"/api/phases/{phase.id}/next/").json()
        assert data["next"] == queue["current"] and data["preload"] == queue["preload"]
        for assignment in (data["next"], data["preload"]):
            image = Image.objects.get(pk=assignment["image"]["id"])
            assert assignment["image"]["box"] == image.box_dict and image.box is not None
    assert len(fast_calls) == 1 and fast_calls[0] is not None


def test_the_answer_bytes_match_the_general_view(phase, labelers, client_for):
    """Same labeler, same image: the second submit is a replay, so both paths answer the same label."""
    api = client_for(labelers[0].user)
    body = {"client_id": str(uuid.uuid4()), "image": next_image(api, phase), "tones": [6]}
    first = api.post(url(phase), body, format="json")
    fast_replay = api.post(url(phase), body, format="json")
    general_replay = api.post(url(phase, general=True), body, format="json")
    assert first.status_code == 201
    assert fast_replay.status_code == general_replay.status_code == 200
    assert fast_replay.content == general_replay.content
    assert fast_replay.json()["label"] == first.json()["label"]


def test_a_replay_stores_nothing_and_answers_the_stored_label(phase, labelers, client_for, fast_calls):
    api = client_for(labelers[0].user)
    body = {"client_id": str(uuid.uuid4()), "image": next_image(api, phase), "tones": [2]}
    first = api.post(url(phase), body, format="json").json()
    # A retry with another answer under the same id is still the same submit (as the general view).
    again = api.post(url(phase), {**body, "tones": [9]}, format="json")
    assert again.status_code == 200 and again.json()["label"] == first["label"]
    assert [c.replayed for c in fast_calls] == [False, True]
    assert Label.objects.count() == 1 and LabelRevision.objects.count() == 1


def test_two_submits_at_once_store_one_label(phase, labelers, client_for):
    from django.db import connections

    api = client_for(labelers[0].user)
    body = {"client_id": str(uuid.uuid4()), "image": next_image(api, phase), "tones": [5]}
    answers, barrier = [], threading.Barrier(4)

    def send():
        try:
            barrier.wait()
            answers.append(api.post(url(phase), body, format="json"))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=send) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.status_code for r in answers) == [200, 200, 200, 201]
    assert len({r.json()["label"]["id"] for r in answers}) == 1
    assert Label.objects.count() == 1 and LabelRevision.objects.count() == 1


def refusal_cases():
    """(name, how to set up, body change, expected status, a fragment of the message)."""
    return [
        ("off the scale", None, {"tones": [11]}, 400, "not on this scale"),
        ("zero", None, {"tones": [0]}, 400, "not on this scale"),
        ("not adjacent", None, {"tones": [2, 5]}, 400, "not adjacent"),
        ("pairs not allowed", {"allow_adjacent_pairs": False}, {"tones": [2, 3]}, 400, "single tone"),
        ("uncertain not offered", {"offer_uncertain": False}, {"tones": [2], "uncertain": True}, 400, "uncertain"),
        ("unknown skip reason", None, {"tones": [], "skip_reason": "boredom"}, 400, "Unknown skip reason"),
        ("skip with a tone", None, {"tones": [3], "skip_reason": "other"}, 400, "no tone"),
        ("no tone", None, {"tones": []}, 400, "Choose a tone"),
        ("part of a tone order", None, {"tones": [3], "tone_order": [1, 2, 3]}, 400, "every tone"),
        ("negative time", None, {"tones": [3], "time_spent_ms": -1}, 400, "time_spent_ms"),
        ("not my image", None, {"tones": [3], "image": 10**9}, 403, "not assigned"),
        ("beyond bigint", None, {"tones": [3], "image": 10**20}, 400, "image"),
        ("a bad client id", None, {"tones": [3], "client_id": "123"}, 400, "client_id"),
        ("tones as text", None, {"tones": ["x"]}, 400, "tones"),
    ]


@pytest.mark.parametrize(
    "name, setup, change, status, fragment", refusal_cases(), ids=lambda v: v if isinstance(v, str) else None
)
def test_refusals_are_the_general_views(phase, labelers, client_for, fast_calls, name, setup, change, status, fragment):
    if setup:
        for field, value in setup.items():
            setattr(phase.project, field, value)
        phase.project.save()
    api = client_for(labelers[0].user)
    body = {"client_id": str(uuid.uuid4()), "image": next_image(api, phase), **change}
    fast = api.post(url(phase), body, format="json")
    general = api.post(url(phase, general=True), body, format="json")
    assert fast.status_code == general.status_code == status, fast.content
    assert fast.content == general.content and fragment in fast.content.decode()
    assert all(c is None for c in fast_calls)  # called or not, the fast path stored nothing
    assert not Label.objects.exists() and not LabelRevision.objects.exists()


def test_who_may_submit_is_the_general_views_rule(phase, project, labelers, lead, client_for, fast_calls):
    image = phase.assignments.filter(labeler=labelers[0]).order_by("position").first().image_id
    body = {"client_id": str(uuid.uuid4()), "image": image, "tones": [3]}
    other_project = ProjectFactory(created_by=UserFactory())
    stranger = MembershipFactory(project=other_project, user=UserFactory(), pseudonym="X1")
    reviewer = MembershipFactory(project=project, user=UserFactory(), pseudonym="R1", role=Membership.Role.REVIEWER)
    cases = [
        (client_for(lead), 403),  # the lead is no labeler
        (client_for(reviewer.user), 403),
        (client_for(stranger.user), 404),
    ]
    bad_token = client_for(labelers[0].user)
    bad_token.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
    cases.append((bad_token, 401))
    for api, status in cases:
        r = api.post(url(phase), body, format="json")
        assert r.status_code == status, r.content
        assert r.content == api.post(url(phase, general=True), body, format="json").content
    # A deactivated membership, a deactivated account.
    labelers[0].is_active = False
    labelers[0].save()
    r = client_for(labelers[0].user).post(url(phase), body, format="json")
    assert r.status_code == 404
    labelers[0].is_active = True
    labelers[0].save()
    labelers[0].user.is_active = False
    labelers[0].user.save()
    # The fast path reads the account at once; the general view's token cache may pass it for up to
    # TOKEN_CACHE_SECONDS (test_api.test_deactivated_user_is_refused).
    cache.clear()
    assert client_for(labelers[0].user).post(url(phase), body, format="json").status_code == 401
    assert all(c is None for c in fast_calls)
    assert not Label.objects.exists()


def test_a_closed_phase_or_an_archived_project_refuses(phase, project, labelers, lead, client_for, fast_calls):
    from labeling.services.project_lifecycle import project_archive

    api = client_for(labelers[0].user)
    body = {"client_id": str(uuid.uuid4()), "image": next_image(api, phase), "tones": [3]}
    project_archive(project=project, user=lead)
    r = api.post(url(phase), body, format="json")
    assert r.status_code == 400 and "archived" in r.content.decode()
    project.archived_at = None
    project.save()
    assert client_for(lead).post(f"/api/phases/{phase.id}/close/").status_code == 200
    r = api.post(url(phase), body, format="json")
    assert r.status_code == 400 and "closed" in r.content.decode()
    assert all(c is None for c in fast_calls) and not Label.objects.exists()


def test_a_session_needs_its_csrf_token(phase, labelers, fast_calls):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(labelers[0].user)
    image = phase.assignments.filter(labeler=labelers[0]).order_by("position").first().image_id
    body = {"client_id": str(uuid.uuid4()), "image": image, "tones": [3]}
    refused = browser.post(url(phase), body, content_type="application/json")
    assert refused.status_code == 403 and "CSRF" in refused.content.decode()
    secret = "a" * 32
    browser.cookies["csrftoken"] = secret
    r = browser.post(url(phase), body, content_type="application/json", HTTP_X_CSRFTOKEN=secret)
    assert r.status_code == 201, r.content
    assert [c is not None for c in fast_calls] == [True]


def test_html_and_changed_answers_go_to_the_general_view(phase, labelers, client_for, fast_calls):
    api = client_for(labelers[0].user)
    image = next_image(api, phase)
    first = api.post(url(phase), {"client_id": str(uuid.uuid4()), "image": image, "tones": [3]}, format="json")
    # Going back to change the answer: the general view adds the labeler's revision 2.
    change = api.post(url(phase), {"client_id": str(uuid.uuid4()), "image": image, "tones": [4]}, format="json")
    assert first.status_code == 201 and change.status_code == 200 and change.json()["revision"] == 2
    assert [c is not None for c in fast_calls] == [True, False]
    # A browser asking for HTML gets DRF's page, as before.
    r = api.post(
        url(phase),
        {"client_id": str(uuid.uuid4()), "image": next_image(api, phase), "tones": [5]},
        format="json",
        HTTP_ACCEPT="text/html",
    )
    assert r.status_code == 201 and r["Content-Type"].startswith("text/html")
    assert len(fast_calls) == 2


def test_the_statements_are_prepared_once_per_connection(phase, labelers, client_for, settings):
    api = client_for(labelers[0].user)
    for tone in (3, 4, 5):
        r = api.post(
            url(phase),
            {"client_id": str(uuid.uuid4()), "image": next_image(api, phase), "tones": [tone]},
            format="json",
        )
        assert r.status_code == 201
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", ["%labeling_labelrevision%"]
        )
        assert cursor.fetchone()[0] == 1
    # Behind a pooler that cannot keep prepared statements: the same answers, nothing prepared.
    settings.FAIRTONE = {**settings.FAIRTONE, "PREPARED_SUBMIT": False}
    connection.close()
    r = api.post(
        url(phase), {"client_id": str(uuid.uuid4()), "image": next_image(api, phase), "tones": [6]}, format="json"
    )
    assert r.status_code == 201
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements")
        assert cursor.fetchone()[0] == 0
    assert Label.objects.count() == 4


def test_the_statement_is_seen_by_djangos_query_logging_and_wrappers(phase, labelers, client_for, fast_calls):
    """Issue 24: the fast statement bypassed Django's query tracking; now query counts and monitoring see it."""
    from django.test.utils import CaptureQueriesContext

    api = client_for(labelers[0].user)
    image = next_image(api, phase)
    seen = []

    def wrapper(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with CaptureQueriesContext(connection) as queries, connection.execute_wrapper(wrapper):
        r = api.post(url(phase), {"client_id": str(uuid.uuid4()), "image": image, "tones": [4]}, format="json")
    assert r.status_code == 201 and len(fast_calls) == 1
    logged = [q for q in queries.captured_queries if "fairtone fast submit: first" in q["sql"]]
    assert len(logged) == 1 and "labeling_labelrevision" in logged[0]["sql"] and float(logged[0]["time"]) >= 0
    assert any("labeling_labelrevision" in sql and "INSERT" in sql.upper() for sql in seen)
