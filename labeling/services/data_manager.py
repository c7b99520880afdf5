"""The data manager: one table of a project's images, filtered, searched, sorted and paged in the
database, with bulk actions. The page (``views.data``) and the API (``/api/projects/{id}/data/``)
read the same parameters here, so a filter means the same in both.

Speed at 100,000 images: filters on the images themselves are SQL (``EXISTS`` on indexed columns);
filters and sorts on label statistics (number of labels, mean, range, near consensus) use per-image
statistics from one GROUP BY over the labels, cached until a label changes, with NumPy over the
ids; everything else shown for a row (labels, consensus numbers, assignments, baseline, review
state, exclusion) is read for the one page only, one query per kind. ``bench/bench_data_manager.py``
measures it.

Excluding an image (``exclude``, with the lead's reason; ``include`` undoes it) takes it out of the
project's releases (readiness category ``excluded_by_lead``, its reason in the release's images
table) and nothing else: the image stays in its phases and labelers are still served it. That is a
choice: an exclusion is a reversible, release-time judgement (a lead may include the image again
before the next release, and its labels must then exist), the calibration phases measure agreement
on one fixed set of images that every labeler labels, and a phase's assignments are fixed when it
opens (taking images out of open queues would change progress counts and the labelers' work under
them). A labeler who meets an unusable photo skips it with a reason, as before.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Avg, Count, Exists, F, FloatField, Max, Min, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from ..models import (
    Assignment,
    Image,
    ImageBaseline,
    ImageExclusion,
    Label,
    Membership,
    Phase,
    PhaseImage,
    Project,
    ReviewDecision,
)
from .attributes import attribute_condition
from .audit import audit
from .project_lifecycle import project_refuse_if_archived

PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
MAX_BULK = 10_000
#: A bulk action on more images than a page asks for their number first (``confirm``): a search for "face_"
#: with "every image matching" excluded a whole dataset in one click.
BULK_CONFIRM_ABOVE = PAGE_SIZE
SEARCH_MAX = 200

#: Sort keys: the column's name in the request and what it sorts by.
SORTS = {
    "external_id": "external_id",
    "created": "id",
    "n_labels": "n_labels",
    "mean": "label_mean",
    "range": "label_range",
    "ita": "ita",
}
#: Every parameter ``data_query`` reads: the one list of filter keys. A bulk action refuses any other key
#: (a misspelt one would otherwise filter nothing and act on every image); a read names the others it ignored.
FILTER_PARAMETERS = (
    "search",
    "phase",
    "labeler",
    "labeler_status",
    "min_labels",
    "max_labels",
    "near_consensus",
    "review",
    "baseline_flag",
    "excluded",
    "attr",
    "ordering",
)
FILTER_KEYS = frozenset(FILTER_PARAMETERS)
#: The table's paging (``data_page``): allowed beside the filters, ignored by a bulk action.
PAGE_KEYS = frozenset({"page", "page_size"})
REVIEW_STATES = ("open", "accepted", "resolved")
LABELER_STATUSES = ("pending", "done", "unassigned")
BULK_ACTIONS = {
    "relabel": "Send back for relabeling",
    "calibration_add": "Add to the calibration set",
    "accept": "Mark reviewed: accepted as labelled",
    "resolve": "Mark reviewed: resolved",
    "exclude": "Exclude from the dataset (reason required)",
    "include": "Include again in the dataset",
    "set_attribute": "Set an attribute (name = value; empty value removes it)",
}
#: Longest reason kept for an exclusion (the API's limit for every bulk reason).
MAX_REASON = 2000


@dataclass
class DataQuery:
    """A validated request: the matching images in order, as a queryset (filters and sorts the
    database does alone) or as ordered ids (sorted or filtered by label statistics)."""

    queryset: QuerySet[Image]
    chosen: dict[str, str]
    ordering: str
    phase: Phase | None
    ordered_ids: np.ndarray | None = None

    def count(self) -> int:
        return len(self.ordered_ids) if self.ordered_ids is not None else self.queryset.count()

    def images(self, start: int, stop: int) -> list[Image]:
        if self.ordered_ids is None:
            return list(self.queryset[start:stop])
        ids = [int(i) for i in self.ordered_ids[start:stop]]
        by_id = self.queryset.model.objects.select_related("subject").in_bulk(ids)
        return [by_id[i] for i in ids if i in by_id]


STATS_CACHE_SECONDS = 24 * 3600
#: Cache key prefixes of the label statistics and of the image orders (purged on erasure: services.cache_purge).
STATS_CACHE_PREFIX = "fairtone:data-stats"
IDS_CACHE_PREFIX = "fairtone:data-ids"


def _stats_rows(labels: QuerySet[Label]) -> dict[str, np.ndarray]:
    rows = list(
        labels.order_by()
        .values("image_id")
        .annotate(n=Count("id"), n_valued=Count("value"), mean=Avg("value"), low=Min("value"), high=Max("value"))
        .values_list("image_id", "n", "n_valued", "mean", "low", "high")
        .order_by("image_id")
    )
    table = np.array(rows, dtype=float).reshape(-1, 6)
    return {
        "image_id": table[:, 0].astype(np.int64),
        "n_labels": table[:, 1].astype(np.int64),
        "n_valued": table[:, 2].astype(np.int64),
        "mean": table[:, 3],
        "range": table[:, 5] - table[:, 4],
    }


def label_stats(project: Project, phase: Phase | None) -> dict[str, np.ndarray]:
    """Per labelled image (sorted by id): number of labels, of valid values, mean and range of the
    values; repeats left out.

    Computed once with one GROUP BY over the labels and cached with the labels' version (their count
    and latest change). When labels change, only the images whose labels changed since are computed
    again and patched in (labels are never deleted, only revised), so a lead's page right after a
    label is submitted costs a small query, not the whole aggregate again.
    """
    labels = Label.objects.filter(phase__project_id=project.id, is_repeat=False)
    if phase is not None:
        labels = labels.filter(phase_id=phase.id)
    version = labels.aggregate(n=Count("id"), changed=Max("updated_at"))
    key = f"{STATS_CACHE_PREFIX}:{project.id}:{phase.id if phase else 'all'}"
    cached = cache.get(key)
    if cached is not None and cached["version"] == version:
        return cached["stats"]
    if cached is None or cached["version"]["changed"] is None or version["changed"] is None:
        stats = _stats_rows(labels)
    else:
        stats = cached["stats"]
        # ">=": a label changed in the same microsecond as the cached latest one is computed again too.
        changed_images = labels.filter(updated_at__gte=cached["version"]["changed"]).values("image_id")
        fresh = _stats_rows(labels.filter(image_id__in=changed_images))
        at = np.searchsorted(stats["image_id"], fresh["image_id"])
        present = at < len(stats["image_id"])
        present[present] = stats["image_id"][at[present]] == fresh["image_id"][present]
        stats = {name: values.copy() for name, values in stats.items()}
        for name in stats:
            stats[name][at[present]] = fresh[name][present]
        if (~present).any():
            stats = {name: np.insert(stats[name], at[~present], fresh[name][~present]) for name in stats}
    cache.set(key, {"version": version, "stats": stats}, STATS_CACHE_SECONDS)
    return stats


@dataclass
class DataFilters:
    """A data manager request's filters and order, checked (``forms.data_manager.data_filters``); ``chosen`` as shown back."""

    chosen: dict[str, str]
    phase: Phase | None
    search: str
    labeler_id: int | None
    labeler_status: str
    ordering: str
    key: str
    min_labels: int | None
    max_labels: int | None
    near: str
    review: str
    excluded: str
    baseline_flag: str
    attributes: dict[str, str]

    @property
    def by_stats(self) -> bool:
        """Whether the label statistics filter or sort (then computed in Python, not SQL)."""
        return bool(
            self.min_labels is not None
            or self.max_labels is not None
            or self.near
            or self.key in ("n_labels", "mean", "range")
        )


