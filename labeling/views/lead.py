"""Pages for project leads (and the home page for everyone)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render

from .. import selectors
from ..errors import error_text, form_add_error
from ..forms import (
    PROJECT_FIELDS,
    CalibrationForm,
    ImageAttributesForm,
    MemberForm,
    ProjectForm,
    attribute_lines_text,
)
from ..models import Image, Membership, Phase, Project
from ..services import phases as phase_services
from ..services import projects as project_services
from ..services.scales import scale_create_custom
from .access import page_project

#: Review items shown at once (decided ones move to the end: deciding these shows the next).
REVIEW_PAGE_SIZE = 100


@login_required
def home(request):
    memberships = (
        Membership.objects.filter(user=request.user, is_active=True)
        .select_related("project", "project__scale")
        .order_by("-project__created_at")
    )
    led = [m.project for m in memberships if m.role in (Membership.Role.LEAD, Membership.Role.REVIEWER)]
    if request.user.is_superuser:
        led = list(Project.objects.select_related("scale"))
    # Archived projects are listed apart (folded); a labeler's phases of an archived project are not listed.
    archived = [p for p in led if p.is_archived]
    led = [p for p in led if not p.is_archived]
    my_phases = []
    for phase in (
        selectors.labeler_phases(request.user).filter(project__archived_at__isnull=True).order_by("project_id", "id")
    ):
        m = next((x for x in memberships if x.project_id == phase.project_id), None)
        if m is None:
            continue
        counts = selectors.labeler_progress(phase=phase, labeler=m)
        reflected = phase.reflections.filter(labeler=m).exists()
        my_phases.append({"phase": phase, "membership": m, **counts, "reflected": reflected})
    return render(
        request,
        "labeling/home.html",
        {
            "projects": led,
            "archived": archived,
            "my_phases": my_phases,
            "can_create": selectors.can_create_projects(request.user),
        },
    )


@login_required
def project_create_view(request):
    if not selectors.can_create_projects(request.user):
        raise Http404
    form = ProjectForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            scale = d["scale"] or scale_create_custom(
                name=f"{d['name']} scale", tones=d["tones"], created_by=request.user
            )
            project = project_services.project_create(
                **{k: d[k] for k in PROJECT_FIELDS}, scale=scale, created_by=request.user
            )
        except ValidationError as exc:
            form_add_error(form, exc)
        else:
            messages.success(request, "Project created. Next: import images and add labelers.")
            return redirect(project)
    return render(request, "labeling/project_form.html", {"form": form})


@login_required
def project_detail(request, pk: int):
    project, m = page_project(request, pk, Membership.Role.LEAD, Membership.Role.REVIEWER)
    phases = list(project.phases.order_by("id"))
    progress = {p.id: phase_services.phase_progress(p) for p in phases}
    context = {
        "project": project,
        "membership": m,
        "is_lead": selectors.is_lead(request.user, project),
        "phases": [(p, progress[p.id]) for p in phases],
        "n_images": project.images.count(),
        "n_subjects": project.subjects.count(),
        "labelers": project.memberships.filter(role=Membership.Role.LABELER).select_related("user"),
        "imports": project.imports.all()[:5],
        "tones": project.ordered_tones(),
    }
    return render(request, "labeling/project_detail.html", context)


@login_required
def project_settings(request, pk: int):
    project, _ = page_project(request, pk, Membership.Role.LEAD)
    initial = {k: getattr(project, k) for k in PROJECT_FIELDS}
    initial.update(scale=project.scale, skip_reasons="\n".join(project.skip_reasons))
    form = ProjectForm(request.POST or None, initial=initial, user=request.user)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            project_services.project_update(
                project=project, **{k: d[k] for k in PROJECT_FIELDS}, scale=d["scale"] or project.scale
            )
        except ValidationError as exc:
            form_add_error(form, exc)
        else:
            messages.success(request, "Settings saved.")
            return redirect(project)
    return render(request, "labeling/project_form.html", {"form": form, "project": project})


@login_required
def project_images(request, pk: int):
    project, _ = page_project(request, pk, Membership.Role.LEAD, Membership.Role.REVIEWER)
    qs = project.images.select_related("subject").order_by("id")
    filters = {}
    key = request.GET.get("key", "").strip()
    value = request.GET.get("value", "").strip()
    if key and value and key.replace("_", "").isalnum():
        filters[key] = value
    qs = selectors.image_filter_by_attributes(qs, filters)
    attribute_keys = sorted(
        {k for attrs in project.subjects.values_list("attributes", flat=True)[:2000] for k in (attrs or {})}
        | {k for attrs in project.images.values_list("attributes", flat=True)[:2000] for k in (attrs or {})}
    )
    page = Paginator(qs, 60).get_page(request.GET.get("page"))
    return render(
        request,
        "labeling/project_images.html",
        {"project": project, "page": page, "attribute_keys": attribute_keys, "key": key, "value": value},
    )


@login_required
def image_detail(request, pk: int):
    image = get_object_or_404(Image.objects.select_related("project", "subject"), pk=pk)
    project, _ = page_project(request, image.project_id, Membership.Role.LEAD, Membership.Role.REVIEWER)
    is_lead = selectors.is_lead(request.user, project)
    form = None
    if is_lead:
        form = ImageAttributesForm(
            initial={
                "subject_id": image.subject.external_id if image.subject else "",
                "subject_attributes": attribute_lines_text(image.subject.attributes if image.subject else {}),
                "attributes": attribute_lines_text(image.attributes),
            }
        )
    if request.method == "POST" and request.POST.get("action") == "attributes":
        page_project(request, image.project_id, Membership.Role.LEAD)
        form = ImageAttributesForm(request.POST)
        if form.is_valid() and _image_attributes_save(request, image, form):
            return redirect("image-detail", pk=image.pk)
    labels = image.labels.select_related("labeler", "phase").order_by("phase_id", "labeler__pseudonym")
    # The other items of the same photo: the other people's boxes (or the whole photo).
    same_photo = list(
        Image.objects.filter(project_id=image.project_id, sha256=image.sha256)
        .exclude(pk=image.pk)
        .select_related("subject")
        .order_by("external_id")
    )
    return render(
        request,
        "labeling/image_detail.html",
        {
            "project": project,
            "image": image,
            "labels": labels,
            "is_lead": is_lead,
            "form": form,
            "same_photo": same_photo,
            "box_percent": image.box_percent,
        },
    )


def _image_attributes_save(request, image: Image, form: ImageAttributesForm) -> bool:
    """The form's attributes as the image's and its subject's: what is shown is what is kept (a line deleted
    removes that attribute). False, with the error on the form, when the service refuses."""
    from ..models import Subject
    from ..services.image_attributes import image_attributes_update

    d = form.cleaned_data
    subject_id = d["subject_id"].strip()
    target = Subject.objects.filter(project_id=image.project_id, external_id=subject_id).first() if subject_id else None
    subject_before = (target.attributes or {}) if target is not None else {}
    subject_patch = {**dict.fromkeys(subject_before), **d["subject_attributes"]}
    image_patch = {**dict.fromkeys(image.attributes or {}), **d["attributes"]}
    try:
        changed = image_attributes_update(
            image=image,
            user=request.user,
            subject_id=subject_id,
            attributes=image_patch,
            subject_attributes=subject_patch if subject_id else (d["subject_attributes"] or None),
        )
    except ValidationError as exc:
        form_add_error(form, exc)
        return False
    if changed:
        messages.success(request, f"Saved: {', '.join(changed)}.")
    else:
        messages.info(request, "Nothing to change.")
    return True


@login_required
def project_import(request, pk: int):
    project, _ = page_project(request, pk, Membership.Role.LEAD)
    return render(
        request,
        "labeling/project_import.html",
        {
            "project": project,
            "imports": project.imports.all()[:20],
            "can_use_folder": selectors.can_import_from_server(request.user),
        },
    )


@login_required
def import_report(request, pk: int, batch_id: int):
    project, _ = page_project(request, pk, Membership.Role.LEAD)
    batch = get_object_or_404(project.imports, pk=batch_id)
    items = batch.items.all()
    outcome = request.GET.get("outcome")
    if outcome:
        items = items.filter(outcome=outcome)
    page = Paginator(items, 200).get_page(request.GET.get("page"))
    return render(request, "labeling/import_report.html", {"project": project, "batch": batch, "page": page})


@login_required
def project_members(request, pk: int):
    project, _ = page_project(request, pk, Membership.Role.LEAD)
    if request.method == "POST" and request.POST.get("action") in ("email", "reset"):
        return _member_account_action(request, project)
    if request.method == "POST" and request.POST.get("action") in ("role", "deactivate", "reactivate"):
        return _member_team_action(request, project)
    form = MemberForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            project_services.member_add_or_create(project=project, added_by=request.user, **d)
        except ValidationError as exc:
            form_add_error(form, exc)
        else:
            messages.success(request, f"{d['username']} added.")
            return redirect("project-members", pk=project.pk)
    members = project.memberships.select_related("user").order_by("role", "pseudonym")
    from ..models import AccountOrigin

    # Sign-ins this lead created (staff: all): the lead may give them an address or mail them a reset link.
    origins = AccountOrigin.objects.filter(user__memberships__project=project)
    if not request.user.is_staff:
        origins = origins.filter(created_by=request.user)
    managed = set(origins.values_list("user_id", flat=True))
    return render(
        request,
        "labeling/project_members.html",
        {"project": project, "form": form, "members": members, "managed": managed, "roles": Membership.Role.choices},
    )


def _member_team_action(request, project):
    """A lead changes a member's role, or deactivates / reactivates them (``services.projects.member_update``)."""
    membership = project.memberships.select_related("user").filter(pk=_int_or_zero(request.POST.get("member"))).first()
    if membership is None:
        messages.error(request, "No such member in this project.")
        return redirect("project-members", pk=project.pk)
    action = request.POST["action"]
    name = membership.user.username
    try:
        if action == "role":
            m = project_services.member_update(membership=membership, role=request.POST.get("role", ""))
            messages.success(request, f"{name} is now {m.get_role_display().lower()}.")
        else:
            project_services.member_update(membership=membership, is_active=action == "reactivate")
            if action == "reactivate":
                messages.success(request, f"{name} is active again.")
            else:
                messages.success(
                    request,
                    f"{name} is deactivated: their labels stay; they no longer reach this project, get no new "
                    "work and no relabel requests.",
                )
    except ValidationError as exc:
        messages.error(request, error_text(exc))
    return redirect("project-members", pk=project.pk)


