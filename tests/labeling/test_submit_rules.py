"""The label submit's rules are one table (``services.submit_rules``, issue 24): a rule added there binds the
fast statement and the general path alike, a rule cannot be declared for one of them only, and the kill
switch (``FAIRTONE_FAST_SUBMIT``) works both ways.

The general path's half runs on SQLite and PostgreSQL; the fast statement's on PostgreSQL
(``bin/test-submit`` locally, CI's second stage).
"""

import dataclasses
import json
import runpy
import uuid

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from hypothesis import HealthCheck, assume, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from labeling.models import Label
from labeling.services import submit_fast as fast_module
from labeling.services import submit_rules
from labeling.services.submit_fast import fast_answer, submit_fast
from labeling.services.submit_rules import RULES, Rule
from tests.labeling.helpers import add_images, open_calibration_1

postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the fast path is one PostgreSQL statement (CI stage 2 runs it)"
)

#: A rule on the database: a project whose name ends in "(paused)" takes no answers.
PAUSED = Rule(
    "project_not_paused",
    "phase",
    check=lambda s: not s.project.name.endswith("(paused)"),
    sql="right(p.name, 8) <> '(paused)'",
    sql_in="ctx",
    message="This project is paused.",
    field="phase",
)
#: A rule on the answer alone: an "uncertain" answer takes at least 100 ms (the issue's example).
HASTY = Rule(
    "uncertain_takes_time",
    "time",
    check=lambda s: not s.uncertain or s.time_spent_ms >= 100,
    sql=None,
    sql_in=None,
    message="An uncertain answer takes at least 100 ms.",
    field="time_spent_ms",
)

#: The same, among the answer's rules (the group a lead's corrections and imports share).
HASTY_SELECTION = dataclasses.replace(HASTY, name="uncertain_takes_time_selection", group="selection")
EXTRA_RULES = [PAUSED, HASTY, HASTY_SELECTION]


def test_a_rule_on_the_database_cannot_be_declared_without_its_sql():
    with pytest.raises(ValueError, match="sql"):
        Rule("half", "phase", check=lambda s: True, sql="p.id > 0", sql_in=None, message="x")
    with pytest.raises(ValueError, match="sql"):
        Rule("half", "phase", check=lambda s: True, sql=None, sql_in="ctx", message="x")
    with pytest.raises(ValueError, match="group"):
        Rule("nowhere", "later", check=lambda s: True, sql=None, sql_in=None, message="x")


def test_every_rule_on_the_database_is_a_condition_of_the_fast_statement(monkeypatch):
    monkeypatch.setattr(submit_rules, "RULES", (*RULES, PAUSED))
    first, replay = fast_module._first_answer_sql(), fast_module._replay_sql()
    table = fast_module._tables()["assignment"]
    for rule in submit_rules.RULES:
        if rule.sql is not None:
            assert rule.sql.format(assignment=table) in first, rule.name
        if rule.sql_in in ("who", "member"):  # a replay is answered to the same requesters only
            assert rule.sql in replay, rule.name
    assert "right(p.name, 8) <> '(paused)'" in first


@pytest.fixture
def phase(project, labelers):
    project.allow_adjacent_pairs = True
    project.offer_uncertain = True
    project.save()
    add_images(project, 6)
    return open_calibration_1(project, size=6, cal1=6, labels_per_image=4)


def _next(phase, membership) -> int:
    return phase.assignments.filter(labeler=membership, done_at__isnull=True).order_by("position").first().image_id


def _body(phase, membership, **answer) -> dict:
    return {"client_id": str(uuid.uuid4()), "image": _next(phase, membership), "tones": [3], **answer}


@pytest.mark.django_db
@pytest.mark.parametrize("rule", EXTRA_RULES, ids=lambda r: r.name)
def test_a_rule_added_to_the_table_binds_the_general_path(phase, labelers, client_for, monkeypatch, rule):
    api = client_for(labelers[0].user)
    url = f"/api/phases/{phase.id}/labels/?format=json"  # the general view (the fast route leaves it alone)
    phase.project.name = "Skin tones (paused)"
    phase.project.save()
    body = _body(phase, labelers[0], uncertain=True, time_spent_ms=40)
    monkeypatch.setattr(submit_rules, "RULES", (*RULES, rule))
    refused = api.post(url, body, format="json")
    assert refused.status_code == 400, refused.content
    assert refused.json() == {rule.field: [rule.message]}
    assert not Label.objects.exists()
    monkeypatch.setattr(submit_rules, "RULES", RULES)
    assert api.post(url, body, format="json").status_code == 201


@pytest.mark.django_db
def test_the_general_paths_service_refuses_by_the_table(phase, labelers, monkeypatch):
    from labeling.services.labels import label_submit

    phase.project.name = "Skin tones (paused)"
    phase.project.save()
    monkeypatch.setattr(submit_rules, "RULES", (*RULES, PAUSED))
    with pytest.raises(ValidationError) as refused:
        label_submit(
            phase=phase, labeler=labelers[0], image_id=_next(phase, labelers[0]), client_id=uuid.uuid4(), tones=[3]
        )
    assert refused.value.message_dict == {"phase": ["This project is paused."]}


