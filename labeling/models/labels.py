from django.conf import settings
from django.db import models
from django.db.models import F, Q

from .images import Image
from .phases import Assignment, Phase
from .projects import Membership


class Label(models.Model):
    """One labeler's answer for one image in one phase.

    The answer itself lives in append-only ``LabelRevision`` rows; the fields here
    mirror the revision that counts so that consensus aggregates are one query: the latest,
    except that a labeler's own change never replaces a lead's correction
    (``labeling.services.labels.revision_counts``). The labeler sees only their own answers.
    """

    phase = models.ForeignKey(Phase, related_name="labels", on_delete=models.CASCADE)
    image = models.ForeignKey(Image, related_name="labels", on_delete=models.CASCADE)
    # RESTRICT: deleting a membership (or its account) never deletes labels (deactivate it instead);
    # deleting a whole project (phases and labels with it, on purpose) still may.
    labeler = models.ForeignKey(Membership, related_name="labels", on_delete=models.RESTRICT)
    assignment = models.OneToOneField(
        Assignment, null=True, blank=True, on_delete=models.SET_NULL, related_name="label"
    )
    # A calibration-2 label of a repeated calibration-1 image: used for
    # test-retest, kept out of between-labeler statistics.
    is_repeat = models.BooleanField(default=False)
    # Mirror of the revision that counts.
    tone_low = models.PositiveSmallIntegerField(null=True, blank=True)
    tone_high = models.PositiveSmallIntegerField(null=True, blank=True)
    value = models.FloatField(null=True, blank=True)
    uncertain = models.BooleanField(default=False)
    skip_reason = models.CharField(max_length=200, blank=True)
    is_valid = models.BooleanField(default=True)
    n_revisions = models.PositiveIntegerField(default=1)
    time_spent_ms = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["phase_id", "image_id", "labeler_id"]
        constraints = [
            models.UniqueConstraint(fields=["phase", "image", "labeler"], name="unique_label"),
        ]
        indexes = [
            models.Index(fields=["phase", "is_repeat", "image"]),
            # The consensus cache version is max(updated_at) per phase: an index-only lookup.
            models.Index(fields=["phase", "updated_at"]),
        ]

    def __str__(self) -> str:
        return f"label {self.pk} ({self.selection_text})"

    @property
    def selection_text(self) -> str:
        if self.skip_reason:
            return f"skipped: {self.skip_reason}"
        if self.tone_high:
            return f"{self.tone_low}+{self.tone_high}"
        return str(self.tone_low)


class LabelRevision(models.Model):
    """An immutable version of a label. Nothing is ever overwritten."""

    class Source(models.TextChoices):
        LABELER = "labeler", "Labeler"
        CHANGE = "change", "Changed by the labeler"
        RELABEL = "relabel", "Relabelled on a lead's request"
        CORRECTION = "correction", "Correction by a lead"
        IMPORT = "import", "Imported"

    label = models.ForeignKey(Label, related_name="revisions", on_delete=models.CASCADE)
    number = models.PositiveIntegerField()
    # The client's own id for this submission: a retried or doubled submit stores one revision.
    client_id = models.UUIDField(unique=True)
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.LABELER)
    tone_low = models.PositiveSmallIntegerField(null=True, blank=True)
    tone_high = models.PositiveSmallIntegerField(null=True, blank=True)
    value = models.FloatField(null=True, blank=True)
    uncertain = models.BooleanField(default=False)
    skip_reason = models.CharField(max_length=200, blank=True)
    time_spent_ms = models.PositiveIntegerField(default=0)
    # What the labeler saw: the tone order shown and the display's properties.
    tone_order = models.JSONField(default=list, blank=True)
    client_info = models.JSONField(default=dict, blank=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["label_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["label", "number"], name="unique_revision_number"),
            # Either a skip (no tone, a reason) or at least one tone.
            models.CheckConstraint(
                condition=(Q(tone_low__isnull=True, tone_high__isnull=True) & ~Q(skip_reason=""))
                | (Q(tone_low__isnull=False) & Q(skip_reason="")),
                name="revision_skip_xor_tone",
            ),
            models.CheckConstraint(
                condition=Q(tone_high__isnull=True) | Q(tone_high__gt=F("tone_low")),
                name="revision_tone_high_gt_low",
            ),
            # Only imported labels may carry a non-adjacent (invalid) pair.
            models.CheckConstraint(
                condition=Q(tone_high__isnull=True) | Q(tone_high=F("tone_low") + 1) | Q(source="import"),
                name="revision_pair_adjacent",
            ),
        ]

    def __str__(self) -> str:
        return f"revision {self.number} of label {self.label_id}"


class Reflection(models.Model):
    """A labeler's reflection at the end of a calibration phase."""

    phase = models.ForeignKey(Phase, related_name="reflections", on_delete=models.CASCADE)
    labeler = models.ForeignKey(Membership, related_name="reflections", on_delete=models.CASCADE)
    minutes_taken = models.PositiveIntegerField(null=True, blank=True)
    unclear_instructions = models.TextField(blank=True)
    biases_noticed = models.JSONField(default=list, blank=True)
    biases_other = models.TextField(blank=True)
    mindfulness_plan = models.TextField(blank=True)
    submitted_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["phase", "labeler"], name="unique_reflection")]
