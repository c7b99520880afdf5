"""A phase's progress over time: labels per day, per labeler (the phase page's chart and the phase API).

A label counts on the day its first answer was given (``Label.created_at``, UTC): changed answers and
relabels add revisions, not labels. Computed with one GROUP BY and kept in the cache until a label of the
phase is added or changed (the key carries the phase's label count and latest change).
"""

from __future__ import annotations

from datetime import date, timedelta

from django.core.cache import cache
from django.db.models import Count, Max
from django.db.models.functions import TruncDate

from ..models import Label, Membership, Phase

CACHE_TIMEOUT = 24 * 3600
#: Cache key prefix of the progress tables (purged on erasure: services.cache_purge).
PROGRESS_CACHE_PREFIX = "progress:v1"
#: Days shown at most (the latest ones): a phase that ran longer is summarised by its last year.
MAX_DAYS = 366


def phase_labels_per_day(phase: Phase) -> dict:
    """Labels per day and per labeler, every day from the first label to the last (days without labels count 0).

    Returns ``{"days": ["YYYY-MM-DD", ...], "labelers": [{"pseudonym", "per_day", "total"}], "per_day": [...],
    "total": n, "first_day", "last_day", "truncated": bool}``; labelers in pseudonym order.
    """
    labels = Label.objects.filter(phase=phase)
    version = labels.order_by().aggregate(n=Count("id"), last=Max("updated_at"))
    key = f"{PROGRESS_CACHE_PREFIX}:{phase.pk}:{version['n']}:{version['last'].isoformat() if version['last'] else '-'}"
    cached = cache.get(key)
    if cached is not None:
        return cached
    rows = (
        labels.order_by().annotate(day=TruncDate("created_at")).values_list("day", "labeler_id").annotate(n=Count("id"))
    )
    counts: dict[int, dict[date, int]] = {}
    for day, labeler_id, n in rows:
        counts.setdefault(labeler_id, {})[day] = n
    pseudonyms = dict(Membership.objects.filter(pk__in=counts).values_list("pk", "pseudonym"))
    all_days = sorted({d for per in counts.values() for d in per})
    result: dict = {"days": [], "labelers": [], "per_day": [], "total": 0, "first_day": None, "last_day": None}
    result["truncated"] = False
    if all_days:
        first, last = all_days[0], all_days[-1]
        if (last - first).days + 1 > MAX_DAYS:
            first = last - timedelta(days=MAX_DAYS - 1)
            result["truncated"] = True
        days = [first + timedelta(days=i) for i in range((last - first).days + 1)]
        labelers = sorted(counts, key=lambda pk: pseudonyms.get(pk, ""))
        result["days"] = [d.isoformat() for d in days]
        result["labelers"] = [
            {
                "pseudonym": pseudonyms.get(pk, "?"),
                "per_day": [counts[pk].get(d, 0) for d in days],
                "total": sum(counts[pk].values()),
            }
            for pk in labelers
        ]
        result["per_day"] = [sum(counts[pk].get(d, 0) for pk in labelers) for d in days]
        result["total"] = sum(sum(per.values()) for per in counts.values())
        result["first_day"], result["last_day"] = all_days[0].isoformat(), all_days[-1].isoformat()
    cache.set(key, result, CACHE_TIMEOUT)
    return result
