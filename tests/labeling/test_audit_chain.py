"""Issue 26: the audit log is tamper-evident (a hash chain that ``manage.py audit_verify`` follows) and, on
PostgreSQL, a role that is not the table's owner can neither change nor empty it."""

import importlib
import uuid

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction

from labeling.models import AuditEntry
from labeling.models.audit import GENESIS, entry_hash
from labeling.services.audit import audit

pytestmark = pytest.mark.django_db

TABLE = AuditEntry._meta.db_table
_guard = importlib.import_module("labeling.migrations.0015_audit_log_append_only")
_chain = importlib.import_module("labeling.migrations.0019_audit_chain_i26")


def _as_owner(sql: str, params=None) -> None:
    """What the table's owner can do behind the app's back: lift the triggers, run ``sql``, put them back."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"ALTER TABLE {TABLE} DISABLE TRIGGER USER")
            cursor.execute(sql, params)
            cursor.execute(f"ALTER TABLE {TABLE} ENABLE TRIGGER USER")
        else:
            for statement in _guard.SQLITE_DROP:
                cursor.execute(statement)
            cursor.execute(sql, params)
            for statement in _guard.SQLITE_CREATE:
                cursor.execute(statement)


def _entries(project, n=5):
    for k in range(n):
        audit(project, "test.action", ("thing", k), note=f"entry {k}", values=[k, k + 0.5], nested={"b": 1, "a": "é"})
    return list(AuditEntry.objects.order_by("id"))


def verify() -> str:
    out = __import__("io").StringIO()
    call_command("audit_verify", stdout=out, stderr=out)
    return out.getvalue()


def test_every_entry_chains_to_the_one_before(project):
    entries = _entries(project)
    previous = GENESIS
    for entry in entries:
        previous = entry_hash(previous, entry)
        assert entry.chain_hash == previous and len(previous) == 64
    assert f"{len(entries)} entries, chain intact" in verify()


def test_a_changed_entry_is_named(project):
    entries = _entries(project)
    target = entries[2]
    _as_owner(f"UPDATE {TABLE} SET details = %s WHERE id = %s", ['{"note": "rewritten"}', target.pk])
    with pytest.raises(CommandError, match=r"1 break\(s\) in the chain of \d+ entries"):
        verify()
    # The changed entry is the one named (the chain follows the stored hashes: the next ones still verify).
    _as_owner(f"UPDATE {TABLE} SET username = %s WHERE id = %s", ["someone-else", target.pk])
    out = __import__("io").StringIO()
    with pytest.raises(CommandError):
        call_command("audit_verify", stdout=out, stderr=out)
    assert f"entry {target.pk} " in out.getvalue() and f"entry {entries[3].pk} " not in out.getvalue()


def test_a_removed_or_inserted_entry_breaks_the_chain(project):
    entries = _entries(project)
    _as_owner(f"DELETE FROM {TABLE} WHERE id = %s", [entries[1].pk])
    with pytest.raises(CommandError, match=rf"entry {entries[2].pk} "):
        verify()


def test_a_forged_hash_needs_every_later_hash_forged_too(project):
    entries = _entries(project)
    # Rewrite entry 1 and give it the hash its new content would have: the next entry no longer follows.
    _as_owner(f"UPDATE {TABLE} SET action = %s WHERE id = %s", ["forged", entries[1].pk])
    forged = AuditEntry.objects.get(pk=entries[1].pk)
    _as_owner(
        f"UPDATE {TABLE} SET chain_hash = %s WHERE id = %s", [entry_hash(entries[0].chain_hash, forged), forged.pk]
    )
    with pytest.raises(CommandError, match=rf"entry {entries[2].pk} "):
        verify()


def test_the_migration_chains_entries_written_before_it(project):
    entries = _entries(project, 3)
    _as_owner(f"UPDATE {TABLE} SET chain_hash = ''")
    with pytest.raises(CommandError):
        verify()

    class Apps:
        @staticmethod
        def get_model(app, name):
            return AuditEntry

    class Editor:  # what the migration uses of a schema editor (a real one cannot open inside a test's atomic)
        connection = connection

        @staticmethod
        def execute(sql, params=None):
            with connection.cursor() as cursor:
                cursor.execute(sql, params)

    _chain.chain_existing(Apps, Editor)
    assert "chain intact" in verify()
    assert [e.chain_hash for e in AuditEntry.objects.order_by("id")] == [e.chain_hash for e in entries]
    # The triggers are back: the app's own role (and the owner through the model) cannot change an entry.
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"UPDATE {TABLE} SET action = 'x'")


@pytest.mark.skipif(connection.vendor != "postgresql", reason="roles and grants are PostgreSQL's (CI stage 2)")
def test_a_role_that_does_not_own_the_table_cannot_change_or_empty_it(project):
    role = f"fairtone_app_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE ROLE {role} NOLOGIN")
        try:
            # As the deploy script's default privileges give the app's role on every table migrations create.
            cursor.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA public TO {role}")
            cursor.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {role}")
            from labeling.management.commands.audit_verify import privilege_problems

            assert any(role in p for p in privilege_problems())
            cursor.execute(_chain.REVOKE)
            assert not any(role in p for p in privilege_problems())
            cursor.execute(f"SET ROLE {role}")
            try:
                for sql in (
                    f"UPDATE {TABLE} SET action = 'rewritten'",
                    f"DELETE FROM {TABLE}",
                    f"TRUNCATE {TABLE}",
                    f"ALTER TABLE {TABLE} DISABLE TRIGGER USER",
                    f"DROP TRIGGER {TABLE}_append_only ON {TABLE}",
                ):
                    with pytest.raises(DatabaseError, match="permission denied|must be owner"), transaction.atomic():
                        cursor.execute(sql)
                # What the app does: append (chained) and read.
                entry = audit(project, "test.as_app_role", ("thing", 1))
                assert entry.chain_hash and AuditEntry.objects.filter(pk=entry.pk).exists()
            finally:
                cursor.execute("RESET ROLE")
        finally:
            cursor.execute(f"DROP OWNED BY {role}")
            cursor.execute(f"DROP ROLE {role}")
    assert "chain intact" in verify()
