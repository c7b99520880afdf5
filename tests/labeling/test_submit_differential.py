"""The submit's rules are one fact (issue 24): a randomised differential test of the fast path
(``services.submit_fast``, one SQL statement) against the general view (``services.labels.label_submit``).

Hypothesis draws a state (membership role and activity, the account's activity, the phase open or closed,
the project archived or not, pairs allowed, "uncertain" offered, the project's skip reasons) and a payload
(tones on and off the scale, pairs, skips, "uncertain", times, tone orders, client info, foreign images,
wrong types). Two labelers in the same state each submit the same payload to their own next image, one
through the fast route and one through the general view (``?format=json``). Both must answer the same
status and message and store the same rows. A rule added to one path only makes them differ: adding to
the general view "refuse uncertain answers under 100 ms" (three lines) fails this test at once, where the
27 hand-picked cases of ``test_submit_fast.py`` stayed green (that rule is in the table now). Valid values are
drawn over their whole range, ends included: "an uncertain answer within the hour" planted in the general
view alone (session 41) went unseen while valid times were drawn under 1,000 s, and now fails it in 20 s
with the payload that splits the paths (``time_spent_ms`` 3,931,355, uncertain: fast 201, general 400).

Both paths take their rules from one table (``services.submit_rules``); this test finds a rule written
outside it, in one path, on the states and payloads drawn here (a rule on a state not drawn, e.g. the
project's name, goes unseen: the table is the guard there, ``test_submit_rules.py``).

PostgreSQL only (the one statement is PostgreSQL's): CI's second stage runs it; locally ``bin/test-submit``
(PostgreSQL on 127.0.0.1:5432, or ``DATABASE_URL``).
"""

import uuid

import pytest
from django.core.cache import cache
from django.db import connection
from django.db.models import Q
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labeling.models import Image, Label, Membership, Phase
from labeling.services.submit_rules import MAX_CLIENT_INFO_KEYS, MAX_TIME_SPENT_MS
from tests.factories import MembershipFactory, UserFactory
from tests.labeling.helpers import add_box_images, add_images, open_calibration_1
from tests.labeling.test_submit_fast import row_fields

pytestmark = pytest.mark.django_db(transaction=True)
postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the fast path is one PostgreSQL statement (CI stage 2 runs it)"
)

EXAMPLES = 120
REASONS = ["no skin visible", "too dark", "other"]

# A valid state and answer, then none, one or two things off their rule: a rule that one path lacks
# shows within a few examples (a fully random payload is refused by both paths almost always).
STATE_FAULTS = {
    "role": st.sampled_from([Membership.Role.REVIEWER, Membership.Role.LEAD]),
    "membership_active": st.just(False),
    "user_active": st.just(False),
    "phase_open": st.just(False),
    "archived": st.just(True),
}
PAYLOAD_FAULTS = {
    "tones": st.one_of(
        st.lists(st.one_of(st.integers(-1, 12), st.just("3"), st.none(), st.floats(1, 10)), max_size=3),
        st.lists(st.integers(1, 10), min_size=2, max_size=3),
        st.just([]),
        st.just("4"),
    ),
    "uncertain": st.one_of(st.none(), st.just("yes"), st.just(1)),
    "skip_reason": st.one_of(st.sampled_from(["  other ", "boredom", "no skin visible"]), st.none()),
    "time_spent_ms": st.one_of(
        st.integers(-5, -1), st.just(MAX_TIME_SPENT_MS + 1), st.integers(10**8, 10**9), st.just("12"), st.none()
    ),
    "tone_order": st.one_of(st.lists(st.integers(0, 11), max_size=11), st.just("1,2"), st.just([])),
    "client_info": st.one_of(st.just([]), st.just("x"), st.none()),
    "image": st.sampled_from(["foreign", "text", "huge", "zero"]),
    "client_id": st.sampled_from(["123", "", None]),
}