@postgresql_only
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("rule", EXTRA_RULES, ids=lambda r: r.name)
def test_a_rule_added_to_the_table_binds_the_fast_statement(phase, labelers, client_for, monkeypatch, rule):
    """The fast statement itself stores nothing under the extra rule (so the general view answers its
    refusal), and stores the same answer without it."""
    phase.project.name = "Skin tones (paused)"
    phase.project.save()
    user = labelers[0].user
    body = _body(phase, labelers[0], uncertain=True, time_spent_ms=40)
    monkeypatch.setattr(submit_rules, "RULES", (*RULES, rule))
    answer = fast_answer(body)
    if rule.sql is None:
        assert answer is None  # a rule on the answer alone: checked in Python before the statement
    else:
        assert answer is not None
        assert submit_fast(phase_id=phase.id, answer=answer, user_id=user.id) is None
        assert "(paused)" in fast_module._SQL["first"]
    # Through the fast route: the general view's refusal, nothing stored.
    refused = client_for(user).post(f"/api/phases/{phase.id}/labels/", body, format="json")
    assert (refused.status_code, refused.json()) == (400, {rule.field: [rule.message]})
    assert not Label.objects.exists()
    # Without the rule the fast statement stores it (and is built again from the table).
    monkeypatch.setattr(submit_rules, "RULES", RULES)
    stored = submit_fast(phase_id=phase.id, answer=fast_answer(body), user_id=user.id)
    assert stored is not None and not stored.replayed
    assert "(paused)" not in fast_module._SQL["first"]
    assert Label.objects.get().uncertain is True


def _fast_submit_setting(monkeypatch, value: str | None) -> bool:
    """``FAIRTONE["FAST_SUBMIT"]`` as the settings module computes it under ``FAIRTONE_FAST_SUBMIT=value``."""
    if value is None:
        monkeypatch.delenv("FAIRTONE_FAST_SUBMIT", raising=False)
    else:
        monkeypatch.setenv("FAIRTONE_FAST_SUBMIT", value)
    import config.settings.base as base

    return runpy.run_path(base.__file__)["FAIRTONE"]["FAST_SUBMIT"]


def test_the_kill_switch_is_read_from_the_environment_both_ways(monkeypatch):
    """``FAIRTONE_FAST_SUBMIT=0`` turns the fast route off, ``1`` (or unset) on; what the setting does to
    the route is ``test_submit_differential.test_the_kill_switch_sends_every_submit_to_the_general_view``."""
    assert _fast_submit_setting(monkeypatch, "0") is False
    assert _fast_submit_setting(monkeypatch, "1") is True
    assert _fast_submit_setting(monkeypatch, None) is True


STATES = st.fixed_dictionaries(
    {
        "pairs": st.booleans(),
        "offer_uncertain": st.booleans(),
        "reasons": st.sampled_from([["no skin visible", "other"], ["other"], []]),
        "open": st.booleans(),
        "archived": st.booleans(),
    }
)
ANSWERS = st.fixed_dictionaries(
    {
        "tones": st.lists(st.integers(1, 12), max_size=2),
        "uncertain": st.booleans(),
        "skip_reason": st.sampled_from(["", "", "other", "no skin visible", "boredom"]),
        "tone_order": st.one_of(
            st.just([]),
            st.permutations(list(range(1, 11))),
            st.lists(st.integers(1, 12), min_size=1, max_size=12),
        ),
    }
)


@postgresql_only
@pytest.mark.django_db
@hypothesis_settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(state=STATES, answer=ANSWERS)
def test_each_rules_sql_and_python_agree(phase, state, answer):
    """Each rule of the statement's ``ctx`` part, its SQL against its Python check, on drawn project options,
    phase states and answers (those the fast path sends to the statement: the rules on the answer alone hold)."""
    from django.utils import timezone

    from labeling.models import Phase

    project = phase.project
    project.allow_adjacent_pairs = state["pairs"]
    project.offer_uncertain = state["offer_uncertain"]
    project.skip_reasons = state["reasons"]
    project.archived_at = timezone.now() if state["archived"] else None
    project.save()
    phase.status = Phase.Status.OPEN if state["open"] else Phase.Status.CLOSED
    Phase.objects.filter(pk=phase.pk).update(status=phase.status)
    submit = submit_rules.Submit(phase=phase, project=project, **answer)
    assume(submit_rules.answer_refusal(submit) is None)
    values = submit.values
    params = {
        "phase": phase.id,
        "low": values[0] if values else None,
        "high": values[1] if len(values) == 2 else None,
        "uncertain": answer["uncertain"],
        "skip": answer["skip_reason"],
        "n_order": len(answer["tone_order"]),
        "order": json.dumps(answer["tone_order"]),
    }
    t = fast_module._tables()
    for rule in RULES:
        if rule.sql_in != "ctx":
            continue
        with connection.cursor() as cursor:
            cursor.execute(
                f"""SELECT ({rule.sql}) FROM {t["phase"]} ph JOIN {t["project"]} p ON p.id = ph.project_id
                CROSS JOIN LATERAL (SELECT count(*) AS n FROM {t["tone"]} tn WHERE tn.scale_id = p.scale_id) scale
                WHERE ph.id = %(phase)s::bigint""",
                params,
            )
            in_sql = cursor.fetchone()[0]
        assert in_sql == rule.check(submit), (rule.name, state, answer)