def _int_or_zero(raw) -> int:
    raw = (raw or "").strip()
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 18 else 0


def _member_account_action(request, project):
    """A lead gives a member's sign-in an address (if it has none and the lead created it), or mails it a
    password reset link (``services.accounts``)."""
    from ..services import accounts

    membership = project.memberships.select_related("user").filter(pk=request.POST.get("member") or 0).first()
    if membership is None:
        messages.error(request, "No such member in this project.")
        return redirect("project-members", pk=project.pk)
    try:
        if request.POST["action"] == "email":
            address = accounts.member_email_set(membership=membership, email=request.POST.get("email"), by=request.user)
            messages.success(
                request, f"{membership.user.username} can now reset a forgotten password through {address}."
            )
        else:
            address = accounts.member_reset_link_send(
                membership=membership, by=request.user, domain=request.get_host(), use_https=request.is_secure()
            )
            messages.success(request, f"A password reset link was mailed to {membership.user.username} ({address}).")
    except ValidationError as exc:
        messages.error(request, error_text(exc))
    return redirect("project-members", pk=project.pk)


@login_required
def project_calibration(request, pk: int):
    """Choose the calibration set; a revisit shows the current set and starts from its numbers."""
    project, _ = page_project(request, pk, Membership.Role.LEAD)
    n_images = project.images.count()
    current = phase_services.calibration_current(project)
    if current:
        initial = {
            "method": "manual" if current["method"] == "manual" else "random",
            "size": current["size"],
            "calibration_1_size": len(current["calibration_1"]),
            "n_repeated": len(current["repeated"]),
            "every_labeler": current["every_labeler"],
            "seed": current["seed"],
            "external_ids": ", ".join(i.external_id for i in current["calibration_1"] + current["rest"]),
        }
    else:
        initial = {"method": "random", **phase_services.calibration_defaults(n_images)}
    form = CalibrationForm(request.POST or None, initial=initial, n_images=n_images)
    if request.method == "POST" and current and current["locked"]:
        messages.error(request, "Calibration has started: the calibration set can no longer change.")
    elif request.method == "POST" and form.is_valid():
        try:
            phase_services.calibration_configure(project=project, **form.service_arguments())
        except ValidationError as exc:
            form_add_error(form, exc)
        else:
            messages.success(request, "Calibration set chosen and recorded.")
            return redirect("project-calibration", pk=project.pk)
    return render(
        request,
        "labeling/project_calibration.html",
        {
            "project": project,
            "form": form,
            "current": current,
            "n_images": n_images,
            "defaults": phase_services.calibration_defaults(n_images),
            "min_images": phase_services.MIN_STATISTICS_IMAGES,
        },
    )