def _filtered_images(project: Project, f: DataFilters) -> QuerySet[Image]:
    """The project's images that pass the filters of ``f`` (no order yet)."""
    from . import baselines as baseline_services

    qs = project.images.select_related("subject")
    if f.phase is not None:
        qs = qs.filter(Exists(PhaseImage.objects.filter(phase_id=f.phase.id, image_id=OuterRef("pk"))))
    if f.search:
        qs = qs.filter(
            Q(external_id__icontains=f.search)
            | Q(subject__external_id__icontains=f.search)
            | Q(original_filename__icontains=f.search)
        )
    assignments = Assignment.objects.filter(image_id=OuterRef("pk"))
    if f.phase is not None:
        assignments = assignments.filter(phase_id=f.phase.id)
    if f.labeler_id:
        assignments = assignments.filter(labeler_id=f.labeler_id)
    if f.labeler_status == "pending":
        qs = qs.filter(Exists(assignments.filter(done_at__isnull=True)))
    elif f.labeler_status == "done":
        qs = qs.filter(Exists(assignments)).exclude(Exists(assignments.filter(done_at__isnull=True)))
    elif f.labeler_status:
        qs = qs.exclude(Exists(assignments))
    elif f.labeler_id:
        qs = qs.filter(Exists(assignments))
    if f.review:
        decisions = ReviewDecision.objects.filter(image_id=OuterRef("pk"))
        qs = (
            qs.exclude(Exists(decisions)) if f.review == "open" else qs.filter(Exists(decisions.filter(state=f.review)))
        )
    if f.excluded:
        # EXISTS on the partial unique index of open exclusions (one probe per image).
        open_exclusions = ImageExclusion.objects.filter(image_id=OuterRef("pk"), included_at__isnull=True)
        qs = qs.filter(Exists(open_exclusions)) if f.excluded == "true" else qs.exclude(Exists(open_exclusions))
    current = baseline_services.baselines_current(project).filter(image_id=OuterRef("pk"))
    if f.baseline_flag == "missing":
        qs = qs.exclude(Exists(current))
    elif f.baseline_flag == "none":
        qs = qs.filter(Exists(current.filter(status=ImageBaseline.Status.OK, flags=[])))
    elif f.baseline_flag:
        qs = qs.filter(Exists(current.filter(flags__icontains=f'"{f.baseline_flag}"')))
    if f.key == "ita":
        qs = qs.annotate(ita=Subquery(current.values("ita_median")[:1], output_field=FloatField()))
    for name, value in f.attributes.items():
        # Subject or image attribute, whatever the case of the text (services.attributes, the one rule).
        qs = qs.filter(attribute_condition(name, value))
    return qs


