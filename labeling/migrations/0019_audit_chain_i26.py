"""Tamper evidence for the audit log (issue 26): ``chain_hash`` on every entry, and no UPDATE, DELETE or
TRUNCATE on the table for any role but its owner.

- The existing entries are chained in id order (``labeling.models.audit.entry_hash``, the one definition). The
  append-only triggers are lifted for that one backfill and put back; on SQLite the table is rebuilt by the
  field changes (its triggers go with it), so they are created again, as migration 0015 says a later
  migration must.
- PostgreSQL: every role that is not the table's owner loses UPDATE, DELETE, TRUNCATE, TRIGGER and REFERENCES
  on it (the app's least-privilege role of deploy/postgres/10-fairtone-roles.sh gets them from the owner's
  default privileges when migrations create the table). Only the owner can disable the triggers or alter the
  table; the app does not run as the owner (docker-compose.yml, .env.example). ``manage.py audit_verify``
  checks both the chain and these privileges.
"""

import importlib

import django.utils.timezone
from django.db import migrations, models

from labeling.models.audit import GENESIS, entry_hash

# The append-only triggers as migration 0015 writes them (one definition).
_guard = importlib.import_module("labeling.migrations.0015_audit_log_append_only")

TABLE = "labeling_auditentry"

REVOKE = f"""
DO $$
DECLARE role_name text;
BEGIN
    FOR role_name IN
        SELECT DISTINCT grantee FROM information_schema.role_table_grants
        WHERE table_schema = current_schema() AND table_name = '{TABLE}'
          AND grantee <> (SELECT tableowner FROM pg_tables
                          WHERE schemaname = current_schema() AND tablename = '{TABLE}')
    LOOP
        EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE, TRIGGER, REFERENCES ON {TABLE} FROM %I', role_name);
    END LOOP;
    REVOKE UPDATE, DELETE, TRUNCATE, TRIGGER, REFERENCES ON {TABLE} FROM PUBLIC;
END
$$;
"""


def chain_existing(apps, schema_editor):
    entry_model = apps.get_model("labeling", "AuditEntry")
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE {TABLE} DISABLE TRIGGER USER", params=None)
    else:
        for statement in _guard.SQLITE_DROP:
            schema_editor.execute(statement, params=None)
    previous = GENESIS
    with schema_editor.connection.cursor() as cursor:
        # Row by row through SQL: the model's manager refuses updates (as it should).
        for entry in entry_model._base_manager.order_by("id").iterator(chunk_size=2000):
            previous = entry_hash(previous, entry)
            cursor.execute(f"UPDATE {TABLE} SET chain_hash = %s WHERE id = %s", [previous, entry.pk])
    if vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE {TABLE} ENABLE TRIGGER USER", params=None)
        schema_editor.execute(REVOKE, params=None)
    else:
        for statement in _guard.SQLITE_CREATE:
            schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("labeling", "0018_image_boxes_i23"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditentry",
            name="chain_hash",
            field=models.CharField(blank=True, editable=False, max_length=64),
        ),
        migrations.AlterField(
            model_name="auditentry",
            name="created_at",
            field=models.DateTimeField(db_index=True, default=django.utils.timezone.now),
        ),
        migrations.RunPython(chain_existing, migrations.RunPython.noop),
    ]
