"""The label submit's rules, each declared once (issue 24).

A labeler's answer is stored by two paths: the general one (``services.labels.label_submit``, several ORM
queries, every case and every message) and the hot path (``services.submit_fast``, one PostgreSQL
statement for a plain first answer). Both take their rules from :data:`RULES`, and from nowhere else:

- the general path calls :func:`enforce` for each :data:`GROUPS` entry in turn; the first rule that
  does not hold refuses, with the rule's message, field and status;
- the fast statement is built from the rules' SQL: a rule that looks at the database (``sql_in``
  ``"who"``, ``"member"``, ``"ctx"`` or ``"assignment"``) puts its condition into that part of the
  statement, which then stores nothing (and the general path answers the refusal, with the same rule's
  message); a rule on the answer alone (``sql_in=None``) is checked in Python by both paths, with
  :func:`answer_refusal` in the fast one.

So a rule added here binds both paths, and :class:`Rule` refuses a rule that would bind one only (a
database rule without its SQL, an answer rule with SQL). A rule written outside this table, in one path,
makes the two paths differ, which ``tests/labeling/test_submit_differential.py`` (Hypothesis, on
PostgreSQL: ``bin/test-submit``) finds. The rule's two renderings, ``check`` (Python) and ``sql``, are
written side by side; the differential test holds them equal.

What is *not* a rule here: the parsing of the request (types, the serializer's bounds, a UUID), and the
fast path's scope (a first answer of a plain shape to a plain assignment: anything else goes to the general
path, which decides).

The statement's aliases, for ``sql``: ``u`` the requester (``who``); ``m`` their membership, ``ph``
the phase, ``p`` the project, ``scale.n`` the number of tones of its scale (``ctx``); the assignment table
by its name, ``ctx.membership_id`` (``assignment``). Parameters (always cast, as ``%(low)s::smallint``):
``phase``, ``image``, ``low``, ``high``, ``uncertain``, ``skip``, ``ms``, ``n_order``, ``order``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from django.core.exceptions import PermissionDenied, ValidationError

from ..errors import NotAMember, WrongRole
from ..models import Membership, Phase

MAX_TIME_SPENT_MS = 6 * 3600 * 1000
MAX_CLIENT_INFO_KEYS = 40

#: The general path enforces the groups in this order (the order of its messages). The ``selection``
#: rules also check a lead's correction and an imported label (``labels.selection_clean``): there they
#: see the answer, the phase and the project only.
GROUPS = ("requester", "phase", "time", "selection", "tone_order", "assignment")

#: Where a rule's SQL goes in the fast statements (None: a rule on the answer alone, checked in Python).
SqlPlace = Literal["who", "member", "ctx", "assignment"]

#: How a refusal is answered: 400 with the rule's field, 403, 404 (``NotAMember``), 403 (``WrongRole``).
Refusal = Literal["invalid", "forbidden", "not_a_member", "wrong_role"]


@dataclass
class Submit:
    """What the rules look at: the requester, the phase and project, and the answer.

    ``tones`` as sent (the general path also checks answers that are not yet whole numbers); the
    rules after ``whole_tones`` use :attr:`values`. ``assigned``: whether the image is in the
    labeler's queue of the phase (group ``assignment`` only).
    """

    phase: Phase | None = None
    project: Any = None
    user: Any = None
    membership: Membership | None = None
    tones: list = field(default_factory=list)
    uncertain: bool = False
    skip_reason: str = ""
    time_spent_ms: int = 0
    tone_order: list[int] = field(default_factory=list)
    assigned: bool = False

    @functools.cached_property
    def n_tones(self) -> int:
        """The number of tones of the project's scale (asked only by the rules that need it)."""
        return scale_size(self.project)

    @property
    def values(self) -> list[int]:
        """The tones as whole numbers, sorted, a repeated tone once (``[3, 3]`` is ``[3]``)."""
        return sorted({int(t) for t in self.tones})


@dataclass(frozen=True)
class Rule:
    """One rule of the submit: its Python check, its SQL condition and its refusal, declared together."""

    name: str
    group: str
    #: Whether the submit passes (the general path; the fast path too for a rule on the answer alone).
    check: Callable[[Submit], bool]
    #: The same condition in the fast statement (None for a rule on the answer alone).
    sql: str | None
    sql_in: SqlPlace | None
    message: str | Callable[[Submit], str]
    field: str | None = None
    refusal: Refusal = "invalid"
    #: The ``ValidationError``'s code (the rule's name when None).
    code: str | None = None
    #: Not applied to labels made elsewhere (``selection_clean(allow_invalid=True)``: imports).
    lenient: bool = False

    def __post_init__(self) -> None:
        if self.group not in GROUPS:
            raise ValueError(f"rule {self.name!r}: group {self.group!r} is not one of {GROUPS}")
        if (self.sql is None) != (self.sql_in is None):
            raise ValueError(
                f"rule {self.name!r}: a rule that looks at the database has its SQL and where it goes "
                "(sql and sql_in); a rule on the answer alone has neither (both paths check it in Python)"
            )

    def refuse(self, submit: Submit) -> Exception:
        """The exception the general path raises when the rule does not hold."""
        text = self.message(submit) if callable(self.message) else self.message
        if self.refusal == "not_a_member":
            return NotAMember(text)
        if self.refusal == "wrong_role":
            return WrongRole((Membership.Role.LABELER,))
        if self.refusal == "forbidden":
            return PermissionDenied(text)
        code = self.code or self.name
        if self.field is None:
            return ValidationError(text, code=code)
        return ValidationError({self.field: ValidationError(text, code=code)})


