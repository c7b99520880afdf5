"""The labeling hot path: a labeler's first answer to an image, and their next two, in one SQL statement.

A labeler submits an answer every few seconds for hours, and the page waits for the answer before it
shows the next photo, so this one request is made as cheap as the general one is thorough. One prepared
PostgreSQL statement, and no other query. Its conditions are the rules of ``services.submit_rules``, the
table the general path enforces too (a rule is declared there once, for both); the statement:

- finds who asks (their API token, or the user a session already named), their active labeler
  membership in the phase's project, the phase open and the project not archived;
- checks the answer against the project's scale and options (tones on the scale, a pair only where
  pairs are allowed, "uncertain" only where offered, a skip reason the project offers, a whole tone order);
- marks the assignment answered, inserts the label and its first revision (the rows the general path
  inserts) and reads the labeler's next two images.

When it stores nothing, a second statement looks for a first answer already stored under the same
``client_id`` by the same labeler in the phase (a double click, a retry after a lost answer) and answers
it as the general path does (200, the stored label). Anything else (a changed answer, a relabel, a
refusal of any kind, an answer of an unusual shape, SQLite, a caller's transaction) gets ``None``:
nothing was written, and the caller takes the general path (``services.labels.label_submit``), which
answers every case, with the error messages. So the fast path never decides a refusal; it stores what
the general path would store, with the same rows and the same answer (``tests/labeling/test_submit_fast.py``
and the randomised ``test_submit_differential.py`` compare the two: ``bin/test-submit``). The lead's pages are then recomputed in the background as after any label
(``services.queue.precompute_schedule``, which asks the cache once per window and process).
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from dataclasses import dataclass
from datetime import datetime

import psycopg
from django.contrib.auth import get_user_model
from django.db import DataError, IntegrityError, connection
from django.utils import timezone

from ..models import Assignment, Image, Label, LabelRevision, Membership, Phase, Project, Tone
from . import queue, submit_rules
from .submit_rules import Submit, clean_client_info, sql_conditions

#: The largest id PostgreSQL's bigint holds (and the API's ``id_field``).
MAX_ID = 2**63 - 1


@dataclass(frozen=True)
class FastAnswer:
    """A first answer in the plain shape the fast path takes (:func:`fast_answer` makes it from a request body)."""

    image_id: int
    client_id: uuid.UUID
    tones: tuple[int, ...]
    uncertain: bool
    skip_reason: str
    time_spent_ms: int
    tone_order: tuple[int, ...]
    client_info: dict


def fast_answer(data) -> FastAnswer | None:
    """The request body as a :class:`FastAnswer`, or None when it is anything but the plain shape.

    Plain: a JSON object; ``client_id`` a UUID string; ``image`` a positive integer; ``tones`` at most
    two whole numbers; ``uncertain`` a boolean (false with a skip); ``time_spent_ms`` a whole number;
    ``tone_order`` a list of whole numbers; ``client_info`` an object. Everything else (strings for
    numbers, ``null``s, an unusual value) is left to the general path and its messages. The rules on the
    answer alone (``services.submit_rules``: a tone or a skip, adjacent pairs, the time's range, ...) are
    checked here with the general path's code: an answer that breaks one is left to the general path,
    which refuses it; the rules that look at the database are conditions of the statement.
    """
    if not isinstance(data, dict):
        return None

    def whole(value, low: int, high: int) -> bool:
        return type(value) is int and low <= value <= high

    client_id, image = data.get("client_id"), data.get("image")
    if not isinstance(client_id, str) or not whole(image, 1, MAX_ID):
        return None
    try:
        client_uuid = uuid.UUID(client_id)
    except ValueError:
        return None
    tones = data.get("tones", [])
    uncertain = data.get("uncertain", False)
    skip_reason = data.get("skip_reason", "")
    ms = data.get("time_spent_ms", 0)
    order = data.get("tone_order", [])
    info = data.get("client_info", {})
    if not (
        isinstance(tones, list)
        and len(tones) <= 2
        and all(whole(t, 1, 1000) for t in tones)
        and type(uncertain) is bool
        and isinstance(skip_reason, str)
        and type(ms) is int
        and isinstance(order, list)
        and len(order) <= 30
        and all(whole(t, 1, 1000) for t in order)
        and isinstance(info, dict)
    ):
        return None
    skip_reason = skip_reason.strip()
    if len(skip_reason) > 200 or "\x00" in skip_reason or not skip_reason.isprintable():
        return None
    if skip_reason and uncertain:
        return None  # the general path keeps a skip's "uncertain" where offered (selection_clean)
    submit = Submit(tones=list(tones), uncertain=uncertain, skip_reason=skip_reason, time_spent_ms=ms)
    if submit_rules.answer_refusal(submit) is not None:
        return None
    tones = submit.values
    try:
        info = clean_client_info(info)
        info_json = json.dumps(info, allow_nan=False)
    except (TypeError, ValueError):
        return None
    if "\\u0000" in info_json:  # PostgreSQL's jsonb refuses NUL
        return None
    return FastAnswer(
        image_id=image,
        client_id=client_uuid,
        tones=tuple(tones),
        uncertain=uncertain,
        skip_reason=skip_reason,
        time_spent_ms=ms,
        tone_order=tuple(order),
        client_info=info,
    )


def _tables() -> dict[str, str]:
    return {
        "token": "authtoken_token",
        "user": get_user_model()._meta.db_table,
        "phase": Phase._meta.db_table,
        "project": Project._meta.db_table,
        "membership": Membership._meta.db_table,
        "tone": Tone._meta.db_table,
        "assignment": Assignment._meta.db_table,
        "label": Label._meta.db_table,
        "revision": LabelRevision._meta.db_table,
        "image": Image._meta.db_table,
    }


# Every parameter is cast where it is used: the statements are prepared once per connection and a
# parameter's type must agree wherever it occurs.


def _who(t: dict) -> str:
    """The requester's user id: by API token, else the session's user; active users only."""
    return f"""who AS (
    SELECT u.id AS user_id FROM {t["user"]} u
    WHERE {sql_conditions("who")} AND u.id = (
        CASE WHEN %(token)s::text IS NULL THEN %(user)s::bigint
             ELSE (SELECT k.user_id FROM {t["token"]} k WHERE k.key = %(token)s::text) END)
)"""


def _next_two(t: dict, labeler: str, answered: str | None) -> str:
    """The labeler's next two open assignments as a JSON array (text), ``answered`` left out."""
    leave_out = f"AND n.id <> {answered}" if answered else ""
    return f"""(
    SELECT coalesce(json_agg(q ORDER BY q.position), '[]'::json) FROM (
        SELECT n.id, n.position, n.kind, n.request_reason, i.id AS image_id, i.width, i.height,
            i.box_x, i.box_y, i.box_width, i.box_height
        FROM {t["assignment"]} n JOIN {t["image"]} i ON i.id = n.image_id
        WHERE n.phase_id = %(phase)s::bigint AND n.labeler_id = {labeler} AND n.done_at IS NULL {leave_out}
        ORDER BY n.position
        LIMIT 2
    ) q
)::text"""


def _first_answer_sql() -> str:
    t = _tables()
    return f"""
WITH {_who(t)}, ctx AS (
    SELECT who.user_id, m.id AS membership_id, p.id AS project_id
    FROM who
    JOIN {t["phase"]} ph ON ph.id = %(phase)s::bigint
    JOIN {t["project"]} p ON p.id = ph.project_id
    JOIN {t["membership"]} m ON m.project_id = p.id AND m.user_id = who.user_id
    CROSS JOIN LATERAL (SELECT count(*) AS n FROM {t["tone"]} tn WHERE tn.scale_id = p.scale_id) scale
    WHERE {sql_conditions("member")}
      AND {sql_conditions("ctx")}
), a AS (
    UPDATE {t["assignment"]} SET done_at = %(now)s::timestamptz
    FROM ctx
    WHERE {sql_conditions("assignment", assignment=t["assignment"])}
      -- the fast path's scope (not a rule): a first answer to a plain assignment
      AND done_at IS NULL AND kind = '{Assignment.Kind.LABEL.value}' AND requested_by_id IS NULL
    RETURNING {t["assignment"]}.id, is_repeat, labeler_id, ctx.user_id, ctx.project_id
), l AS (
    INSERT INTO {t["label"]} (phase_id, image_id, labeler_id, assignment_id, is_repeat, tone_low, tone_high,
        value, uncertain, skip_reason, is_valid, n_revisions, time_spent_ms, created_at, updated_at)
    SELECT %(phase)s::bigint, %(image)s::bigint, a.labeler_id, a.id, a.is_repeat, %(low)s::smallint,
        %(high)s::smallint, %(value)s::double precision, %(uncertain)s::boolean, %(skip)s::text, TRUE, 1,
        %(ms)s::integer, %(now)s::timestamptz, %(now)s::timestamptz
    FROM a
    RETURNING id, labeler_id
), r AS (
    INSERT INTO {t["revision"]} (label_id, number, client_id, source, tone_low, tone_high, value,
        uncertain, skip_reason, time_spent_ms, tone_order, client_info, author_id, reason, created_at)
    SELECT l.id, 1, %(client)s::uuid, '{LabelRevision.Source.LABELER.value}', %(low)s::smallint,
        %(high)s::smallint, %(value)s::double precision, %(uncertain)s::boolean, %(skip)s::text,
        %(ms)s::integer, %(order)s::jsonb, %(info)s::jsonb, a.user_id, '', %(now)s::timestamptz
    FROM l, a
    RETURNING id
)
SELECT l.id, a.project_id, {_next_two(t, "l.labeler_id", "a.id")}
FROM l, r, a
"""


def _replay_sql() -> str:
    """A first answer already stored under this ``client_id`` by the requester, in this phase, as a labeler
    of the project (a double click, or a retry after a lost answer): the general path's answer to it."""
    t = _tables()
    return f"""
WITH {_who(t)}
SELECT l.id, l.image_id, r.tone_low, r.tone_high, r.value, r.uncertain, r.skip_reason, r.created_at,
    {_next_two(t, "l.labeler_id", None)}
FROM who
JOIN {t["revision"]} r ON r.client_id = %(client)s::uuid AND r.author_id = who.user_id AND r.number = 1
    AND r.source = '{LabelRevision.Source.LABELER.value}'
JOIN {t["label"]} l ON l.id = r.label_id AND l.phase_id = %(phase)s::bigint
JOIN {t["membership"]} m ON m.id = l.labeler_id AND m.user_id = who.user_id
WHERE {sql_conditions("member")}
"""


#: The statements, built from ``submit_rules.RULES`` (again when the table is another: a test's extra rule).
_SQL: dict[str, str] = {}
_SQL_RULES: list[tuple] = [()]


def _prepare_on(raw) -> bool:
    """Ready a connection to run the statements prepared, once per connection; whether to prepare.

    Django opens connections with psycopg's preparing turned off (``prepare_threshold=None``), for
    poolers that cannot keep prepared statements. Only cursors that bind parameters on the server can
    prepare, and Django's bind on the client, so allowing it here (with a threshold nothing reaches)
    prepares these statements and no other. ``FAIRTONE["PREPARED_SUBMIT"]`` (``FAIRTONE_PREPARED_SUBMIT=0``)
    turns it off behind such a pooler. PostgreSQL plans a prepared statement anew for each of its first
    five runs, and goes on doing so while the generic plan looks dearer, which it does here (the planner
    cannot know that each CTE gives one row; planning took twice the run): ``plan_cache_mode`` is set for
    the session, which changes nothing else for the same reason.
    """
    from django.conf import settings

    if not settings.FAIRTONE.get("PREPARED_SUBMIT", True):
        return False
    if not getattr(raw, "_fairtone_prepared_submit", False):
        raw.prepare_threshold = 2**31 - 1
        raw.execute("SET plan_cache_mode = force_generic_plan")
        raw._fairtone_prepared_submit = True
    return True


def _run(name: str, params: dict):
    """Run statement ``name`` (autocommit: the statement is its own transaction); its one row or None.

    Seen as Django sees its own queries (issue 24): through the connection's ``execute_wrapper`` chain
    (monitoring, query-count tests) and, when queries are logged (``DEBUG``, ``CaptureQueriesContext``,
    ``django_assert_num_queries``), in ``connection.queries`` with its time.
    """
    if _SQL_RULES[0] is not submit_rules.RULES:
        _SQL.update(first=_first_answer_sql(), replay=_replay_sql())
        _SQL_RULES[0] = submit_rules.RULES
    connection.ensure_connection()

    def execute(sql, sql_params, many, context):
        # A cursor that binds on the server (it can prepare), with Django's error translation.
        with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
            cursor.execute(sql, sql_params, prepare=_prepare_on(connection.connection))
            return cursor.fetchone()

    executor = execute
    for wrapper in reversed(connection.execute_wrappers):
        executor = functools.partial(wrapper, executor)
    started = time.monotonic()
    try:
        return executor(_SQL[name], params, False, {"connection": connection, "cursor": None})
    finally:
        if connection.queries_logged:
            connection.queries_log.append(
                {"sql": f"/* fairtone fast submit: {name} */ {_SQL[name]}", "time": f"{time.monotonic() - started:.3f}"}
            )


def _first_revision(label_id, image_id, low, high, value, uncertain, skip_reason, created_at) -> dict:
    """A label as its labeler sees it when their first answer is its revision 1 (the fields of
    ``api.views.phases._own_label_payload``)."""
    return {
        "id": label_id,
        "image": image_id,
        "tones": [t for t in (low, high) if t is not None],
        "value": value,
        "uncertain": uncertain,
        "skip_reason": skip_reason,
        "n_revisions": 1,
        "updated_at": created_at,
    }


@dataclass(frozen=True)
class Stored:
    """What the fast path stored (or found stored): the label as its labeler sees it and what comes next."""

    label: dict  # id, image, tones, value, uncertain, skip_reason, n_revisions, updated_at
    next_two: list[
        dict
    ]  # id, position, kind, request_reason, image_id, width, height, box_x, box_y, box_width, box_height
    replayed: bool


def submit_fast(
    *, phase_id: int, answer: FastAnswer, token: str | None = None, user_id: int | None = None
) -> Stored | None:
    """Store ``answer`` as the first answer of the labeler (by API ``token``, or an authenticated
    session's ``user_id``) in phase ``phase_id``, or find it already stored under its ``client_id`` (a
    replay, ``replayed``); or None, having written nothing, when the general path must decide (see the
    module's docstring).
    """
    if connection.vendor != "postgresql" or connection.in_atomic_block or (token is None) == (user_id is None):
        return None
    low = answer.tones[0] if answer.tones else None
    high = answer.tones[1] if len(answer.tones) == 2 else None
    value = None if low is None else (float(low) if high is None else (low + high) / 2)
    now: datetime = timezone.now()
    params = {
        "token": token,
        "user": user_id,
        "phase": phase_id,
        "image": answer.image_id,
        "low": low,
        "high": high,
        "value": value,
        "uncertain": answer.uncertain,
        "skip": answer.skip_reason,
        "n_order": len(answer.tone_order),
        "ms": answer.time_spent_ms,
        "client": answer.client_id,
        "order": json.dumps(list(answer.tone_order)),
        "info": json.dumps(answer.client_info),
        "now": now,
    }
    try:
        row = _run("first", params)
    except (IntegrityError, DataError):
        row = None  # e.g. a replayed client_id: the statement wrote nothing
    if row is not None:
        label_id, project_id, next_two = row
        # The lead's pages are recomputed in the background (at most once per window: services.queue).
        queue.precompute_schedule_on_commit(project_id)
        label = _first_revision(label_id, answer.image_id, low, high, value, answer.uncertain, answer.skip_reason, now)
        return Stored(label=label, next_two=json.loads(next_two), replayed=False)
    # Nothing stored: a replay (a double click, a retry), or for the general path to answer.
    row = _run("replay", {"token": token, "user": user_id, "phase": phase_id, "client": answer.client_id})
    if row is None:
        return None
    label_id, image_id, low, high, value, uncertain, skip_reason, created_at, next_two = row
    label = _first_revision(label_id, image_id, low, high, value, uncertain, skip_reason, created_at)
    return Stored(label=label, next_two=json.loads(next_two), replayed=True)
