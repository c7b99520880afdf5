"""The data manager's request, read and checked: filters, order and paging from a query string (the page's
``GET``, the API's ``query_params``, a bulk action's ``filters``). What the request means, in the database,
is ``services.data_manager``; this module only turns parameters into its :class:`DataFilters` or a
``ValidationError`` naming the parameter (issue 24: request parsing lives above the services)."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ValidationError

from ..models import Membership, Project
from ..services import baselines as baseline_services
from ..services.attributes import attribute_key_valid
from ..services.data_manager import (
    FILTER_KEYS,
    LABELER_STATUSES,
    MAX_PAGE_SIZE,
    PAGE_KEYS,
    PAGE_SIZE,
    REVIEW_STATES,
    SEARCH_MAX,
    SORTS,
    DataFilters,
)


def _int_param(params, name: str, *, minimum: int = 0, maximum: int = 10**6) -> int | None:
    raw = (params.get(name) or "").strip()
    if not raw:
        return None
    # Digits only (int() would also take "+2", "1_000" and other scripts' digits).
    if not (raw.isascii() and raw.removeprefix("-").isdigit()):
        raise ValidationError({name: f"{name.replace('_', ' ').capitalize()}: a whole number, not {raw[:20]!r}."})
    value = int(raw)
    if not minimum <= value <= maximum:
        raise ValidationError({name: f"{name.replace('_', ' ').capitalize()}: between {minimum} and {maximum}."})
    return value


def _choice(params, name: str, allowed, message: str, *, lower: bool = False) -> str:
    value = (params.get(name) or "").strip()
    value = value.lower() if lower else value
    if value and value not in allowed:
        raise ValidationError({name: message})
    return value


def _attribute_filters(params) -> dict[str, str]:
    attributes = {}
    for item in params.getlist("attr") if hasattr(params, "getlist") else params.get("attr", []) or []:
        if not str(item).strip():
            continue
        name, sep, value = str(item).partition(":")
        name = name.strip()
        if not sep or not attribute_key_valid(name):
            raise ValidationError({"attr": "Use key:value (equality only) with a key of letters, digits and single _."})
        attributes[name] = value.strip()
    return attributes


def data_filters(project: Project, params) -> DataFilters:
    """Check a request's filters (``params``: a QueryDict or dict); ``ValidationError`` naming a bad one.

    Parameters (all optional): ``search`` (part of the image's or subject's own id, or file name),
    ``phase`` (phase id), ``labeler`` (membership id) and ``labeler_status`` (pending, done,
    unassigned: the labeler's assignment of the image, any labeler when none is chosen),
    ``min_labels``/``max_labels``, ``near_consensus`` (true/false: all values within one tone),
    ``review`` (open, accepted, resolved), ``baseline_flag`` (a flag name, ``none`` for clean, or
    ``missing``), ``excluded`` (true/false: excluded by a lead now), ``attr`` (``key:value``,
    repeatable), ``ordering`` (a key of ``SORTS``, ``-`` for descending).
    """
    chosen: dict[str, str] = {}
    phase = None
    if phase_id := _int_param(params, "phase", minimum=1, maximum=2**62):
        phase = project.phases.filter(pk=phase_id).first()
        if phase is None:
            raise ValidationError({"phase": "No such phase in this project."})
        chosen["phase"] = str(phase.id)
    if search := (params.get("search") or "").strip()[:SEARCH_MAX]:
        chosen["search"] = search
    if labeler_id := _int_param(params, "labeler", minimum=1, maximum=2**62):
        if not project.memberships.filter(pk=labeler_id, role=Membership.Role.LABELER).exists():
            raise ValidationError({"labeler": "No such labeler in this project."})
        chosen["labeler"] = str(labeler_id)
    status = _choice(params, "labeler_status", LABELER_STATUSES, f"One of: {', '.join(LABELER_STATUSES)}.")
    if status:
        chosen["labeler_status"] = status
    ordering = (params.get("ordering") or "external_id").strip()
    key = ordering.removeprefix("-")
    if key not in SORTS:
        raise ValidationError({"ordering": f"One of: {', '.join(SORTS)} (with - for descending)."})
    min_labels = _int_param(params, "min_labels")
    max_labels = _int_param(params, "max_labels")
    near = _choice(params, "near_consensus", ("true", "false"), "true or false.", lower=True)
    if min_labels is not None:
        chosen["min_labels"] = str(min_labels)
    if max_labels is not None:
        chosen["max_labels"] = str(max_labels)
    if near:
        chosen["near_consensus"] = near
    review = _choice(params, "review", REVIEW_STATES, f"One of: {', '.join(REVIEW_STATES)}.")
    if review:
        chosen["review"] = review
    excluded = _choice(params, "excluded", ("true", "false"), "true or false.", lower=True)
    if excluded:
        chosen["excluded"] = excluded
    flag = _choice(
        params,
        "baseline_flag",
        ("missing", "none", *baseline_services.FLAG_NAMES),
        f"One of: none, missing, {', '.join(baseline_services.FLAG_NAMES)}.",
    )
    if flag:
        chosen["baseline_flag"] = flag
    attributes = _attribute_filters(params)
    if attributes:
        chosen["attr"] = ",".join(f"{k}:{v}" for k, v in attributes.items())
    return DataFilters(
        chosen=chosen,
        phase=phase,
        search=search,
        labeler_id=labeler_id,
        labeler_status=status,
        ordering=ordering,
        key=key,
        min_labels=min_labels,
        max_labels=max_labels,
        near=near,
        review=review,
        excluded=excluded,
        baseline_flag=flag,
        attributes=attributes,
    )


def unknown_filter_keys(params) -> list[str]:
    """The keys of ``params`` that are neither filters (``FILTER_KEYS``) nor paging (``PAGE_KEYS``), sorted."""
    return sorted(str(k) for k in params.keys() if k not in FILTER_KEYS and k not in PAGE_KEYS)


@dataclass
class DataRequest:
    """A table request: its filters, the page asked for, and the parameters that are no filter."""

    filters: DataFilters
    page: int
    page_size: int
    ignored: list[str]


def data_request(project: Project, params) -> DataRequest:
    """A table page's request (filters, ``page``, ``page_size``); ``ValidationError`` naming a bad value."""
    filters = data_filters(project, params)
    page_size = _int_param(params, "page_size", minimum=1, maximum=MAX_PAGE_SIZE) or PAGE_SIZE
    page = _int_param(params, "page", minimum=1, maximum=10**7) or 1
    return DataRequest(filters=filters, page=page, page_size=page_size, ignored=unknown_filter_keys(params))


def bulk_filters(project: Project, params) -> DataFilters | None:
    """A bulk action's filters (``None``: no filters given); an unknown key is refused, since a misspelt
    filter would filter nothing and the action would reach every image."""
    if params is None:
        return None
    if unknown := unknown_filter_keys(params):
        names = ", ".join(repr(k[:50]) for k in unknown[:10])
        raise ValidationError(
            {"filters": f"Unknown filter key(s): {names}; the filters are {', '.join(sorted(FILTER_KEYS))}."}
        )
    return data_filters(project, params)
