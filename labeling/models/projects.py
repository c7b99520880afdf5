from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from .scales import Scale, Tone

DEFAULT_SKIP_REASONS = ["no skin visible", "image unusable", "other"]


class Project(models.Model):
    """A labeling project: one scale, its images, its team and its phases."""

    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    scale = models.ForeignKey(Scale, on_delete=models.PROTECT, related_name="projects")
    labels_per_image = models.PositiveSmallIntegerField(
        default=4, validators=[MinValueValidator(1), MaxValueValidator(50)]
    )
    allow_adjacent_pairs = models.BooleanField(
        default=True, help_text="A labeler may choose two adjacent tones when unsure between them."
    )
    offer_uncertain = models.BooleanField(default=True)
    skip_reasons = models.JSONField(default=list, blank=True)
    # Sanitised HTML (see labeling.services.projects.sanitize_instructions).
    instructions = models.TextField(blank=True)
    # The fixed order in which tones are shown, as a list of tone positions. It is
    # recorded with every label: the display order changes agreement (Barrett et al. 2023) [Barrett2023].
    tone_order = models.JSONField(default=list, blank=True)
    # Colorimetric baseline parameters (labeling.colorimetry), e.g. min_skin_fraction.
    baseline_parameters = models.JSONField(default=dict, blank=True)
    is_demo = models.BooleanField(default=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    # Archived: hidden from the default lists and read-only (no labels, imports or phase changes) until a lead
    # unarchives it (labeling.services.project_lifecycle).
    archived_at = models.DateTimeField(null=True, blank=True)
    archived_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=models.Q(labels_per_image__gte=1), name="project_labels_per_image_gte_1")
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        from django.urls import reverse

        return reverse("project-detail", args=[self.pk])

    def ordered_tones(self) -> list[Tone]:
        tones = {t.position: t for t in self.scale.tones.all()}
        order = list(dict.fromkeys(p for p in (self.tone_order or []) if p in tones))
        order += [p for p in sorted(tones) if p not in order]
        return [tones[p] for p in order]

    @property
    def is_archived(self) -> bool:
        return self.archived_at is not None


class Membership(models.Model):
    """A person's role in one project, with the pseudonym exports use."""

    class Role(models.TextChoices):
        LEAD = "lead", "Project lead"
        LABELER = "labeler", "Labeler"
        REVIEWER = "reviewer", "Fairness reviewer (ML engineer)"

    project = models.ForeignKey(Project, related_name="memberships", on_delete=models.CASCADE)
    # RESTRICT: deleting an account never deletes its memberships (and so its labels); deactivate it instead.
    user = models.ForeignKey(settings.AUTH_USER_MODEL, related_name="memberships", on_delete=models.RESTRICT)
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.LABELER)
    # Exports and dashboards name labelers by this id only.
    pseudonym = models.CharField(max_length=40)
    # Optional profile fields summarised (never per person) in the data card.
    expertise = models.CharField(max_length=200, blank=True)
    region_of_upbringing = models.CharField(max_length=200, blank=True)
    gender = models.CharField(max_length=100, blank=True)
    share_profile = models.BooleanField(
        default=False,
        help_text="The labeler agreed that their profile fields appear next to their pseudonymous id in released "
        "datasets (the labelers table). Without it, releases carry only team-level summaries.",
    )
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project_id", "pseudonym"]
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="unique_membership"),
            models.UniqueConstraint(fields=["project", "pseudonym"], name="unique_pseudonym"),
        ]

    def __str__(self) -> str:
        return f"{self.pseudonym} ({self.role}) in {self.project_id}"


class ToneExample(models.Model):
    """An example image shown with the instructions for one tone."""

    project = models.ForeignKey(Project, related_name="tone_examples", on_delete=models.CASCADE)
    tone = models.ForeignKey(Tone, on_delete=models.CASCADE, related_name="+")
    image = models.ForeignKey("labeling.Image", on_delete=models.CASCADE, related_name="+")
    caption = models.CharField(max_length=300, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "tone", "image"], name="unique_tone_example")]
