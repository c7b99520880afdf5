"""Read-side queries shared by pages and the API."""

from typing import Any

from django.db.models import Count, Q, QuerySet
from django.http import Http404

from .errors import NotAMember, WrongRole
from .models import Assignment, Image, ImageBaseline, Label, Membership, Phase, Project, Release
from .services.attributes import attribute_condition, attribute_key_valid  # also used by the API's images filter

#: A membership's cache entry expires after this: the most a change can go unseen, even when its clearing did
#: not reach Redis (an outage; ``config.cache`` also replays the clearing once Redis answers). At most 30 s.
MEMBERSHIP_CACHE_SECONDS = 30


def _membership_key(user_id: int, project_id: int) -> str:
    return f"membership:{user_id}:{project_id}"


def membership_for(user, project: Project) -> Membership | None:
    """The user's active membership in ``project``, or None.

    Asked on every request of a labeling session, so it is cached briefly; a
    change of role or membership clears the entry (``post_save``/``post_delete``;
    with a per-process cache, other processes see it within the cache time).
    """
    if not user.is_authenticated:
        return None
    from django.core.cache import cache

    key = _membership_key(user.id, project.id)
    fields = cache.get(key)
    if fields is None:
        m = project.memberships.filter(user=user, is_active=True).order_by().first()
        fields = {f.attname: getattr(m, f.attname) for f in Membership._meta.concrete_fields} if m else {}
        cache.set(key, fields, MEMBERSHIP_CACHE_SECONDS)
    if not fields:
        return None
    m = Membership(**fields)
    m._state.adding = False
    m._state.db = "default"
    m.project = project
    return m


def membership_cache_clear(sender, instance: Membership, **kwargs) -> None:
    from django.core.cache import cache
    from django.db import transaction

    key = _membership_key(instance.user_id, instance.project_id)
    cache.delete(key)
    # Again after commit: a request between the save and the commit may have cached the old row.
    transaction.on_commit(lambda: cache.delete(key))


def is_lead(user, project: Project) -> bool:
    if user.is_authenticated and user.is_superuser:
        return True
    m = membership_for(user, project)
    return m is not None and m.role == Membership.Role.LEAD


def project_access(user, project: Project, *roles: str, hide_from_other_roles: bool = False) -> Membership | None:
    """The one rule of who may do what on a project: the requester's membership if it has one of
    ``roles`` (any role when none is named).

    Superusers pass wherever a lead would, with their membership if they have one (often None).
    A non-member gets ``NotAMember`` (answered 404: a project's existence is not disclosed); a
    member with another role gets ``WrongRole``, answered 403, or 404 as well where
    ``hide_from_other_roles`` (pages, and the lead's dashboards in the API). The answers are
    made in one place: ``errors.http_error``.
    """
    m = membership_for(user, project)
    if user.is_authenticated and user.is_superuser and (not roles or Membership.Role.LEAD in roles):
        return m
    if m is None:
        raise NotAMember()
    if roles and m.role not in roles:
        raise WrongRole(roles, hidden=hide_from_other_roles)
    return m


def can_create_projects(user) -> bool:
    """Staff, or people given the ``labeling.add_project`` permission (e.g. in the admin).

    Creating a project makes its creator the lead, who can create sign-ins and import
    photos: a labeler must not be able to give themselves that role.
    """
    return user.is_authenticated and (user.is_staff or user.has_perm("labeling.add_project"))


def can_import_from_server(user) -> bool:
    """Importing from a server folder reads files outside any project: staff only."""
    return user.is_authenticated and user.is_staff


def projects_for(user) -> QuerySet[Project]:
    if user.is_superuser:
        return Project.objects.all()
    return Project.objects.filter(memberships__user=user, memberships__is_active=True).distinct()


def labeler_can_view_image(m: Membership, image_id: int) -> bool:
    """A labeler sees an image of their own queues (phases opened) or a tone example of the project."""
    return (
        Assignment.objects.filter(
            labeler_id=m.id, image_id=image_id, phase__status__in=[Phase.Status.OPEN, Phase.Status.CLOSED]
        ).exists()
        or m.project.tone_examples.filter(image_id=image_id).exists()
    )