@st.composite
def cases(draw):
    state = {
        "role": Membership.Role.LABELER,
        "membership_active": True,
        "user_active": True,
        "phase_open": True,
        "archived": False,
        "pairs": draw(st.booleans()),
        "uncertain": draw(st.booleans()),
        "reasons": draw(st.sampled_from([REASONS, REASONS[:1], []])),
    }
    low = draw(st.integers(1, 10))
    pair = state["pairs"] and low < 10 and draw(st.booleans())
    payload = {"tones": [low, low + 1] if pair else [low]}
    if draw(st.booleans()):
        payload["uncertain"] = state["uncertain"] and draw(st.booleans())
    if draw(st.booleans()):
        # Valid values over their whole range, the ends included: a rule on a band of valid times (an
        # uncertain answer within the hour, say) shows as readily as one on a short time.
        payload["time_spent_ms"] = draw(
            st.one_of(
                st.integers(0, 300),
                st.integers(0, MAX_TIME_SPENT_MS),
                st.sampled_from([0, 99, 100, 3_600_000, MAX_TIME_SPENT_MS]),
            )
        )
    if draw(st.booleans()):
        payload["tone_order"] = draw(st.permutations(list(range(1, 11))))
    if draw(st.booleans()):
        payload["client_info"] = draw(
            st.dictionaries(
                st.one_of(st.sampled_from(["ua", "dpr", "w"]), st.text(min_size=1, max_size=70)),
                st.one_of(st.integers(), st.text(max_size=5), st.booleans(), st.none(), st.text(max_size=250)),
                max_size=MAX_CLIENT_INFO_KEYS + 5,
            )
        )
    if state["reasons"] and draw(st.integers(0, 4)) == 0:  # a valid skip
        payload = {**payload, "tones": [], "skip_reason": draw(st.sampled_from(state["reasons"]))}
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 1, 2]))):
        key = draw(st.sampled_from(sorted(STATE_FAULTS) + sorted(PAYLOAD_FAULTS)))
        if key in STATE_FAULTS:
            state[key] = draw(STATE_FAULTS[key])
        else:
            payload[key] = draw(PAYLOAD_FAULTS[key])
    return state, payload


@pytest.fixture
def world(project, lead):
    """Two labelers with the same 70 images each (40 whole photos, 30 people's boxes in group photos), in an
    open calibration 1."""
    fast = MembershipFactory(project=project, user=UserFactory(username="fast"), pseudonym="F1")
    general = MembershipFactory(project=project, user=UserFactory(username="general"), pseudonym="G1")
    add_images(project, 40)
    add_box_images(project, 30)
    phase = open_calibration_1(project, size=70, cal1=70, labels_per_image=2)
    return {"project": project, "phase": phase, "fast": fast, "general": general}


@pytest.fixture
def small_world(project, lead):
    """The same two labelers with two images each: what the kill switch's two submits need."""
    fast = MembershipFactory(project=project, user=UserFactory(username="fast"), pseudonym="F1")
    general = MembershipFactory(project=project, user=UserFactory(username="general"), pseudonym="G1")
    add_images(project, 2)
    phase = open_calibration_1(project, size=2, cal1=2, labels_per_image=2)
    return {"project": project, "phase": phase, "fast": fast, "general": general}


def _apply(world, state) -> None:
    project, phase = world["project"], world["phase"]
    project.allow_adjacent_pairs = state["pairs"]
    project.offer_uncertain = state["uncertain"]
    project.skip_reasons = list(state["reasons"])
    project.archived_at = timezone.now() if state["archived"] else None
    project.save()
    Phase.objects.filter(pk=phase.pk).update(status=Phase.Status.OPEN if state["phase_open"] else Phase.Status.CLOSED)
    for key in ("fast", "general"):
        membership = world[key]
        Membership.objects.filter(pk=membership.pk).update(role=state["role"], is_active=state["membership_active"])
        membership.user.is_active = state["user_active"]
        membership.user.save()
    cache.clear()  # the general view's token and membership caches: each example starts from the database


