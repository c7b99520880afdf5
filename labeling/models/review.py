"""A lead's control of the study: reopened phases, post-calibration review decisions, excluded images."""

from django.conf import settings
from django.db import models

from .images import Image
from .phases import Phase


class PhaseReopening(models.Model):
    """A closed phase opened again by a lead, with why: closing is never silently undone."""

    phase = models.ForeignKey(Phase, related_name="reopenings", on_delete=models.CASCADE)
    reason = models.TextField()
    reopened_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    # When the phase had been closed (the close this reopening undid).
    closed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["phase_id", "-created_at", "-id"]
        constraints = [models.CheckConstraint(condition=~models.Q(reason=""), name="reopening_has_reason")]

    def __str__(self) -> str:
        return f"{self.phase} reopened"


class ReviewDecision(models.Model):
    """A lead's decision on an image listed by the review: its labels accepted as they are, or resolved.

    Resolved means fixed (corrected, or sent back and relabelled). Decided images leave the
    review's open list; the decision can be withdrawn (the row is deleted), never edited silently.
    """

    class State(models.TextChoices):
        ACCEPTED = "accepted", "Accepted as labelled"
        RESOLVED = "resolved", "Resolved"

    phase = models.ForeignKey(Phase, related_name="review_decisions", on_delete=models.CASCADE)
    image = models.ForeignKey(Image, related_name="review_decisions", on_delete=models.CASCADE)
    state = models.CharField(max_length=20, choices=State.choices)
    note = models.TextField(blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    decided_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["phase_id", "image_id"]
        constraints = [models.UniqueConstraint(fields=["phase", "image"], name="unique_review_decision")]

    def __str__(self) -> str:
        return f"{self.image} {self.state}"


class ImageExclusion(models.Model):
    """A lead's exclusion of an image from the dataset, with why; undone by including the image again.

    Nothing is deleted: the image, its labels and this row stay. Including it again records who and
    when on the row (``included_at``), so an image's exclusions and inclusions remain readable. At
    most one exclusion of an image is open (``included_at`` empty) at a time; its partial unique
    index is also what the data manager's "excluded" filter and the release read.
    """

    image = models.ForeignKey(Image, related_name="exclusions", on_delete=models.CASCADE)
    reason = models.TextField()
    excluded_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    excluded_at = models.DateTimeField(auto_now_add=True)
    included_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    included_at = models.DateTimeField(null=True, blank=True)
    included_note = models.TextField(blank=True)

    class Meta:
        ordering = ["image_id", "-excluded_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=~models.Q(reason=""), name="exclusion_has_reason"),
            models.UniqueConstraint(
                fields=["image"], condition=models.Q(included_at__isnull=True), name="one_open_exclusion"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.image} excluded" + (" (included again)" if self.included_at else "")