def image_filter_by_attributes(qs: QuerySet[Image], filters: dict[str, str]) -> QuerySet[Image]:
    """Filter images by subject attribute or image attribute: the one documented operator, equality
    (compared as text whatever its case, and as a number when the value is one:
    ``services.attributes.attribute_condition``). A key that is not a plain attribute
    name (``attribute_key_valid``) matches nothing."""
    for key, value in filters.items():
        if not attribute_key_valid(key):
            return qs.none()
        qs = qs.filter(attribute_condition(key, value))
    return qs


def assignment_next(*, phase: Phase, labeler: Membership) -> Assignment | None:
    return (
        phase.assignments.filter(labeler=labeler, done_at__isnull=True)
        .select_related("image")
        .order_by("position")
        .first()
    )


def assignment_queue(*, phase: Phase, labeler: Membership, after_position: int = 0, limit: int = 2):
    return list(
        # Not ``phase.assignments``: the related manager would assign the phase to each row
        # and so load the deferred ``phase_id`` with one query per row.
        Assignment.objects.filter(
            phase_id=phase.id, labeler_id=labeler.id, done_at__isnull=True, position__gt=after_position
        )
        .select_related("image")
        .only(
            "id",
            "position",
            "kind",
            "request_reason",
            "image__id",
            "image__width",
            "image__height",
            "image__box_x",
            "image__box_y",
            "image__box_width",
            "image__box_height",
        )
        .order_by("position")[:limit]
    )


def labeler_progress(*, phase: Phase, labeler: Membership) -> dict[str, int]:
    """How far the labeler is in ``phase``: ``{"total": assigned, "done": answered}`` (one query)."""
    return Assignment.objects.filter(phase_id=phase.id, labeler_id=labeler.id).aggregate(
        total=Count("id"), done=Count("id", filter=Q(done_at__isnull=False))
    )


def labeler_history(*, phase: Phase, labeler: Membership) -> list[dict]:
    """The labeler's answered images in this phase, in the order they were shown."""
    rows = phase.assignments.filter(labeler=labeler, done_at__isnull=False).select_related("image").order_by("position")
    labels = {lab.assignment_id: lab for lab in Label.objects.filter(phase=phase, labeler=labeler)}
    relabels = {lab.id: lab for lab in Label.objects.filter(id__in=[a.relabel_of_id for a in rows if a.relabel_of_id])}
    history = []
    for a in rows:
        label = relabels.get(a.relabel_of_id) if a.relabel_of_id else labels.get(a.id)
        if label is None:
            continue
        history.append({"assignment": a, "label": label})
    return history


def labeler_own_answers(label_ids) -> dict[int, dict[str, Any]]:
    """Per label: the labeler's own latest answer and how many they gave (``labels.OWN_SOURCES``).

    What a labeler is shown as theirs: never a lead's correction (nor that there was one), whatever the
    label's current answer is (``labels.revision_counts``). One query.
    """
    from .models import LabelRevision
    from .services.labels import OWN_SOURCES

    answers: dict[int, dict[str, Any]] = {}
    revisions = (
        LabelRevision.objects.filter(label_id__in=list(label_ids), source__in=OWN_SOURCES)
        .order_by("label_id", "number")
        .values("label_id", "tone_low", "tone_high", "value", "uncertain", "skip_reason", "created_at")
    )
    for row in revisions:
        previous = answers.get(row["label_id"])
        answers[row["label_id"]] = {**row, "n_revisions": (previous["n_revisions"] if previous else 0) + 1}
    return answers


def labeler_phases(user) -> QuerySet[Phase]:
    return (
        Phase.objects.filter(assignments__labeler__user=user, assignments__labeler__is_active=True)
        .exclude(status=Phase.Status.DRAFT)
        .distinct()
        .select_related("project")
    )


# --------------------------------------------------------------------------
# The lead's dashboards (consensus, colorimetric baselines): pages and API
# --------------------------------------------------------------------------