def _body(world, key: str, payload: dict) -> dict:
    membership = world[key]
    # Both labelers answer at the same position of their queues, the first that neither has done: when one
    # path stored what the other refused, the next examples (Hypothesis's shrinking among them) still find an
    # open image for both, instead of one labeler's queue running out first and the failure reported being
    # that artefact ("not assigned to you") rather than the payload that split the paths.
    done = world["phase"].assignments.filter(
        Q(done_at__isnull=False) | Q(label__isnull=False), labeler__in=[world["fast"], world["general"]]
    )
    todo = (
        world["phase"]
        .assignments.filter(labeler=membership)
        .exclude(position__in=done.values("position"))
        .order_by("position")
        .first()
    )
    body = {"client_id": str(uuid.uuid4()), **payload}
    mine = todo.image_id if todo else 10**9
    body["image"] = {
        "foreign": 10**9,
        "text": str(mine),
        "huge": 10**20,
        "zero": 0,
        None: mine,
    }[payload.get("image")]
    if payload.get("client_id", "fresh") != "fresh":
        body["client_id"] = payload["client_id"]
    else:
        body["client_id"] = str(uuid.uuid4())
    return body


def _answer(response) -> dict:
    """What a labeler sees and what is stored, without the ids that differ between the two labelers."""
    try:
        data = response.json()
    except ValueError:
        data = response.content.decode()
    if isinstance(data, dict) and "label" in data:
        data = {
            **data,
            "label": {k: v for k, v in data["label"].items() if k not in ("id", "image", "created_at", "updated_at")},
        }
        # The two labelers' queues differ: what comes next is compared by its shape, and each path's by the
        # image it names (its box as stored: None for a whole photo).
        for key in ("next", "preload"):
            data[key] = _shape(data[key])
    return {"status": response.status_code, "data": data}


def _shape(assignment) -> dict | None:
    if assignment is None:
        return None
    image = Image.objects.get(pk=assignment["image"]["id"])
    return {
        "keys": sorted(assignment),
        "image_keys": sorted(assignment["image"]),
        "size_as_stored": (assignment["image"]["width"], assignment["image"]["height"]) == (image.width, image.height),
        "box_as_stored": assignment["image"]["box"] == image.box_dict,
    }


def _stored(membership, after: int) -> list[dict]:
    """The rows this example stored for ``membership`` (labels with an id above ``after``)."""
    rows = []
    for label in Label.objects.filter(labeler=membership, id__gt=after).order_by("id"):
        assert label.revisions.count() == 1, "each example answers a new image"
        fields = row_fields(label)
        fields["label"] = {k: v for k, v in fields["label"].items() if k != "image_id"}
        rows.append(fields)
    return rows


@postgresql_only
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=cases())
def test_the_fast_path_and_the_general_view_answer_and_store_the_same(world, client_for, case):
    state, payload = case
    _apply(world, state)
    before = Label.objects.order_by("-id").values_list("id", flat=True).first() or 0
    fast = client_for(world["fast"].user).post(
        f"/api/phases/{world['phase'].id}/labels/", _body(world, "fast", payload), format="json"
    )
    general = client_for(world["general"].user).post(
        f"/api/phases/{world['phase'].id}/labels/?format=json", _body(world, "general", payload), format="json"
    )
    a, b = _answer(fast), _answer(general)
    assert a == b, f"state {state}\npayload {payload}\nfast    {a}\ngeneral {b}"
    assert _stored(world["fast"], before) == _stored(world["general"], before), (state, payload)


def test_the_kill_switch_sends_every_submit_to_the_general_view(small_world, client_for, settings, monkeypatch):
    world = small_world
    from labeling.api.views import submit_fast as view_module

    calls = []
    real = view_module.answer_fast
    monkeypatch.setattr(view_module, "answer_fast", lambda *a, **k: calls.append(1) or real(*a, **k))
    _apply(
        world,
        {
            **dict.fromkeys(("membership_active", "user_active", "phase_open", "pairs", "uncertain"), True),
            "role": Membership.Role.LABELER,
            "archived": False,
            "reasons": REASONS,
        },
    )
    api = client_for(world["fast"].user)
    url = f"/api/phases/{world['phase'].id}/labels/"
    assert api.post(url, _body(world, "fast", {"tones": [3]}), format="json").status_code == 201
    assert calls == [1]
    settings.FAIRTONE = {**settings.FAIRTONE, "FAST_SUBMIT": False}
    assert api.post(url, _body(world, "fast", {"tones": [4]}), format="json").status_code == 201
    assert calls == [1]  # the general view answered alone
    assert Label.objects.filter(labeler=world["fast"]).count() == 2
