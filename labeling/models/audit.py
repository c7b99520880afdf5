"""The audit log: an append-only record of what leads and staff do to a project's data.

A row is never changed or deleted through the app: ``save`` refuses an existing row, ``delete`` refuses
always, and the manager's ``update``/``delete`` refuse too (so do bulk updates, which go through them). The
admin shows the log read-only, and the database refuses an UPDATE or DELETE of a row whoever sends it
(triggers, ``migrations/0015_audit_log_append_only``). A row names its project by id and name, not by foreign
key, so the log of a deleted project (and of an erased subject) stays.
"""

from django.db import models


class AuditImmutable(Exception):
    """An audit entry is never changed or deleted."""


class AuditEntryQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise AuditImmutable("The audit log is append-only: its entries are never changed.")

    def delete(self):
        raise AuditImmutable("The audit log is append-only: its entries are never deleted.")

    def _raw_delete(self, using):
        raise AuditImmutable("The audit log is append-only: its entries are never deleted.")


class AuditEntry(models.Model):
    """Who did what to which object of which project, when, and from which client address."""

    # No foreign keys: the entry outlives its project, its user and its object.
    project_id = models.IntegerField(null=True, blank=True, db_index=True)
    project_name = models.CharField(max_length=200, blank=True)
    user_id = models.IntegerField(null=True, blank=True)
    # The username when it happened (a renamed account keeps its old entries readable).
    username = models.CharField(max_length=150, blank=True)
    # e.g. "phase.open", "label.correct", "images.exclude", "release.publish", "subject.erase".
    action = models.CharField(max_length=60)
    object_type = models.CharField(max_length=60, blank=True)
    object_id = models.CharField(max_length=64, blank=True)
    # Small and free of labelers' tone values and personal profile fields (pseudonyms only).
    details = models.JSONField(default=dict, blank=True)
    # The client's address as the app derives it (``labeling.signin.client_address``); empty for the worker
    # and management commands.
    origin = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    objects = AuditEntryQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["project_id", "action"]), models.Index(fields=["project_id", "user_id"])]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.username or 'system'} {self.action}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AuditImmutable("The audit log is append-only: its entries are never changed.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AuditImmutable("The audit log is append-only: its entries are never deleted.")
