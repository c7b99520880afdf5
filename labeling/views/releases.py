"""Dataset release pages: readiness and the release form, the releases, one release with its data card.

Leads and reviewers see them (reviewers read and download); only leads make or cancel a release.
Anyone else gets 404 (the pages' access rule). The API of the same: ``api.views.releases``.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from .. import selectors
from ..errors import error_text
from ..models import Membership, Phase, Release
from ..services import releases as svc
from ..services.erasure import release_erasure_notices
from ..services.media_files import storage_reader
from .access import page_access, page_project

READERS = (Membership.Role.LEAD, Membership.Role.REVIEWER)
AGGREGATIONS = [("mean", "Mean"), ("median", "Median"), ("mode", "Mode (most frequent value)")]
TIES = [
    ("lower", "the lighter value"),
    ("higher", "the deeper value"),
    ("nearest_mean", "the value nearest the mean"),
]


def _rule_from(data, *, form: bool) -> dict:
    """The rule a page sends: ``phases`` (latest, or phase kinds), aggregation, tie, min_valid_labels,
    ``include_<category>`` (a form's checkbox: checked includes, unchecked excludes)."""
    rule: dict = {}
    kinds = [k for k in data.getlist("phase_kind") if k]
    if data.get("phases") == "chosen":
        rule["phases"] = kinds
    elif data.get("phases"):
        rule["phases"] = data["phases"]
    for name in ("aggregation", "tie", "min_valid_labels"):
        if data.get(name, "") != "":
            rule[name] = data[name]
    if form:
        rule["include"] = {c: data.get(f"include_{c}") == "1" for c in svc.CATEGORIES}
    else:
        include = {c: data[f"include_{c}"] for c in svc.CATEGORIES if data.get(f"include_{c}", "") != ""}
        if include:
            rule["include"] = include
    return rule


def _card_sections(card_text: dict, errors: dict[str, str]) -> list[dict]:
    """The form's card fields grouped by the card's sections (Datasheets' order), each with its help text,
    whether a release needs it, the text so far and its error."""
    sections: dict[str, list[dict]] = {}
    for name, field in svc.CARD_FIELDS.items():
        sections.setdefault(field["section"], []).append(
            {
                "name": name,
                "title": field["title"],
                "help": field["help"],
                "required": field["required"],
                "standard": field["standard"],
                "value": card_text.get(name, "") if isinstance(card_text.get(name, ""), str) else "",
                "error": errors.get(name, ""),
            }
        )
    return [
        {"key": key, "title": title, "fields": sections[key]}
        for key, title in svc.CARD_SECTIONS.items()
        if key in sections
    ]


def _card_errors(exc: ValidationError) -> dict[str, str]:
    """The service's per-field errors of the card's texts (``card_text.<key>``), by field name."""
    if not hasattr(exc, "error_dict"):
        return {}
    prefix = "card_text."
    return {
        key[len(prefix) :]: " ".join(messages) for key, messages in exc.message_dict.items() if key.startswith(prefix)
    }


def _card_prefill(project) -> dict:
    latest = project.releases.exclude(card_text={}).order_by("-version").first()
    return dict(latest.card_text) if latest else {}


def _list_context(
    request, project, membership, *, rule: dict, card_text: dict, with_images: bool, card_errors: dict | None = None
) -> dict:
    try:
        readiness = svc.release_readiness_cached(project, rule)
    except ValidationError as exc:
        messages.error(request, error_text(exc))
        readiness = svc.release_readiness_cached(project, {})
    chosen = readiness["rule"]
    releases = list(project.releases.select_related("job").order_by("-version"))
    return {
        "project": project,
        "is_lead": membership is None or membership.role == Membership.Role.LEAD,
        "readiness": readiness,
        "rule": chosen,
        "phase_kinds": [
            (k, Phase.Kind(k).label, chosen["phases"] != "latest" and k in chosen["phases"]) for k in Phase.ORDER
        ],
        "aggregations": AGGREGATIONS,
        "ties": TIES,
        "card_sections": _card_sections(card_text, card_errors or {}),
        "n_card_errors": len(card_errors or {}),
        "with_images": with_images,
        "releases": releases,
        "active": [r for r in releases if r.status in Release.ACTIVE],
    }


@login_required
@require_http_methods(["GET", "POST"])
def releases_page(request, pk: int):
    """Readiness per category for the chosen rule, the release form (leads), and the project's releases."""
    project, membership = page_project(request, pk, *READERS)
    if request.method == "POST":
        page_access(request, project, Membership.Role.LEAD)
        rule = _rule_from(request.POST, form=True)
        card_text = {name: request.POST.get(name, "") for name in svc.CARD_FIELDS}
        with_images = request.POST.get("with_images") == "1"
        try:
            release = svc.release_request(
                project=project, user=request.user, rule=rule, card_text=card_text, with_images=with_images
            )
        except ValidationError as exc:
            card_errors = _card_errors(exc)
            others = [
                " ".join(m)
                for key, m in (exc.message_dict.items() if hasattr(exc, "error_dict") else [])
                if not key.startswith("card_text.")
            ]
            if not hasattr(exc, "error_dict"):
                others = [error_text(exc)]
            text = " ".join(others)
            if card_errors:
                text += (
                    f"{' ' if text else ''}The data card needs {len(card_errors)} more field(s): "
                    + ", ".join(svc.CARD_FIELDS[k]["title"] if k in svc.CARD_FIELDS else k for k in card_errors)
                    + " (marked below)."
                )
            messages.error(request, f"No release was made: {text}")
            context = _list_context(
                request,
                project,
                membership,
                rule=rule,
                card_text=card_text,
                with_images=with_images,
                card_errors=card_errors,
            )
            return render(request, "labeling/releases.html", context, status=400)
        release.refresh_from_db()
        done = release.status == Release.Status.PUBLISHED
        messages.success(request, f"Release v{release.version} {'is published' if done else 'is being built'}.")
        return redirect("release-page", pk=project.pk, version=release.version)
    rule = _rule_from(request.GET, form=False)
    context = _list_context(
        request, project, membership, rule=rule, card_text=_card_prefill(project), with_images=False
    )
    return render(request, "labeling/releases.html", context)


def _card_html(release: Release) -> str | None:
    name = svc.release_file_name(release, "data_card.html")
    if name is None:
        return None
    with storage_reader(name) as handle:
        return handle.read().decode("utf-8", errors="replace")


@login_required
@require_http_methods(["GET"])
def release_page(request, pk: int, version: int):
    """One release: status and progress, summary, files with sizes and checksums, the data card, the diff."""
    project, membership = page_project(request, pk, *READERS)
    release = selectors.release_get(project, version)
    diff = None
    if release.previous_id and release.status == Release.Status.PUBLISHED:
        diff = svc.release_diff(release.previous, release)
    listing = selectors.release_files(release)
    return render(
        request,
        "labeling/release_detail.html",
        {
            "project": project,
            "release": release,
            "is_lead": membership is None or membership.role == Membership.Role.LEAD,
            "is_active": release.status in Release.ACTIVE,
            "files": listing["files"],
            "imagefolder": listing["imagefolder"],
            "card_html": _card_html(release),
            "erasures": release_erasure_notices(release),
            "diff": diff,
            "categories": svc.CATEGORIES,
        },
    )


@login_required
@require_POST
def release_cancel_page(request, pk: int, version: int):
    project, _ = page_project(request, pk, Membership.Role.LEAD)
    release = selectors.release_get(project, version)
    try:
        svc.release_cancel(release, user=request.user)
    except ValidationError as exc:
        messages.error(request, error_text(exc))
    else:
        messages.success(request, f"Release v{release.version} was cancelled.")
    return redirect("release-page", pk=project.pk, version=release.version)
