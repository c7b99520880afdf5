"""The record that a subject (a person) was erased from a project on request (``services.erasure``).

The subject's images, files, labels and everything else of them are gone; this row says that it happened,
when, by whom, how much went, and which releases (immutable files, never rewritten) still contain the subject,
so that the release pages can say so and holders of those releases can remove the subject's rows.

The subject's external id is kept (with its SHA-256): it is the project's own pseudonymous key for the person,
it already appears in every release made before (``subject_id`` column), and whoever holds such a release
needs it to delete that person's rows from their copy.
"""

from django.conf import settings
from django.db import models

from .projects import Project


class SubjectErasure(models.Model):
    project = models.ForeignKey(Project, related_name="erasures", on_delete=models.CASCADE)
    subject_external_id = models.CharField(max_length=200)
    subject_sha256 = models.CharField(max_length=64)
    erased_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The username when it happened.
    erased_by_username = models.CharField(max_length=150, blank=True)
    erased_at = models.DateTimeField(auto_now_add=True)
    reason = models.TextField(blank=True)
    # images, labels, revisions, baselines, files, exclusions, review_decisions, phase_images, assignments, ...
    counts = models.JSONField(default=dict)
    # The published releases whose images table held the subject: [{"version", "rows", "with_images",
    # "published_at"}]; they are immutable and were not changed.
    releases = models.JSONField(default=list)
    # Evaluation runs made on those releases (their joined tables hold the subject's rows too).
    evaluations = models.JSONField(default=list)

    class Meta:
        ordering = ["project_id", "-erased_at", "-id"]

    def __str__(self) -> str:
        return f"subject {self.subject_external_id} erased from project {self.project_id}"

    @property
    def release_versions(self) -> list[int]:
        return [int(r["version"]) for r in self.releases]
