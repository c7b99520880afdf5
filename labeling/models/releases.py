from django.conf import settings
from django.db import models
from django.db.models import Q

from .images import Image
from .jobs import Job
from .projects import Project


class ReleaseImmutable(Exception):
    """A published release is never changed."""


class Release(models.Model):
    """A versioned fairness-evaluation dataset of a project (v1, v2, ...) with its data card.

    Its files live under ``MEDIA_ROOT/releases/<project>/v<version>/`` (and a zip beside them);
    once published, neither the row nor the files change: a correction makes a new version.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        PUBLISHED = "published", "Published"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    ACTIVE = (Status.QUEUED, Status.RUNNING)

    project = models.ForeignKey(Project, related_name="releases", on_delete=models.PROTECT)
    version = models.PositiveIntegerField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    # phases ("latest" or phase kinds), aggregation, tie, min_valid_labels, include {category: bool}, with_images.
    rule = models.JSONField(default=dict)
    # motivation, intended_uses, out_of_scope_uses, licence, contacts, consent.
    card_text = models.JSONField(default=dict)
    code_version = models.CharField(max_length=200, blank=True)
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    previous = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    manifest = models.JSONField(default=dict, blank=True)
    # counts: images, included, excluded per reason, labels, labelers.
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["project_id", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["project", "version"], name="unique_release_version"),
            # One release at a time per project: a release requested twice at once gives one release.
            models.UniqueConstraint(
                fields=["project"], condition=Q(status__in=["queued", "running"]), name="one_active_release"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project} v{self.version} ({self.status})"

    def save(self, *args, **kwargs):
        """Refuses to change a row that is published in the database (published releases are immutable)."""
        if self.pk is not None and not self._state.adding:
            stored = Release.objects.filter(pk=self.pk).values_list("status", flat=True).first()
            if stored == Release.Status.PUBLISHED:
                raise ReleaseImmutable(f"Release v{self.version} is published: it cannot be changed.")
        super().save(*args, **kwargs)


class ReleaseImage(models.Model):
    """One image of a release as published: its final tone, or why it was excluded (to diff releases)."""

    release = models.ForeignKey(Release, related_name="release_images", on_delete=models.CASCADE)
    image = models.ForeignKey(Image, null=True, on_delete=models.SET_NULL, related_name="+")
    external_id = models.CharField(max_length=200)
    final_value = models.FloatField(null=True, blank=True)
    final_tone = models.SmallIntegerField(null=True, blank=True)
    # Reasons joined by ";" (empty: included).
    excluded_reason = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["release_id", "image_id"]
        indexes = [models.Index(fields=["release", "image"])]