def _closed_message(s: Submit) -> str:
    assert s.phase is not None
    return f"{s.phase.get_kind_display()} is {s.phase.get_status_display().lower()}: labels cannot be submitted."


def _not_archived(s: Submit) -> bool:
    from ..models import Project

    assert s.phase is not None
    return not Project.objects.filter(pk=s.phase.project_id, archived_at__isnull=False).exists()


def _archived_message(s: Submit) -> str:
    from .project_lifecycle import ARCHIVED_MESSAGE

    return ARCHIVED_MESSAGE.format(doing="change it again")


def _whole(t) -> bool:
    if isinstance(t, bool) or (isinstance(t, float) and not t.is_integer()):
        return False
    try:
        int(t)
    except (TypeError, ValueError):
        return False
    return True


def _off_scale(s: Submit) -> list[int]:
    return [v for v in s.values if not 1 <= v <= s.n_tones]


_OPEN = Phase.Status.OPEN.value
_LABELER = Membership.Role.LABELER.value

#: The rules, in the order the general path checks them (its first refusal is the answer).
RULES: tuple[Rule, ...] = (
    # Who may submit: an active account with an active labeler membership in the phase's project.
    Rule(
        "active_account",
        "requester",
        check=lambda s: bool(getattr(s.user, "is_active", False)),
        sql="u.is_active",
        sql_in="who",
        message="This account is deactivated.",
        refusal="forbidden",
    ),
    Rule(
        "active_membership",
        "requester",
        check=lambda s: s.membership is not None and s.membership.is_active,
        sql="m.is_active",
        sql_in="member",
        message="Not a member of this project.",
        refusal="not_a_member",
    ),
    Rule(
        "labeler_role",
        "requester",
        check=lambda s: s.membership is not None and s.membership.role == _LABELER,
        sql=f"m.role = '{_LABELER}'",
        sql_in="member",
        message="This needs the role: labeler.",
        refusal="wrong_role",
    ),
    # The phase takes answers.
    Rule(
        "phase_open",
        "phase",
        check=lambda s: s.phase is not None and s.phase.status == _OPEN,
        sql=f"ph.status = '{_OPEN}'",
        sql_in="ctx",
        message=_closed_message,
        field="phase",
    ),
    Rule(
        "project_not_archived",
        "phase",
        check=_not_archived,
        sql="p.archived_at IS NULL",
        sql_in="ctx",
        message=_archived_message,
        code="archived",
    ),
    Rule(
        "time_in_range",
        "time",
        check=lambda s: 0 <= s.time_spent_ms <= MAX_TIME_SPENT_MS,
        sql=None,
        sql_in=None,
        message="Out of range.",
        field="time_spent_ms",
    ),
    # The answer, against the project's scale and options.
    Rule(
        "skip_has_no_tone",
        "selection",
        check=lambda s: not (s.skip_reason and s.tones),
        sql=None,
        sql_in=None,
        message="A skipped image has no tone.",
        field="tones",
    ),
    Rule(
        "skip_reason_offered",
        "selection",
        check=lambda s: not s.skip_reason or s.skip_reason in (s.project.skip_reasons or []),
        sql="(%(skip)s::text = '' OR p.skip_reasons @> jsonb_build_array(%(skip)s::text))",
        sql_in="ctx",
        message=lambda s: f"Unknown skip reason {s.skip_reason!r}; offered: {', '.join(s.project.skip_reasons or [])}.",
        field="skip_reason",
    ),
    Rule(
        "a_tone_or_a_skip",
        "selection",
        check=lambda s: bool(s.skip_reason or s.tones),
        sql=None,
        sql_in=None,
        message="Choose a tone, or skip with a reason.",
        field="tones",
    ),
    Rule(
        "at_most_two_tones",
        "selection",
        check=lambda s: len(s.tones) <= 2,
        sql=None,
        sql_in=None,
        message="Choose one tone, or two adjacent tones.",
        field="tones",
    ),
    Rule(
        "whole_tones",
        "selection",
        check=lambda s: all(_whole(t) for t in s.tones),
        sql=None,
        sql_in=None,
        message="Tones are whole numbers.",
        field="tones",
    ),
    Rule(
        "tones_on_the_scale",
        "selection",
        check=lambda s: not _off_scale(s),
        sql="(coalesce(%(low)s::smallint, 1) >= 1 AND coalesce(%(high)s::smallint, %(low)s::smallint, 0) <= scale.n)",
        sql_in="ctx",
        message=lambda s: f"Tone {_off_scale(s)[0]} is not on this scale (1 to {s.n_tones}).",
        field="tones",
    ),
    Rule(
        "pairs_allowed",
        "selection",
        check=lambda s: len(s.values) < 2 or s.project.allow_adjacent_pairs,
        sql="(%(high)s::smallint IS NULL OR p.allow_adjacent_pairs)",
        sql_in="ctx",
        message="This project asks for a single tone.",
        field="tones",
        lenient=True,
    ),
    Rule(
        "pairs_adjacent",
        "selection",
        check=lambda s: len(s.values) < 2 or s.values[1] == s.values[0] + 1,
        sql=None,
        sql_in=None,
        message=lambda s: f"Tones {s.values[0]} and {s.values[1]} are not adjacent.",
        field="tones",
        lenient=True,
    ),
    Rule(
        "uncertain_offered",
        "selection",
        # A skip keeps "uncertain" only where offered, without a refusal (selection_clean).
        check=lambda s: bool(s.skip_reason) or not s.uncertain or s.project.offer_uncertain,
        sql="(%(skip)s::text <> '' OR NOT %(uncertain)s::boolean OR p.offer_uncertain)",
        sql_in="ctx",
        message="This project does not offer 'uncertain'.",
        field="uncertain",
    ),
    Rule(
        "tone_order_whole",
        "tone_order",
        check=lambda s: not s.tone_order or sorted(s.tone_order) == list(range(1, s.n_tones + 1)),
        sql=(
            "(%(n_order)s::integer = 0 OR (%(n_order)s::integer = scale.n AND scale.n = ("
            "SELECT count(DISTINCT e.v) FROM jsonb_array_elements_text(%(order)s::jsonb) AS e(v) "
            "WHERE e.v::integer BETWEEN 1 AND scale.n)))"
        ),
        sql_in="ctx",
        message="The tone order must list every tone once.",
        field="tone_order",
    ),
    # The image is in the labeler's queue of this phase (so of the phase's project).
    Rule(
        "image_assigned",
        "assignment",
        check=lambda s: s.assigned,
        sql="{assignment}.phase_id = %(phase)s::bigint AND {assignment}.labeler_id = ctx.membership_id "
        "AND {assignment}.image_id = %(image)s::bigint",
        sql_in="assignment",
        message="This image is not assigned to you in this phase.",
        refusal="forbidden",
    ),
)