def data_query(project: Project, f: DataFilters) -> DataQuery:
    """The images matching the checked filters ``f`` (``forms.data_manager.data_filters``), sorted."""
    qs = _filtered_images(project, f)
    descending = f.ordering.startswith("-")
    if f.by_stats:
        ids = _filter_and_sort_by_stats(
            project,
            f.phase,
            qs,
            key=f.key,
            descending=descending,
            min_labels=f.min_labels,
            max_labels=f.max_labels,
            near=f.near,
            every_image=not (set(f.chosen) - {"min_labels", "max_labels", "near_consensus"}),
        )
        return DataQuery(queryset=qs, chosen=f.chosen, ordering=f.ordering, phase=f.phase, ordered_ids=ids)
    column = SORTS[f.key]
    if column in ("external_id", "id"):
        order = [F(column).desc() if descending else F(column).asc()]
    else:
        expression = F(column).desc(nulls_last=True) if descending else F(column).asc(nulls_last=True)
        order = [expression, F("id").asc()]
    return DataQuery(queryset=qs.order_by(*order), chosen=f.chosen, ordering=f.ordering, phase=f.phase)


def _image_ids(project: Project, qs: QuerySet[Image], ordering_key: str, *, every_image: bool) -> np.ndarray:
    """The ids of ``qs`` in its order (``"id"``: sorted by id). Every image of the project, in a
    given order, is cached until an image is added or removed (their count and largest id): a
    100,000-row read is then not repeated on each page."""

    def read(rows) -> np.ndarray:
        return np.fromiter(rows.values_list("id", flat=True).iterator(chunk_size=20_000), dtype=np.int64)

    if ordering_key == "id":
        qs = qs.order_by("id")
    if not every_image or ordering_key.removeprefix("-") == "ita":  # ITA changes without images changing
        return read(qs)
    version = project.images.aggregate(n=Count("id"), last=Max("id"))
    key = f"{IDS_CACHE_PREFIX}:{project.id}:{ordering_key}:{version['n']}:{version['last']}"
    ids = cache.get(key)
    if ids is None:
        ids = read(qs)
        cache.set(key, ids, STATS_CACHE_SECONDS)
    return ids


