from django.conf import settings
from django.db import models

from .images import Image
from .projects import Project


class Job(models.Model):
    """A background job with progress that leads can watch (and the API reports)."""

    class Kind(models.TextChoices):
        DERIVATIVES = "derivatives", "Thumbnails and display images"
        BASELINE = "baseline", "Colorimetric baseline (ITA, apparent albedo)"
        EXPORT = "export", "Dataset release"
        EVALUATION = "evaluation", "Fairness evaluation"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    project = models.ForeignKey(Project, related_name="jobs", on_delete=models.CASCADE)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    parameters = models.JSONField(default=dict, blank=True)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    # [{"image_id": ..., "reason": ...}], bounded in size by the services.
    failures = models.JSONField(default=list, blank=True)
    message = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # The last sign of life of the work on this job (a batch started or finished). The sweeper
    # (``services.jobs.jobs_sweep``) fails a queued or running job with none for longer than its
    # kind's deadline, so a job never stays "running" after its worker died.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} job {self.pk} ({self.status})"


class PendingTask(models.Model):
    """A task that could not be sent (the broker was unreachable): sent later by the sweeper, in order."""

    name = models.CharField(max_length=200)
    args = models.JSONField(default=list)
    attempts = models.PositiveIntegerField(default=0)
    # The kind of error only (e.g. "OperationalError"): never a URL or a password.
    last_error = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"pending {self.name} {self.args}"


class ImageBaseline(models.Model):
    """The colorimetric baseline of one image for one parameter set and code version."""

    class Status(models.TextChoices):
        OK = "ok", "Computed"
        FAILED = "failed", "Failed"

    image = models.ForeignKey(Image, related_name="baselines", on_delete=models.CASCADE)
    parameters_hash = models.CharField(max_length=64)
    parameters = models.JSONField(default=dict)
    code_version = models.CharField(max_length=40)
    status = models.CharField(max_length=10, choices=Status.choices)
    error = models.TextField(blank=True)
    ita_median = models.FloatField(null=True, blank=True)
    lightness_median = models.FloatField(null=True, blank=True)
    b_median = models.FloatField(null=True, blank=True)
    skin_fraction = models.FloatField(null=True, blank=True)
    albedo = models.FloatField(null=True, blank=True)
    albedo_normalized = models.FloatField(null=True, blank=True)
    ita_class = models.CharField(max_length=30, blank=True)
    flags = models.JSONField(default=list, blank=True)
    stats = models.JSONField(default=dict, blank=True)
    overlay = models.FileField(upload_to="baselines/", max_length=300, blank=True)
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    computed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["image", "parameters_hash", "code_version"], name="unique_baseline")
        ]


class EvaluationRun(models.Model):
    """A model's per-sample results joined with a release and scored for fairness by the metrics module.

    The uploaded results file is kept as uploaded; ``join`` records how it matched the release
    (matched, unknown, missing, duplicates) and ``report`` holds the metrics report (the same
    JSON as ``python -m metrics report`` writes). Its figures live under ``MEDIA_ROOT/evaluations/<id>/``.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    project = models.ForeignKey(Project, related_name="evaluations", on_delete=models.CASCADE)
    release = models.ForeignKey(
        "labeling.Release", null=True, blank=True, related_name="evaluations", on_delete=models.PROTECT
    )
    name = models.CharField(max_length=200)
    model_name = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    predictions = models.FileField(upload_to="evaluations/", max_length=300)
    options = models.JSONField(default=dict, blank=True)
    join = models.JSONField(default=dict, blank=True)
    report = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"Evaluation {self.name} ({self.status})"


class EvaluationGate(models.Model):
    """A project's rule for CI: an evaluation run passes or fails it (``metrics.gate`` decides)."""

    project = models.ForeignKey(Project, related_name="evaluation_gates", on_delete=models.CASCADE)
    name = models.CharField(max_length=200)
    # The arguments of metrics.gate: {"fail_on_significant": true, "max_score": {...}, ...}.
    rules = models.JSONField(default=dict)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="unique_gate_name")]

    def __str__(self) -> str:
        return self.name
