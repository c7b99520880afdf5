"""Projects, memberships and labelers."""

import re
import unicodedata

import nh3
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from ..models import Membership, Phase, Project, Scale
from ..models.accounts import username_fold
from .audit import audit
from .scales import scales_ensure_builtin

DEFAULT_SKIP_REASONS = ["no skin visible", "image unusable", "other"]

# Tags a lead may use in the labeling instructions (rich text); everything else is stripped.
ALLOWED_TAGS = {
    "p",
    "br",
    "strong",
    "em",
    "b",
    "i",
    "u",
    "ul",
    "ol",
    "li",
    "h2",
    "h3",
    "h4",
    "blockquote",
    "code",
    "pre",
    "a",
    "hr",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
}


def sanitize_instructions(html: str) -> str:
    """Clean user-supplied instruction HTML: no scripts, styles, event handlers or remote images."""
    return nh3.clean(
        html or "",
        tags=ALLOWED_TAGS,
        attributes={"a": {"href", "title"}},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )


def default_scale() -> Scale:
    scales_ensure_builtin()
    return Scale.objects.get(kind=Scale.Kind.MONK, is_builtin=True)


def _clean_skip_reasons(reasons) -> list[str]:
    if reasons is None:
        return list(DEFAULT_SKIP_REASONS)
    if not isinstance(reasons, list | tuple):
        raise ValidationError({"skip_reasons": "Give a list of reasons."})
    cleaned = []
    for reason in reasons:
        text = str(reason).strip()
        if not text or len(text) > 200:
            raise ValidationError({"skip_reasons": "Each reason needs 1 to 200 characters."})
        if text not in cleaned:
            cleaned.append(text)
    return cleaned


@transaction.atomic
def project_create(
    *,
    name: str,
    created_by,
    scale: Scale | None = None,
    description: str = "",
    labels_per_image: int = 4,
    allow_adjacent_pairs: bool = True,
    offer_uncertain: bool = True,
    skip_reasons: list[str] | None = None,
    instructions: str = "",
    tone_order: list[int] | None = None,
    is_demo: bool = False,
) -> Project:
    """Create a project, make its creator the lead, and lay out its four phases."""
    scale = scale or default_scale()
    positions = list(scale.tones.values_list("position", flat=True).order_by("position"))
    if tone_order:
        if sorted(tone_order) != positions:
            raise ValidationError({"tone_order": "The order must list every tone of the scale once."})
    else:
        tone_order = positions
    project = Project(
        name=name.strip(),
        description=description,
        scale=scale,
        labels_per_image=labels_per_image,
        allow_adjacent_pairs=allow_adjacent_pairs,
        offer_uncertain=offer_uncertain,
        skip_reasons=_clean_skip_reasons(skip_reasons),
        instructions=sanitize_instructions(instructions),
        tone_order=tone_order,
        is_demo=is_demo,
        created_by=created_by,
    )
    project.full_clean()
    project.save()
    for kind in Phase.ORDER:
        Phase.objects.create(project=project, kind=kind, labels_per_image=labels_per_image)
    if created_by is not None:
        Membership.objects.create(project=project, user=created_by, role=Membership.Role.LEAD, pseudonym="LEAD")
    audit(project, "project.create", project, user=created_by, scale=scale.name)
    return project


def project_update(*, project: Project, **fields) -> Project:
    from .project_lifecycle import project_refuse_if_archived

    project_refuse_if_archived(project.pk)
    if "instructions" in fields:
        fields["instructions"] = sanitize_instructions(fields["instructions"])
    if "skip_reasons" in fields:
        fields["skip_reasons"] = _clean_skip_reasons(fields["skip_reasons"])
    from ..models import Label

    if "scale" in fields and fields["scale"] != project.scale:
        if Label.objects.filter(phase__project=project).exists():
            raise ValidationError({"scale": "The scale cannot change once labels exist."})
        if "tone_order" not in fields:
            fields["tone_order"] = []  # the new scale's natural order
    scale = fields.get("scale", project.scale)
    positions = sorted(scale.tones.values_list("position", flat=True))
    if fields.get("tone_order"):
        if sorted(fields["tone_order"]) != positions:
            raise ValidationError({"tone_order": "The order must list every tone of the scale once."})
    elif "tone_order" in fields:
        fields["tone_order"] = positions
    for key, value in fields.items():
        setattr(project, key, value)
    project.full_clean()
    project.save()
    audit(project, "project.update", project, fields=sorted(fields))
    return project


def next_pseudonym(project: Project, prefix: str = "L") -> str:
    taken = set(project.memberships.values_list("pseudonym", flat=True))
    numbers = [int(m.group(1)) for p in taken if (m := re.fullmatch(rf"{prefix}(\d+)", p))]
    n = max(numbers, default=0) + 1
    while f"{prefix}{n:02d}" in taken:
        n += 1
    return f"{prefix}{n:02d}"