def _filter_and_sort_by_stats(
    project: Project,
    phase: Phase | None,
    qs: QuerySet[Image],
    *,
    key: str,
    descending: bool,
    min_labels: int | None,
    max_labels: int | None,
    near: str,
    every_image: bool = False,
) -> np.ndarray:
    """The ids of ``qs`` filtered and sorted by label statistics, with NumPy over every image
    (100,000 ids and four arrays): the database never aggregates per request."""
    # ``every_image``: no filter on the images themselves, so the project's ids (cached) will do.
    ids = _image_ids(project, qs, "id", every_image=every_image)
    stats = label_stats(project, phase)

    def per_image(name: str, missing: float) -> np.ndarray:
        """``stats[name]`` for each of ``ids`` (``missing`` for an image without labels, or when none has any)."""
        if not len(stats["image_id"]) or not len(ids):
            return np.full(len(ids), missing)
        at = np.minimum(np.searchsorted(stats["image_id"], ids), len(stats["image_id"]) - 1)
        return np.where(stats["image_id"][at] == ids, stats[name][at], missing)

    n_labels = per_image("n_labels", 0)
    n_valued = per_image("n_valued", 0)
    mean = per_image("mean", np.nan)
    spread = per_image("range", np.nan)
    keep = np.ones(len(ids), dtype=bool)
    if min_labels is not None:
        keep &= n_labels >= min_labels
    if max_labels is not None:
        keep &= n_labels <= max_labels
    if near:
        # Near consensus needs two valid values or more; an image with fewer is neither.
        with np.errstate(invalid="ignore"):
            keep &= (n_valued >= 2) & ((spread <= 1) if near == "true" else (spread > 1))
    ids = ids[keep]
    if key in ("n_labels", "mean", "range"):
        values = {"n_labels": n_labels, "mean": mean, "range": spread}[key][keep].astype(float)
        # Missing values last in either direction; ties by id.
        missing = np.isnan(values)
        ordered = np.lexsort((ids, -values if descending else values, missing))
        return ids[ordered]
    if key in ("external_id", "ita"):
        # Sorting by a database column: the database orders every id of ``qs`` (one indexed read),
        # NumPy keeps the filtered ones in that order.
        column = SORTS[key]
        order = F(column).desc(nulls_last=True) if descending else F(column).asc(nulls_last=True)
        ordering_key = ("-" if descending else "") + key
        ordered = _image_ids(project, qs.order_by(order, "id"), ordering_key, every_image=every_image)
        return ordered[np.isin(ordered, ids)]
    return ids[::-1] if descending else ids


def _consensus(values: list[float], selections: list[str]) -> dict:
    """The consensus fields of one image from its valid values (the data card's definitions)."""
    if not values:
        return {"mean": None, "std": None, "range": None, "near_consensus": None, "complete_consensus": None}
    mean = sum(values) / len(values)
    spread = max(values) - min(values)
    return {
        "mean": round(mean, 3),
        "std": round(math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)), 3),
        "range": spread,
        "near_consensus": len(values) >= 2 and spread <= 1,
        "complete_consensus": len(values) >= 2 and len(set(selections)) == 1,
    }


