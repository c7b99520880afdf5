"""The audit log is append-only in the database too: triggers refuse every UPDATE and DELETE of its rows.

The app already refuses (``models.AuditEntry``); these guard the rows from raw SQL, another program and a
future bug. Nothing the app does legitimately changes or deletes an entry: the table has no foreign keys (a
deleted project, user or erased subject leaves its entries as they were), so no cascade or SET NULL reaches it.
Refusal: ``django.db.IntegrityError`` on both databases (SQLite: ``RAISE(ABORT)``, a constraint error;
PostgreSQL: SQLSTATE 23001 ``restrict_violation``).

Not guarded: PostgreSQL's ``TRUNCATE`` (what ``manage.py flush`` and the test runner use to empty every table)
and dropping the table or the triggers: a database owner's acts, not a row's change. On SQLite ``flush`` deletes
row by row, so it is refused while the log has entries; the test suite lifts the guard around its flush
(``tests/conftest.py``, with :data:`SQLITE_DROP` and :data:`SQLITE_CREATE`).

A later migration that alters this table on SQLite (Django rebuilds the table, and its triggers go with it) must
create them again.
"""

from django.db import migrations

TABLE = "labeling_auditentry"
MESSAGE = "The audit log is append-only: its entries are never changed or deleted."

POSTGRESQL_CREATE = f"""
CREATE FUNCTION {TABLE}_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '{MESSAGE} (% refused)', TG_OP USING ERRCODE = 'restrict_violation';
END
$$;
CREATE TRIGGER {TABLE}_append_only BEFORE UPDATE OR DELETE ON {TABLE}
    FOR EACH ROW EXECUTE FUNCTION {TABLE}_append_only();
"""
POSTGRESQL_DROP = f"""
DROP TRIGGER IF EXISTS {TABLE}_append_only ON {TABLE};
DROP FUNCTION IF EXISTS {TABLE}_append_only();
"""

SQLITE_CREATE = [
    f"CREATE TRIGGER {TABLE}_no_update BEFORE UPDATE ON {TABLE} BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END;",
    f"CREATE TRIGGER {TABLE}_no_delete BEFORE DELETE ON {TABLE} BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END;",
]
SQLITE_DROP = [f"DROP TRIGGER IF EXISTS {TABLE}_no_update;", f"DROP TRIGGER IF EXISTS {TABLE}_no_delete;"]


def _run(schema_editor, sql) -> None:
    for statement in [sql] if isinstance(sql, str) else sql:
        schema_editor.execute(statement, params=None)


def install(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        _run(schema_editor, POSTGRESQL_CREATE)
    elif vendor == "sqlite":
        _run(schema_editor, SQLITE_CREATE)


def uninstall(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        _run(schema_editor, POSTGRESQL_DROP)
    elif vendor == "sqlite":
        _run(schema_editor, SQLITE_DROP)


class Migration(migrations.Migration):
    dependencies = [("labeling", "0014_subject_erasure")]

    operations = [migrations.RunPython(install, uninstall, elidable=False)]