def rules(group: str | None = None, *, lenient: bool = False) -> list[Rule]:
    """The rules in force (of ``group``), in order; ``lenient`` leaves out those marked lenient."""
    return [r for r in RULES if (group is None or r.group == group) and not (lenient and r.lenient)]


def enforce(submit: Submit, group: str, *, lenient: bool = False) -> None:
    """The general path: raise the refusal of the first rule of ``group`` that does not hold."""
    for rule in rules(group, lenient=lenient):
        if not rule.check(submit):
            raise rule.refuse(submit)


#: The rules on the answer alone, for the table they were taken from (a test may put in another).
_ANSWER_RULES: list[tuple[Rule, ...]] = [(), ()]


def answer_refusal(submit: Submit) -> Rule | None:
    """The fast path: the first rule on the answer alone (no SQL) that ``submit`` breaks, or None."""
    if _ANSWER_RULES[0] is not RULES:
        _ANSWER_RULES[:] = [RULES, tuple(r for r in RULES if r.sql is None)]
    for rule in _ANSWER_RULES[1]:
        if not rule.check(submit):
            return rule
    return None


def sql_conditions(place: SqlPlace, **names: str) -> str:
    """The fast statement's conditions at ``place``, AND-ed (``TRUE`` when none); ``names`` fill in
    ``{assignment}``-style table names."""
    parts = [f"({r.sql.format(**names) if names else r.sql})" for r in RULES if r.sql_in == place and r.sql]
    return "\n      AND ".join(parts) if parts else "TRUE"


def clean_client_info(info) -> dict:
    """What is kept of the client's description of itself: at most 40 keys, short plain values."""
    if not isinstance(info, dict):
        return {}
    cleaned: dict[str, Any] = {}
    for key, value in list(info.items())[:MAX_CLIENT_INFO_KEYS]:
        if isinstance(value, bool | int | float) or value is None:
            cleaned[str(key)[:60]] = value
        else:
            cleaned[str(key)[:60]] = str(value)[:200]
    return cleaned


def scale_size(project) -> int:
    """The number of tones of the project's scale (cached: a scale's tones are fixed once made)."""
    from django.core.cache import cache

    key = f"scale-tones:{project.scale_id}"
    n = cache.get(key)
    if n is None:
        n = project.scale.tones.count()
        cache.set(key, n, 300)
    return n