def data_rows(project: Project, images: list[Image], phase: Phase | None = None) -> list[dict]:
    """What the table shows for one page of images (one query per kind of fact, never per row)."""
    from . import baselines as baseline_services

    ids = [image.id for image in images]
    labels = Label.objects.filter(image_id__in=ids, is_repeat=False)
    if phase is not None:
        labels = labels.filter(phase_id=phase.id)
    by_image: dict[int, list] = defaultdict(list)
    for row in labels.values_list("image_id", "labeler__pseudonym", "tone_low", "tone_high", "value", "skip_reason"):
        by_image[row[0]].append(row)
    assignments = Assignment.objects.filter(image_id__in=ids)
    if phase is not None:
        assignments = assignments.filter(phase_id=phase.id)
    assigned: dict[int, dict[str, bool]] = defaultdict(dict)
    for image_id, pseudonym, done_at in assignments.order_by("labeler__pseudonym").values_list(
        "image_id", "labeler__pseudonym", "done_at"
    ):
        # Done once any of the labeler's assignments of the image is done.
        assigned[image_id][pseudonym] = assigned[image_id].get(pseudonym, False) or done_at is not None
    phases: dict[int, list[str]] = defaultdict(list)
    for image_id, kind, is_repeat in (
        PhaseImage.objects.filter(image_id__in=ids)
        .order_by("phase_id")
        .values_list("image_id", "phase__kind", "is_repeat")
    ):
        phases[image_id].append(Phase.Kind(kind).label + (" (repeat)" if is_repeat else ""))
    baselines = {
        b["image_id"]: b
        for b in baseline_services.baselines_current(project)
        .filter(image_id__in=ids)
        .values("image_id", "status", "ita_median", "ita_class", "flags")
    }
    decisions = dict(ReviewDecision.objects.filter(image_id__in=ids).values_list("image_id", "state"))
    exclusions = {
        image_id: {"reason": reason, "by": by or "", "at": at.isoformat()}
        for image_id, reason, by, at in ImageExclusion.objects.filter(
            image_id__in=ids, included_at__isnull=True
        ).values_list("image_id", "reason", "excluded_by__username", "excluded_at")
    }
    rows = []
    for image in images:
        image_labels = by_image.get(image.id, [])
        selections = []
        values = []
        for _, _, low, high, value, skip in image_labels:
            if skip or low is None:
                continue
            selections.append(f"{low}+{high}" if high else str(low))
            if value is not None:
                values.append(value)
        baseline = baselines.get(image.id)
        attributes = {**((image.subject.attributes or {}) if image.subject else {}), **(image.attributes or {})}
        rows.append(
            {
                "id": image.id,
                "external_id": image.external_id,
                # A box's thumbnail is the box; ``box`` says which part of which photo it is.
                "thumbnail_url": f"/images/{image.id}/file/thumbnail/",
                "box": image.box_dict,
                "file": image.original_filename,
                "subject": image.subject.external_id if image.subject else None,
                "attributes": attributes,
                "phases": phases.get(image.id, []),
                "labelers": [{"labeler": k, "done": v} for k, v in assigned.get(image.id, {}).items()],
                "n_labels": len(image_labels),
                "labels": [
                    {"labeler": name, "selection": f"skipped: {skip}" if skip else (f"{lo}+{hi}" if hi else str(lo))}
                    for _, name, lo, hi, _, skip in image_labels
                ],
                **_consensus(values, selections),
                "baseline": {
                    "status": baseline["status"],
                    "ita": None if baseline["ita_median"] is None else round(baseline["ita_median"], 1),
                    "ita_class": baseline["ita_class"],
                    "flags": baseline["flags"],
                }
                if baseline
                else None,
                "review": decisions.get(image.id, "open"),
                "excluded": exclusions.get(image.id),
            }
        )
    return rows


def data_page(
    project: Project, f: DataFilters, *, page: int = 1, page_size: int = PAGE_SIZE, ignored: list[str] | None = None
) -> dict:
    """One page of the table: ``count``, ``page``, ``n_pages``, ``results`` (``data_rows``), ``chosen``, and
    ``ignored``: the request's parameters that are no filter, when there are any (the request is read and
    checked by ``forms.data_manager.data_request``)."""
    query = data_query(project, f)
    count = query.count()
    n_pages = max(1, math.ceil(count / page_size))
    if page > n_pages:
        raise ValidationError({"page": f"Page {page}: there are {n_pages} page(s)."})
    images = query.images((page - 1) * page_size, page * page_size)
    answer = {
        "count": count,
        "page": page,
        "n_pages": n_pages,
        "page_size": page_size,
        "ordering": query.ordering,
        "chosen": query.chosen,
        "results": data_rows(project, images, query.phase),
    }
    if ignored:
        answer["ignored"] = list(ignored)
    return answer


def _bulk_images(project: Project, image_ids, filters: DataFilters | None) -> list[Image]:
    if image_ids:
        try:
            ids = list(dict.fromkeys(int(i) for i in image_ids))
        except (TypeError, ValueError):
            raise ValidationError({"image_ids": "Image ids are whole numbers."}) from None
        if len(ids) > MAX_BULK:
            raise ValidationError({"image_ids": f"At most {MAX_BULK:,} images at once."})
        images = list(project.images.filter(id__in=ids))
        if len(images) != len(ids):
            raise ValidationError({"image_ids": "Some images are not in this project."})
        return images
    if filters is None:
        raise ValidationError({"image_ids": "Choose images, or apply the action to every image the filters match."})
    query = data_query(project, filters)
    if query.count() > MAX_BULK:
        raise ValidationError({"image_ids": f"The filters match more than {MAX_BULK:,} images: narrow them first."})
    return query.images(0, MAX_BULK)