PROFILE_FIELDS = ("expertise", "region_of_upbringing", "gender", "share_profile")


def membership_add(
    *, project: Project, user, role: str = Membership.Role.LABELER, pseudonym: str = "", **profile
) -> Membership:
    """Give ``user`` a role in ``project`` with a pseudonymous id (generated when not given)."""
    from .project_lifecycle import project_refuse_if_archived

    project_refuse_if_archived(project.pk, "add people to it")
    if role not in Membership.Role.values:
        raise ValidationError({"role": f"Unknown role {role!r}."})
    unknown = set(profile) - set(PROFILE_FIELDS)
    if unknown:
        raise ValidationError({"profile": f"Unknown fields: {', '.join(sorted(unknown))}."})
    pseudonym = (pseudonym or "").strip() or next_pseudonym(project, "R" if role == "reviewer" else "L")
    membership = Membership(project=project, user=user, role=role, pseudonym=pseudonym, **profile)
    membership.full_clean(validate_unique=False, validate_constraints=False)
    try:
        with transaction.atomic():
            membership.save()
    except IntegrityError as exc:
        if project.memberships.filter(user=user).exists():
            raise ValidationError({"username": f"{user.get_username()} is already a member of this project."}) from exc
        raise ValidationError({"pseudonym": f"The id {pseudonym!r} is taken in this project."}) from exc
    return membership


def username_collision(username: str) -> str | None:
    """An existing username that is not ``username`` but reads the same (same ``username_fold``: it differs
    only in case or character width, e.g. ``LABA1`` beside ``labA1``), or None."""
    name = unicodedata.normalize("NFKC", username).strip()
    fold = username_fold(name)
    for existing in get_user_model().objects.filter(username__iexact=name).values_list("username", flat=True):
        if existing != name and username_fold(existing) == fold:
            return existing
    return None


@transaction.atomic
def labeler_create(
    *,
    project: Project,
    username: str,
    password: str,
    role: str = Membership.Role.LABELER,
    created_by=None,
    email: str = "",
    **kwargs,
) -> Membership:
    """Create a sign-in for a new person and add them to the project; ``created_by`` is recorded
    (``AccountOrigin``): that lead may add the account to their other projects. ``email`` (optional) is how
    the person resets a forgotten password; they can change it on their account page."""
    from ..models import AccountOrigin
    from .accounts import email_clean

    User = get_user_model()
    username = username.strip()
    if not re.fullmatch(r"[\w.@+-]{1,150}", username):
        raise ValidationError({"username": "Use 1-150 letters, digits and @ . + - _ only."})
    username = unicodedata.normalize("NFKC", username)  # as Django stores and authenticates it
    if User.objects.filter(username=username).exists():
        raise ValidationError({"username": f"The username {username!r} is taken."})
    close = username_collision(username)
    if close is not None:
        raise ValidationError(
            {
                "username": f"The username {username!r} differs from the existing {close!r} only in case or "
                "character width: people would confuse them. Choose another, or add the existing account."
            }
        )
    if len(password or "") < 8:
        raise ValidationError({"password": "Use at least 8 characters."})
    email = email_clean(email)
    user = User.objects.create_user(username=username, password=password, email=email)
    if created_by is not None and getattr(created_by, "is_authenticated", False):
        AccountOrigin.objects.create(user=user, created_by=created_by)
    return membership_add(project=project, user=user, role=role, **kwargs)


def account_may_be_added(*, user, added_by) -> bool:
    """Whether ``added_by`` may put the existing account ``user`` into a project without asking its owner:
    staff may; a lead may add a sign-in they created (``AccountOrigin``), or themselves. Anyone else's
    account is not theirs to enrol (issue 13: no enrolment without consent)."""
    if added_by is None or not getattr(added_by, "is_authenticated", False):
        return False
    if added_by.is_staff or added_by.is_superuser or user.pk == added_by.pk:
        return True
    from ..models import AccountOrigin

    return AccountOrigin.objects.filter(user=user, created_by=added_by).exists()


