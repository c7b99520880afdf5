"""Validation of the colorimetric baseline against skin masks on a tone-stratified sample (issue 21).

A lead asks for a sample stratified by labelled tone (so many images per consensus tone, drawn with a
recorded seed) and gives a skin mask for each: one uploaded with an import, or a polygon drawn on the
image in the browser (stored as the image's own skin mask, so the baseline then uses it too). Each
item keeps the two readings that are compared, the automatic detector's ITA (no mask) and the masked
ITA, with the code version and parameters that produced them.
"""

from django.conf import settings
from django.db import models

from .images import Image
from .projects import Project


class MaskSample(models.Model):
    """A seeded, tone-stratified sample of a project's labelled images proposed for skin masks."""

    project = models.ForeignKey(Project, related_name="mask_samples", on_delete=models.CASCADE)
    per_tone = models.PositiveSmallIntegerField()
    seed = models.BigIntegerField()
    tone_definition = models.CharField(max_length=300)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.CheckConstraint(condition=models.Q(per_tone__gte=1), name="mask_sample_per_tone_gte_1")]

    def __str__(self) -> str:
        return f"mask sample {self.pk} ({self.per_tone} per tone, seed {self.seed})"


class MaskSampleItem(models.Model):
    """One image of a mask sample, its labelled tone, and the readings compared once it has a mask."""

    class MaskSource(models.TextChoices):
        NONE = "", "No mask yet"
        DRAWN = "drawn", "Polygon drawn in the browser"
        IMPORTED = "imported", "Skin mask given with the import"

    sample = models.ForeignKey(MaskSample, related_name="items", on_delete=models.CASCADE)
    image = models.ForeignKey(Image, related_name="mask_sample_items", on_delete=models.CASCADE)
    tone = models.PositiveSmallIntegerField()
    # Vertices as fractions of the oriented image's width and height, [[x, y], ...] (a drawn mask).
    polygon = models.JSONField(default=list, blank=True)
    mask_source = models.CharField(max_length=10, choices=MaskSource.choices, blank=True, default="")
    masked_ita = models.FloatField(null=True, blank=True)
    automatic_ita = models.FloatField(null=True, blank=True)
    automatic_face_found = models.BooleanField(null=True)
    automatic_method = models.CharField(max_length=60, blank=True)
    code_version = models.CharField(max_length=40, blank=True)
    parameters_hash = models.CharField(max_length=64, blank=True)
    error = models.TextField(blank=True)
    scored_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["sample_id", "tone", "id"]
        constraints = [models.UniqueConstraint(fields=["sample", "image"], name="unique_mask_sample_image")]

    def __str__(self) -> str:
        return f"{self.image_id} (tone {self.tone})"