@transaction.atomic
def data_bulk(
    *,
    project: Project,
    action: str,
    user,
    image_ids=None,
    filters: DataFilters | None = None,
    reason: str = "",
    labeler_ids=None,
    attribute: str = "",
    value: str = "",
    confirm: int | None = None,
) -> dict:
    """Apply a bulk action to the chosen images (``image_ids``) or to every image the filters match
    (``filters``, checked by ``forms.data_manager.bulk_filters``; at most ``MAX_BULK``). Returns ``{"action", "n_images", "n_changed", "message"}``.

    More than :data:`BULK_CONFIRM_ABOVE` images (a page) are changed only when ``confirm`` is their number:
    otherwise a ``ValidationError`` on ``confirm`` says how many images the action would change.

    - ``relabel``: send each image back (post-calibration phase open) to ``labeler_ids``, or to the
      labelers who labelled it, with ``reason`` (shown to them);
    - ``calibration_add``: add the images to calibration 1 (before calibration starts), taking them
      out of the main phase;
    - ``accept`` / ``resolve``: the post-calibration review's decision on each image;
    - ``exclude``: exclude the images from the dataset with ``reason`` (required), see
      :func:`images_exclude`; ``include``: include them again (``reason``, optional, is kept as a
      note), see :func:`images_include`;
    - ``set_attribute``: set ``attribute`` to ``value`` (empty: remove it) on the subjects of the images, or the
      images themselves (``image.<name>``, or no subject), see ``services.image_attributes.images_set_attribute``.
    """
    from .labels import relabel_request
    from .project_lifecycle import project_refuse_if_archived
    from .review_decisions import review_decide

    project_refuse_if_archived(project.pk, "change its images")
    if action not in BULK_ACTIONS:
        raise ValidationError({"action": f"One of: {', '.join(BULK_ACTIONS)}."})
    if action == "exclude":
        # Before the images are read: a missing reason is the lead's mistake to hear about first.
        _exclusion_reason(reason)
    images = _bulk_images(project, image_ids, filters)
    bulk_confirm_check(action, len(images), confirm)
    changed = 0
    if action == "relabel":
        chosen = None
        if labeler_ids:
            try:
                wanted = {int(i) for i in labeler_ids}
            except (TypeError, ValueError):
                raise ValidationError({"labeler_ids": "Labeler ids are whole numbers."}) from None
            chosen = list(project.memberships.filter(id__in=wanted, role=Membership.Role.LABELER))
            if len(chosen) != len(wanted):
                raise ValidationError({"labeler_ids": "Some are not labelers of this project."})
        for image in images:
            labelers = chosen
            if labelers is None:
                labelers = list(
                    # Deactivated labelers are left out: a request to them could never be answered.
                    Membership.objects.filter(
                        labels__image=image, labels__is_repeat=False, role=Membership.Role.LABELER, is_active=True
                    )
                    .distinct()
                    .order_by("id")
                )
            if labelers:
                changed += len(relabel_request(image=image, labelers=labelers, reason=reason, user=user))
        message = f"{changed} relabel request(s) sent for {len(images)} image(s)."
    elif action == "exclude":
        changed = images_exclude(project=project, images=images, reason=reason, user=user)
        message = f"{changed} image(s) excluded from the dataset."
        if changed < len(images):
            message += f" {len(images) - changed} already excluded (their reason is kept)."
    elif action == "include":
        changed = images_include(project=project, images=images, user=user, note=reason)
        message = f"{changed} image(s) included again in the dataset."
        if changed < len(images):
            message += f" {len(images) - changed} were not excluded."
    elif action == "set_attribute":
        from .image_attributes import images_set_attribute

        changed = images_set_attribute(project=project, images=images, name=attribute, value=value, user=user)
        message = f"{changed} of {len(images)} image(s) changed ({attribute.strip()})."
    elif action == "calibration_add":
        changed = calibration_add_images(project=project, image_ids=[i.id for i in images])
        message = f"{changed} image(s) added to calibration 1."
    else:
        post = project.phases.get(kind=Phase.Kind.POST_CALIBRATION)
        state = ReviewDecision.State.ACCEPTED if action == "accept" else ReviewDecision.State.RESOLVED
        for image in images:
            review_decide(phase=post, image=image, state=state, user=user, note=reason)
        changed = len(images)
        message = f"{changed} image(s) marked {state.label.lower()}."
    return {"action": action, "n_images": len(images), "n_changed": changed, "message": message}