def member_add_or_create(
    *,
    project: Project,
    username: str,
    role: str,
    added_by,
    password: str = "",
    pseudonym: str = "",
    email: str = "",
    **profile,
) -> Membership:
    """Add the person with this username to ``project``; a new person gets a sign-in first (needs ``password``;
    ``email``, optional, lets them reset a forgotten password themselves).

    The members page and ``POST /api/projects/{id}/members/`` both come here. An existing account is
    added only if ``added_by`` may (:func:`account_may_be_added`). The answer for an account that may not
    be added is the same as for a username nobody has, so it never tells whether a username exists. An existing
    account keeps its own email address (its owner sets it): one given for it is refused if it differs.
    """
    from .accounts import email_clean
    from .project_lifecycle import project_refuse_if_archived

    project_refuse_if_archived(project.pk, "add people to it")
    username = (username or "").strip()
    email = email_clean(email)
    user = get_user_model().objects.filter(username=username).first()
    if user is not None and project.memberships.filter(user=user).exists():
        # Already on the members list the lead sees: nothing to hide.
        raise ValidationError({"username": f"{user.get_username()} is already a member of this project."})
    if user is not None and account_may_be_added(user=user, added_by=added_by):
        if email and email.lower() != (user.email or "").lower():
            raise ValidationError(
                {
                    "email": f"{user.get_username()} already has a sign-in: its email address is theirs to set on "
                    "their account page. Leave the email empty to add them."
                }
            )
        if password:
            # The lead may add this account (they created it, or it is theirs): nothing to hide, but its password
            # is its owner's. Saying "added" while dropping the typed password would leave the lead believing it set.
            raise ValidationError(
                {
                    "password": f"{user.get_username()} already has a sign-in: its password is not changed here. "
                    "Leave the password empty to add them; they sign in with their own password (a password reset "
                    "link can be mailed from the team page)."
                }
            )
        return membership_add(project=project, user=user, role=role, pseudonym=pseudonym, **profile)
    if user is not None and len(password or "") >= 8:
        raise ValidationError({"username": f"The username “{username}” cannot be used: choose another."})
    if user is not None or len(password or "") < 8:
        # The same words whether or not someone else's account has this username.
        raise ValidationError(
            {
                "username": f"No account is called “{username}” among the sign-ins you created. To create a "
                "sign-in for a new person, also give a password of at least 8 characters."
            }
        )
    return labeler_create(
        project=project,
        username=username,
        password=password,
        role=role,
        pseudonym=pseudonym,
        created_by=added_by,
        email=email,
        **profile,
    )


@transaction.atomic
def member_update(*, membership: Membership, role: str | None = None, is_active: bool | None = None) -> Membership:
    """Change a member's role and/or deactivate or reactivate them (the team page and
    ``PATCH /api/projects/{id}/members/{member}/``; leads only, checked by the caller).

    A deactivated member keeps their labels and pseudonym but no longer reaches the project (``membership_for``
    reads active memberships only), is left out of new phases and cannot be sent relabel requests. The project's
    last active lead can be neither demoted nor deactivated. Each change is audited where memberships are saved
    (``membership.role``, ``membership.deactivate``, ``membership.reactivate``: ``services.audit``).
    """
    from .project_lifecycle import project_refuse_if_archived

    project_refuse_if_archived(membership.project_id, "change its team")
    # Locked in id order, all the project's memberships: two leads demoting each other at once cannot both pass.
    locked = {m.pk: m for m in Membership.objects.select_for_update().filter(project_id=membership.project_id)}
    current = locked.get(membership.pk)
    if current is None:
        raise ValidationError({"member": "No such member in this project."})
    if role is not None and role not in Membership.Role.values:
        raise ValidationError({"role": f"One of: {', '.join(Membership.Role.values)}."})
    new_role = current.role if role is None else role
    new_active = current.is_active if is_active is None else bool(is_active)
    if (
        current.role == Membership.Role.LEAD
        and current.is_active
        and (new_role != Membership.Role.LEAD or not new_active)
    ):
        others = [m for m in locked.values() if m.pk != current.pk and m.role == Membership.Role.LEAD and m.is_active]
        if not others:
            field = "role" if new_role != Membership.Role.LEAD else "is_active"
            raise ValidationError(
                {
                    field: f"{current.user.get_username()} is the project's last active lead: make someone else a "
                    "lead first."
                }
            )
    changed = [f for f, v in (("role", new_role), ("is_active", new_active)) if getattr(current, f) != v]
    if changed:
        current.role, current.is_active = new_role, new_active
        current.save(update_fields=changed)
    return current


@transaction.atomic
def tone_examples_set(*, project: Project, tone_position: int, external_ids: list[str]) -> list:
    """Set the example images shown with the instructions for one tone (by image id in the project)."""
    from ..models import ToneExample
    from .project_lifecycle import project_refuse_if_archived

    project_refuse_if_archived(project.pk, "change its examples")
    tone = project.scale.tones.filter(position=tone_position).first()
    if tone is None:
        raise ValidationError({"tone": f"Tone {tone_position} is not on this project's scale."})
    ids = [e.strip() for e in external_ids if e and e.strip()]
    if len(ids) > 12:
        raise ValidationError({"images": "At most 12 examples per tone."})
    images = {i.external_id: i for i in project.images.filter(external_id__in=ids)}
    missing = [e for e in ids if e not in images]
    if missing:
        raise ValidationError({"images": f"Not in this project: {', '.join(missing[:5])}."})
    ToneExample.objects.filter(project=project, tone=tone).delete()
    audit(project, "examples.set", ("tone", tone.pk), tone=tone_position, images=ids)
    return ToneExample.objects.bulk_create(ToneExample(project=project, tone=tone, image=images[e]) for e in ids)
