from django.conf import settings
from django.db import models

from .projects import Project


def original_path(instance: "Image", filename: str) -> str:
    return f"projects/{instance.project_id}/originals/{instance.sha256[:2]}/{instance.sha256}"


def derivative_path(instance: "Image", filename: str) -> str:
    # A box's derivatives are its own (its display name and its thumbnail, a crop of the box, carry the box):
    # see ``services.images.image_make_derivatives``.
    return f"projects/{instance.project_id}/derivatives/{instance.sha256[:2]}/{filename}"


def mask_path(instance: "Image", filename: str) -> str:
    return f"projects/{instance.project_id}/masks/{instance.sha256[:2]}/{instance.sha256}.png"


class Subject(models.Model):
    """A person who appears in one or more images, with arbitrary attributes."""

    project = models.ForeignKey(Project, related_name="subjects", on_delete=models.CASCADE)
    external_id = models.CharField(max_length=200)
    attributes = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["project_id", "external_id"]
        constraints = [models.UniqueConstraint(fields=["project", "external_id"], name="unique_subject")]

    def __str__(self) -> str:
        return self.external_id


class ImportBatch(models.Model):
    """One import (browser upload, zip archive or manifest) and its outcome."""

    class Kind(models.TextChoices):
        UPLOAD = "upload", "Browser upload"
        ZIP = "zip", "Zip archive"
        MANIFEST = "manifest", "Manifest"
        DEMO = "demo", "Demo data"

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    project = models.ForeignKey(Project, related_name="imports", on_delete=models.CASCADE)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    source_name = models.CharField(max_length=300, blank=True)
    error = models.TextField(blank=True, help_text="Why the whole import was refused, if it was.")
    n_imported = models.PositiveIntegerField(default=0)
    n_duplicate = models.PositiveIntegerField(default=0)
    n_rejected = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} #{self.pk}"


class ImportItem(models.Model):
    """The outcome for one file or manifest row of an import."""

    class Outcome(models.TextChoices):
        IMPORTED = "imported", "Imported"
        DUPLICATE = "duplicate", "Skipped as duplicate"
        REJECTED = "rejected", "Rejected"

    batch = models.ForeignKey(ImportBatch, related_name="items", on_delete=models.CASCADE)
    row = models.PositiveIntegerField(null=True, blank=True, help_text="Manifest row (1 = header).")
    filename = models.CharField(max_length=500, blank=True)
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    reason = models.TextField(blank=True)
    image = models.ForeignKey("labeling.Image", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["batch_id", "id"]


class Image(models.Model):
    """A labelling item: a photo, or one person's box in a photo. The original bytes are kept as uploaded;
    derivatives are oriented sRGB JPEGs.

    A photo with several people is imported as one item per box (``box_x``, ``box_y``, ``box_width``,
    ``box_height``: pixels of the photo after its EXIF orientation, the four together or none): each its own
    subject, attributes, labels, baseline and release row, all sharing the stored original file (the same
    ``sha256`` and ``original``). An item without a box is the whole photo, as before boxes existed.
    """

    class DerivativeStatus(models.TextChoices):
        PENDING = "pending", "Pending"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"

    project = models.ForeignKey(Project, related_name="images", on_delete=models.CASCADE)
    subject = models.ForeignKey(Subject, null=True, blank=True, related_name="images", on_delete=models.SET_NULL)
    external_id = models.CharField(max_length=200)
    original = models.FileField(upload_to=original_path, max_length=300)
    original_filename = models.CharField(max_length=300)
    sha256 = models.CharField(max_length=64)
    file_size = models.PositiveBigIntegerField()
    format = models.CharField(max_length=20)
    source_mode = models.CharField(max_length=20, help_text="Pillow mode of the original.")
    exif_orientation = models.PositiveSmallIntegerField(default=1)
    # Size after the EXIF orientation is applied.
    width = models.PositiveIntegerField()
    height = models.PositiveIntegerField()
    attributes = models.JSONField(default=dict, blank=True)
    mask = models.FileField(upload_to=mask_path, max_length=300, blank=True)
    mask_kind = models.CharField(max_length=20, blank=True, help_text="silhouette or skin")
    display = models.FileField(upload_to=derivative_path, max_length=300, blank=True)
    thumbnail = models.FileField(upload_to=derivative_path, max_length=300, blank=True)
    derivative_status = models.CharField(
        max_length=20, choices=DerivativeStatus.choices, default=DerivativeStatus.PENDING
    )
    derivative_error = models.TextField(blank=True)
    # One person's box in the photo (pixels after EXIF orientation), or none for the whole photo.
    box_x = models.PositiveIntegerField(null=True, blank=True)
    box_y = models.PositiveIntegerField(null=True, blank=True)
    box_width = models.PositiveIntegerField(null=True, blank=True)
    box_height = models.PositiveIntegerField(null=True, blank=True)
    is_synthetic = models.BooleanField(default=False)
    import_batch = models.ForeignKey(
        ImportBatch, null=True, blank=True, on_delete=models.SET_NULL, related_name="images"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project_id", "id"]
        constraints = [
            # A photo once as a whole; each of its boxes once (the same file with different boxes is allowed).
            models.UniqueConstraint(
                fields=["project", "sha256"], condition=models.Q(box_x__isnull=True), name="unique_image_content"
            ),
            models.UniqueConstraint(
                fields=["project", "sha256", "box_x", "box_y", "box_width", "box_height"],
                condition=models.Q(box_x__isnull=False),
                name="unique_image_box",
            ),
            models.UniqueConstraint(fields=["project", "external_id"], name="unique_image_id"),
            models.CheckConstraint(condition=models.Q(width__gte=1, height__gte=1), name="image_size_positive"),
            # All four or none, a positive size, inside the (oriented) photo.
            models.CheckConstraint(
                condition=models.Q(
                    box_x__isnull=True, box_y__isnull=True, box_width__isnull=True, box_height__isnull=True
                )
                | models.Q(
                    # Each named not null: a comparison with NULL is unknown, and SQL lets an unknown CHECK pass.
                    box_x__isnull=False,
                    box_y__isnull=False,
                    box_width__isnull=False,
                    box_height__isnull=False,
                    box_width__gte=1,
                    box_height__gte=1,
                    width__gte=models.F("box_x") + models.F("box_width"),
                    height__gte=models.F("box_y") + models.F("box_height"),
                ),
                name="image_box_inside",
            ),
        ]
        indexes = [models.Index(fields=["project", "subject"])]

    def __str__(self) -> str:
        return self.external_id

    @property
    def box(self) -> tuple[int, int, int, int] | None:
        """``(x, y, width, height)`` of the person's box in the photo, or None for the whole photo."""
        if self.box_x is None:
            return None
        return (self.box_x, self.box_y, self.box_width, self.box_height)

    @property
    def box_dict(self) -> dict[str, int] | None:
        """The box as ``{"x", "y", "width", "height"}`` (the API's and the labeling page's shape), or None."""
        box = self.box
        return None if box is None else dict(zip(("x", "y", "width", "height"), box, strict=True))

    @property
    def box_percent(self) -> dict[str, str] | None:
        """The box as percentages of the photo (``x``, ``y``, ``width``, ``height``; CSS values for the pages
        that outline it on the display image), or None for a whole photo."""
        box = self.box_dict
        if box is None:
            return None
        size = {"x": self.width, "width": self.width, "y": self.height, "height": self.height}
        return {k: f"{100 * v / size[k]:.4f}" for k, v in box.items()}