def consensus_phase(project: Project, raw: str | None, *, default_selected: bool = False) -> Phase | None:
    """The phase ``raw`` names (``Http404`` if it is not one of the project's).

    None when no phase is named, unless ``default_selected``: then the phase the dashboard
    selects by default (main, else the latest with labels; ``Http404`` when none has labels).
    """
    from .services import consensus as consensus_services

    if raw:
        try:
            return project.phases.get(pk=int(raw))
        except (ValueError, Phase.DoesNotExist):
            raise Http404("No such phase in this project.") from None
    if not default_selected:
        return None
    selected = consensus_services.project_consensus(project)["selected"]
    if selected is None:
        raise Http404("No labels yet.")
    return project.phases.get(pk=selected["phase"]["id"])


def consensus_image_rows(phase: Phase, params) -> tuple[dict, list[dict]]:
    """The phase's consensus (with per-image data) and its image rows, filtered and sorted by ``params``."""
    from .services import consensus as consensus_services

    data = consensus_services.phase_summary(phase, with_images=True)
    return data, consensus_services.consensus_images(data["images"], params)


def consensus_image_records(project: Project, data: dict, rows: list[dict]) -> list[dict]:
    """The data-card records of ``rows`` (one page of them), labelers by pseudonym."""
    from .services import consensus as consensus_services

    names = dict(Membership.objects.filter(project=project).values_list("id", "pseudonym"))
    records = consensus_services.image_rows(data["images"], rows, names)
    # Leads know images by their own ids (as in the manifest), not by internal numbers.
    external = dict(project.images.filter(id__in=[r["image_id"] for r in records]).values_list("id", "external_id"))
    for record in records:
        record["external_id"] = external.get(record["image_id"])
        record["thumbnail_url"] = f"/images/{record['image_id']}/file/thumbnail/"
    return records


def baseline_rows(project: Project, params) -> tuple[QuerySet[ImageBaseline], dict[str, str]]:
    """Current results filtered by ``flag``, ``ita_class``, ``status`` (and ``parameters_hash``),
    with the filters chosen; ``ValidationError`` for an unknown value."""
    from django.core.exceptions import ValidationError

    from .services import baselines as baseline_services

    if parameters_hash := params.get("parameters_hash", "").strip():
        qs = ImageBaseline.objects.filter(image__project=project, parameters_hash=parameters_hash)
    else:
        qs = baseline_services.baselines_current(project)
    chosen = {}
    flag = params.get("flag", "").strip()
    if flag:
        if flag == "none":
            qs = qs.filter(status=ImageBaseline.Status.OK, flags=[])
        elif flag in baseline_services.FLAG_NAMES:
            # JSON containment is not portable to SQLite: match the serialised name.
            qs = qs.filter(flags__icontains=f'"{flag}"')
        else:
            raise ValidationError({"flag": f"One of: none, {', '.join(baseline_services.FLAG_NAMES)}."})
        chosen["flag"] = flag
    ita_class = params.get("ita_class", "").strip()
    if ita_class:
        if ita_class not in baseline_services.ITA_CLASS_NAMES:
            raise ValidationError({"ita_class": f"One of: {', '.join(baseline_services.ITA_CLASS_NAMES)}."})
        qs = qs.filter(ita_class=ita_class)
        chosen["ita_class"] = ita_class
    row_status = params.get("status", "").strip()
    if row_status:
        if row_status not in ImageBaseline.Status.values:
            raise ValidationError({"status": f"One of: {', '.join(ImageBaseline.Status.values)}."})
        qs = qs.filter(status=row_status)
        chosen["status"] = row_status
    return qs.select_related("image").order_by("image_id", "-computed_at"), chosen