@login_required
def phase_detail(request, pk: int):
    phase = get_object_or_404(Phase.objects.select_related("project"), pk=pk)
    project, _ = page_project(request, phase.project_id, Membership.Role.LEAD)
    if request.method == "POST":
        action = request.POST.get("action")
        try:
            if action == "open":
                ids = [int(i) for i in request.POST.getlist("labeler_ids")] or None
                lpi = request.POST.get("labels_per_image")
                phase_services.phase_open(phase=phase, labeler_ids=ids, labels_per_image=int(lpi) if lpi else None)
                messages.success(request, f"{phase.get_kind_display()} is open.")
            elif action == "close":
                if request.POST.get("confirm") != "yes":
                    messages.error(request, "Closing needs a confirmation: use the Close button's confirmation.")
                else:
                    phase_services.phase_close(phase=phase)
                    messages.success(request, f"{phase.get_kind_display()} is closed.")
            elif action == "reopen":
                phase_services.phase_reopen(phase=phase, user=request.user, reason=request.POST.get("reason", ""))
                messages.success(request, f"{phase.get_kind_display()} is open again; the reason is recorded.")
            elif action == "labels_per_image":
                added = phase_services.phase_set_labels_per_image(
                    phase=phase, labels_per_image=int(request.POST.get("labels_per_image", "0"))
                )
                messages.success(request, f"Labels per image updated ({added} assignments added).")
            else:
                messages.error(request, "Unknown action.")
        except (ValidationError, ValueError) as exc:
            messages.error(request, error_text(exc) if isinstance(exc, ValidationError) else "Give a whole number.")
        return redirect("phase-detail", pk=phase.pk)
    if request.headers.get("Accept") == "application/json":
        return JsonResponse(phase_services.phase_progress(phase))
    reflections = phase.reflections.select_related("labeler").order_by("labeler__pseudonym")
    from .. import plots
    from ..services.labels import BIAS_FACTORS
    from ..services.progress import phase_labels_per_day

    progress_over_time = phase_labels_per_day(phase)

    return render(
        request,
        "labeling/phase_detail.html",
        {
            "project": project,
            "phase": phase,
            "progress": phase_services.phase_progress(phase),
            "close_summary": phase_services.phase_close_summary(phase) if phase.status == Phase.Status.OPEN else None,
            "order_refusal": phase_services.phase_order_refusal(phase) if phase.status == Phase.Status.DRAFT else None,
            "reopen_refusal": phase_services.phase_reopen_refusal(phase)
            if phase.status == Phase.Status.CLOSED
            else None,
            "next_phase": phase_services.phase_next(phase),
            "reopenings": phase.reopenings.select_related("reopened_by"),
            "labelers": project.memberships.filter(role=Membership.Role.LABELER, is_active=True),
            "reflections": reflections,
            "bias_factors": BIAS_FACTORS,
            "progress_over_time": progress_over_time,
            "chart": plots.progress_chart(progress_over_time),
        },
    )