def bulk_confirm_check(action: str, n_images: int, confirm) -> None:
    """Refuse a bulk action on more than a page of images unless ``confirm`` repeats how many (see
    :data:`BULK_CONFIRM_ABOVE`); the refusal says the number."""
    if n_images <= BULK_CONFIRM_ABOVE:
        return
    try:
        confirmed = int(confirm) if confirm not in (None, "") else None
    except (TypeError, ValueError):
        confirmed = None
    if confirmed != n_images:
        what = BULK_ACTIONS[action].split(" (")[0]
        raise ValidationError(
            {
                "confirm": f"“{what}” would change {n_images:,} images, more than a page ({BULK_CONFIRM_ABOVE}): "
                f"confirm with their number, {n_images}."
            },
            code="confirm",
        )


def _exclusion_reason(reason: str) -> str:
    text = (reason or "").strip()
    if not text:
        raise ValidationError(
            {"reason": "Say why these images are excluded: the reason goes into the release with each image."}
        )
    if len(text) > MAX_REASON:
        raise ValidationError({"reason": f"At most {MAX_REASON:,} characters."})
    return text


def _user(user):
    return user if user is not None and getattr(user, "is_authenticated", False) else None


def images_exclude(*, project: Project, images: list[Image], reason: str, user) -> int:
    """Exclude ``images`` (of ``project``) from the dataset with ``reason``; returns how many were
    newly excluded. An image already excluded keeps its exclusion and reason.

    Releases leave the images out (readiness category ``excluded_by_lead``, with ``reason`` in the
    images table); labelers are still served them (see the module's docstring).

    Raises
    ------
    django.core.exceptions.ValidationError
        No reason, or a reason too long; the project is archived.
    """
    text = _exclusion_reason(reason)
    project_refuse_if_archived(project.id, "exclude its images")
    ids = [image.id for image in images if image.project_id == project.id]
    if len(ids) != len(images):
        raise ValidationError({"image_ids": "Some images are not in this project."})
    already = set(
        ImageExclusion.objects.filter(image_id__in=ids, included_at__isnull=True).values_list("image_id", flat=True)
    )
    new = [i for i in ids if i not in already]
    # ignore_conflicts: a lead excluding the same image at the same moment leaves one open exclusion.
    ImageExclusion.objects.bulk_create(
        [ImageExclusion(image_id=i, reason=text, excluded_by=_user(user)) for i in new], ignore_conflicts=True
    )
    audit(project, "images.exclude", user=user, reason=text, n_excluded=len(new), image_ids=new)
    return len(new)


def images_include(*, project: Project, images: list[Image], user, note: str = "") -> int:
    """Include ``images`` again: their open exclusion is closed (who and when recorded, the row kept).
    Returns how many were excluded before; ``note`` (optional) is kept with the exclusion.

    Raises
    ------
    django.core.exceptions.ValidationError
        The project is archived.
    """
    project_refuse_if_archived(project.id, "include its images again")
    ids = [image.id for image in images]
    n = ImageExclusion.objects.filter(image__project_id=project.id, image_id__in=ids, included_at__isnull=True).update(
        included_at=timezone.now(), included_by=_user(user), included_note=(note or "").strip()[:MAX_REASON]
    )
    audit(project, "images.include", user=user, note=(note or "").strip(), n_included=n, image_ids=ids)
    return n


def calibration_add_images(*, project: Project, image_ids: list[int]) -> int:
    """Add images to calibration 1 before calibration starts; they leave the main phase. Returns how
    many were added (images already in the calibration set are left as they are)."""
    cal1 = project.phases.get(kind=Phase.Kind.CALIBRATION_1)
    cal2 = project.phases.get(kind=Phase.Kind.CALIBRATION_2)
    main = project.phases.get(kind=Phase.Kind.MAIN)
    for phase in (cal1, cal2, main):
        if phase.status != Phase.Status.DRAFT:
            raise ValidationError(f"{phase.get_kind_display()} has started: the calibration set can no longer change.")
    already = set(
        PhaseImage.objects.filter(phase__in=[cal1, cal2], image_id__in=image_ids).values_list("image_id", flat=True)
    )
    new = [i for i in image_ids if i not in already]
    PhaseImage.objects.filter(phase=main, image_id__in=new).delete()
    PhaseImage.objects.bulk_create([PhaseImage(phase=cal1, image_id=i) for i in new])
    if new and not cal1.selection_method:
        cal1.selection_method = cal2.selection_method = "manual"
        cal1.save(update_fields=["selection_method"])
        cal2.save(update_fields=["selection_method"])
    audit(project, "calibration.add_images", cal1, n_added=len(new), image_ids=new)
    return len(new)