def baseline_record(row: ImageBaseline) -> dict[str, Any]:
    """One result as the API sends it and the image page shows it ("apparent" albedo, as everywhere)."""
    from django.urls import reverse

    stats = row.stats or {}
    return {
        "id": row.id,
        "image_id": row.image_id,
        "external_id": row.image.external_id,
        "status": row.status,
        "error": row.error,
        "ita_median": row.ita_median,
        "ita_q25": stats.get("ita_q25"),
        "ita_q75": stats.get("ita_q75"),
        "ita_iqr": stats.get("ita_iqr"),
        "ita_of_medians": stats.get("ita_of_medians"),
        "lightness_median": row.lightness_median,
        "a_median": stats.get("a_median"),
        "b_median": row.b_median,
        "hue_angle": stats.get("hue_angle"),
        "ita_class": row.ita_class or None,
        "fitzpatrick": stats.get("fitzpatrick"),
        "fitzpatrick_mapping": (row.parameters or {}).get("fitzpatrick_mapping"),
        "skin_fraction": row.skin_fraction,
        "apparent_albedo": row.albedo,
        "apparent_albedo_normalized": row.albedo_normalized,
        "white_luminance": stats.get("white_luminance"),
        "flags": row.flags,
        "parameters": row.parameters,
        "parameters_hash": row.parameters_hash,
        "code_version": row.code_version,
        "job_id": row.job_id,
        "computed_at": row.computed_at,
        "overlay_url": reverse("baseline-overlay", args=[row.id]) if row.overlay else None,
    }


def baseline_phase_choice(project: Project, value: str | None) -> Phase | None:
    """The phase a comparison is limited to: None for all (``all`` or nothing); ``ValidationError`` otherwise."""
    from django.core.exceptions import ValidationError

    if value in (None, "", "all"):
        return None
    if not str(value).isdigit():
        raise ValidationError({"phase": "A phase id of this project, or 'all'."})
    phase = project.phases.filter(pk=int(value)).first()
    if phase is None:
        raise ValidationError({"phase": "A phase id of this project, or 'all'."})
    return phase


def baseline_comparison_cached(
    project: Project, phase: Phase | None, exclude_flagged: bool, *, with_points: bool = True
) -> dict[str, Any]:
    """Human labels against the baselines, cached until a label or a current result changes
    (stale-while-revalidate with a worker: ``services.baselines.comparison.baseline_comparison_cached``)."""
    from .services.baselines.comparison import baseline_comparison_cached as cached

    return cached(project, phase, exclude_flagged, with_points=with_points)


def baseline_audit_cached(project: Project) -> dict[str, Any]:
    """The baseline audited by labelled tone, with the latest mask sample's scores (issue 21)."""
    from .services.baselines.validation import baseline_audit_cached as cached

    return cached(project)


def mask_sample_item(project: Project, item_id: Any):
    """An item of one of ``project``'s mask samples, or 404 (``Http404``)."""
    from django.http import Http404

    from .models import MaskSampleItem

    try:
        number = int(item_id)
    except (TypeError, ValueError):
        raise Http404 from None
    item = MaskSampleItem.objects.select_related("image", "sample").filter(pk=number, sample__project=project).first()
    if item is None:
        raise Http404("No such item in this project's mask samples.")
    return item


# --------------------------------------------------------------------------
# Dataset releases (leads and reviewers)
# --------------------------------------------------------------------------


def release_get(project: Project, version) -> Release:
    """The project's release ``version`` (``Http404`` if there is none)."""
    try:
        return project.releases.select_related("job", "previous").get(version=int(version))
    except (TypeError, ValueError, Release.DoesNotExist):
        raise Http404("No such release of this project.") from None


def release_files(release: Release) -> dict[str, Any]:
    """The files of a published release as pages and the API list them: each with its size, SHA-256, rows
    and download URL; the imagefolder's images are counted (``imagefolder``), not listed one by one."""
    from django.urls import reverse

    files = []
    images = {"n": 0, "bytes": 0}
    manifest = release.manifest or {}
    for path, info in sorted(manifest.get("files", {}).items()):
        if path.startswith("imagefolder/") and path not in ("imagefolder/metadata.jsonl", "imagefolder/README.md"):
            images["n"] += 1
            images["bytes"] += info.get("bytes", 0)
            continue
        files.append(
            {
                "path": path,
                "bytes": info.get("bytes"),
                "sha256": info.get("sha256"),
                "rows": info.get("rows"),
                "url": reverse("release-files", args=[release.project_id, release.version, path]),
            }
        )
    return {"files": files, "imagefolder": images if images["n"] else None}