@login_required
def phase_review(request, pk: int):
    from ..services.review_decisions import review_report

    phase = get_object_or_404(Phase.objects.select_related("project"), pk=pk)
    project, _ = page_project(request, phase.project_id, Membership.Role.LEAD)
    report = review_report(phase, limit=REVIEW_PAGE_SIZE)
    labelers = project.memberships.filter(role=Membership.Role.LABELER, is_active=True)
    tones = project.ordered_tones()
    # A correction is a single tone or, where the project allows pairs, two adjacent tones ("3+4").
    tone_options = [{"value": str(t.position), "text": f"{t.position} · {t.name}"} for t in tones]
    if project.allow_adjacent_pairs:
        positions = sorted(t.position for t in tones)
        tone_options += [
            {"value": f"{a}+{b}", "text": f"{a}+{b} (between {a} and {b})"}
            for a, b in zip(positions, positions[1:], strict=False)
        ]
    return render(
        request,
        "labeling/phase_review.html",
        {
            "project": project,
            "phase": phase,
            "report": report,
            "labelers": labelers,
            "tones": tones,
            "tone_options": tone_options,
            "skip_reasons": project.skip_reasons,
        },
    )


@login_required
def project_examples(request, pk: int):
    """Example images per tone, shown to labelers with the instructions."""
    project, _ = page_project(request, pk, Membership.Role.LEAD)
    tones = project.ordered_tones()
    errors = {}
    if request.method == "POST":
        for tone in tones:
            raw = request.POST.get(f"tone_{tone.position}", "")
            try:
                project_services.tone_examples_set(
                    project=project, tone_position=tone.position, external_ids=raw.replace(";", ",").split(",")
                )
            except ValidationError as exc:
                errors[tone.position] = error_text(exc)
        if not errors:
            messages.success(request, "Examples saved.")
            return redirect("project-examples", pk=project.pk)
    examples = {}
    for ex in project.tone_examples.select_related("image", "tone"):
        examples.setdefault(ex.tone.position, []).append(ex.image)
    rows = [
        {
            "tone": t,
            "images": examples.get(t.position, []),
            "value": request.POST.get(f"tone_{t.position}")
            if request.method == "POST"
            else ", ".join(i.external_id for i in examples.get(t.position, [])),
            "error": errors.get(t.position),
        }
        for t in tones
    ]
    return render(request, "labeling/project_examples.html", {"project": project, "rows": rows})
