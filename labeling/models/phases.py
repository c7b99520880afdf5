from django.conf import settings
from django.db import models

from .images import Image
from .projects import Membership, Project


class Phase(models.Model):
    """One of a project's four sequential phases (seed 000) [Seed000]."""

    class Kind(models.TextChoices):
        CALIBRATION_1 = "calibration_1", "Calibration 1"
        CALIBRATION_2 = "calibration_2", "Calibration 2"
        MAIN = "main", "Main"
        POST_CALIBRATION = "post_calibration", "Post-calibration"

    class Status(models.TextChoices):
        DRAFT = "draft", "Not opened"
        OPEN = "open", "Open"
        CLOSED = "closed", "Closed"

    ORDER = [Kind.CALIBRATION_1, Kind.CALIBRATION_2, Kind.MAIN, Kind.POST_CALIBRATION]

    project = models.ForeignKey(Project, related_name="phases", on_delete=models.CASCADE)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DRAFT)
    labels_per_image = models.PositiveSmallIntegerField(default=4)
    # Seed of the random draw of the calibration set (recorded for reproducibility).
    selection_seed = models.BigIntegerField(null=True, blank=True)
    selection_method = models.CharField(max_length=20, blank=True, help_text="random or manual")
    n_repeated = models.PositiveIntegerField(
        default=0, help_text="Calibration 2: calibration-1 images repeated to measure consistency."
    )
    # Every labeler labels every image of the phase (seed 000's calibration design) instead of
    # labels_per_image of them.
    every_labeler = models.BooleanField(default=False)
    opened_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    images = models.ManyToManyField(Image, through="PhaseImage", related_name="phases")

    class Meta:
        ordering = ["project_id", "id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "kind"], name="unique_phase_kind"),
            models.CheckConstraint(condition=models.Q(labels_per_image__gte=1), name="phase_labels_per_image_gte_1"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} ({self.project})"

    @property
    def index(self) -> int:
        return self.ORDER.index(self.kind)

    @property
    def is_calibration(self) -> bool:
        return self.kind in (self.Kind.CALIBRATION_1, self.Kind.CALIBRATION_2)


class PhaseImage(models.Model):
    """An image in a phase. In calibration 2, ``is_repeat`` marks a calibration-1 image shown again."""

    phase = models.ForeignKey(Phase, related_name="phase_images", on_delete=models.CASCADE)
    image = models.ForeignKey(Image, related_name="phase_images", on_delete=models.CASCADE)
    is_repeat = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["phase", "image"], name="unique_phase_image")]


class PhaseParticipant(models.Model):
    """A labeler taking part in a phase, with the seed that shuffled their order."""

    phase = models.ForeignKey(Phase, related_name="participants", on_delete=models.CASCADE)
    labeler = models.ForeignKey(Membership, related_name="participations", on_delete=models.CASCADE)
    shuffle_seed = models.BigIntegerField()
    joined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["phase", "labeler"], name="unique_participant")]


class Assignment(models.Model):
    """One image in one labeler's shuffled queue for a phase."""

    class Kind(models.TextChoices):
        LABEL = "label", "Label"
        RELABEL = "relabel", "Relabel requested by a lead"

    phase = models.ForeignKey(Phase, related_name="assignments", on_delete=models.CASCADE)
    labeler = models.ForeignKey(Membership, related_name="assignments", on_delete=models.CASCADE)
    image = models.ForeignKey(Image, related_name="assignments", on_delete=models.CASCADE)
    position = models.PositiveIntegerField()
    is_repeat = models.BooleanField(default=False)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.LABEL)
    # For a relabel: the label (of an earlier phase) that gets a new revision.
    relabel_of = models.ForeignKey("labeling.Label", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    request_reason = models.TextField(blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    done_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["phase_id", "labeler_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["phase", "labeler", "image"], name="unique_assignment_image"),
            # Position first (issue 24): an index that starts (phase, labeler, position) serves "the next
            # open ones by position" as well as the partial index below, and right after a phase opens (the
            # statistics still say no assignment is done) the planner took it and walked past every done one.
            # Starting with position it still enforces the rule and answers lookups of one position.
            models.UniqueConstraint(fields=["position", "phase", "labeler"], name="unique_assignment_position"),
        ]
        indexes = [
            # The next image of a labeler's queue: the first open assignment by position.
            models.Index(
                fields=["phase", "labeler", "position"],
                condition=models.Q(done_at__isnull=True),
                name="assignment_open_queue",
            ),
        ]
