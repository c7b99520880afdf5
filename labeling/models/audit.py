"""The audit log: an append-only record of what leads and staff do to a project's data.

A row is never changed or deleted through the app: ``save`` refuses an existing row, ``delete`` refuses
always, and the manager's ``update``/``delete`` refuse too (so do bulk updates, which go through them). The
admin shows the log read-only, and the database refuses an UPDATE or DELETE of a row whoever sends it
(triggers, ``migrations/0015_audit_log_append_only``). A row names its project by id and name, not by foreign
key, so the log of a deleted project (and of an erased subject) stays.

Tamper evidence (issue 26): each entry carries ``chain_hash``, the SHA-256 of the previous entry's hash and of
this entry's canonical JSON (:func:`entry_hash`, the one definition, used when an entry is written and by
``manage.py audit_verify``). An entry changed, removed or slipped in by someone who can bypass the app and the
triggers (the table's owner) breaks the chain from there on. Appends are serialised (an advisory lock on
PostgreSQL; SQLite's write lock) so that two concurrent entries never chain to the same predecessor.
"""

import hashlib
import json
from datetime import UTC

from django.db import connections, models, transaction
from django.utils import timezone

#: The hash the first entry chains to.
GENESIS = "0" * 64
# pg_advisory_xact_lock key of the chain's appends (any constant of this app's own).
_CHAIN_LOCK = 0x46546175  # "FTau"


def entry_hash(previous: str, entry: "AuditEntry") -> str:
    """The chain hash of ``entry`` after ``previous``: SHA-256 over the previous hash and the entry's fields.

    The fields as canonical JSON (sorted keys, no spaces, UTF-8), the time in UTC with microseconds; the row's
    id is not in it (the chain's order is the ids' order, checked by following it).
    """
    created = entry.created_at.astimezone(UTC).isoformat(timespec="microseconds")
    fields = {
        "project_id": entry.project_id,
        "project_name": entry.project_name,
        "user_id": entry.user_id,
        "username": entry.username,
        "action": entry.action,
        "object_type": entry.object_type,
        "object_id": entry.object_id,
        "details": entry.details,
        "origin": entry.origin,
        "created_at": created,
    }
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256((previous + canonical).encode("utf-8")).hexdigest()


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
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # SHA-256 chained to the previous entry's (see the module's docstring); empty only before migration 0019.
    chain_hash = models.CharField(max_length=64, blank=True, editable=False)

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
        using = kwargs.get("using") or "default"
        with transaction.atomic(using=using):
            connection = connections[using]
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_CHAIN_LOCK])
            # The details as the database will give them back (JSON round trip), so the hash verifies later.
            self.details = json.loads(json.dumps(self.details))
            self.created_at = self.created_at or timezone.now()
            previous = AuditEntry.objects.using(using).order_by("-id").values_list("chain_hash", flat=True).first()
            self.chain_hash = entry_hash(previous or GENESIS, self)
            super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AuditImmutable("The audit log is append-only: its entries are never deleted.")
