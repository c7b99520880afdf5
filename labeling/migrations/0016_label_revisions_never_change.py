"""A label's revisions never change, in the database too: triggers refuse every UPDATE of a revision's content.

Corrections never overwrite: a changed answer, a relabel or a lead's correction is a new revision, and the app
never updates one (``models.LabelRevision``). These guard the history from raw SQL, another program and a future
bug. The one change allowed is the database's own ``SET NULL`` when the revision's author's account is deleted
(``author`` is ``on_delete=SET_NULL``): ``author_id`` may become NULL, nothing else may change. Deleting stays
possible: an erasure on request deletes the subject's labels with their revisions, and deleting a project
deletes its own.

Refusal: ``django.db.IntegrityError`` on both databases (SQLite: ``RAISE(ABORT)``; PostgreSQL: SQLSTATE 23001
``restrict_violation``). On PostgreSQL the guard compares the whole row (a column added later is guarded too);
on SQLite it names the columns, so a later migration that adds a column or rebuilds this table on SQLite must
create the triggers again.
"""

from django.db import migrations

TABLE = "labeling_labelrevision"
MESSAGE = "A label revision is never changed: a new answer or a correction is a new revision."
#: Every column but author_id (SQLite names them; PostgreSQL compares the whole row).
COLUMNS = (
    "id, label_id, number, client_id, source, tone_low, tone_high, value, uncertain, skip_reason, "
    "time_spent_ms, tone_order, client_info, reason, created_at"
)

POSTGRESQL_CREATE = f"""
CREATE FUNCTION {TABLE}_never_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF to_jsonb(NEW) - 'author_id' IS DISTINCT FROM to_jsonb(OLD) - 'author_id'
       OR (NEW.author_id IS NOT NULL AND NEW.author_id IS DISTINCT FROM OLD.author_id) THEN
        RAISE EXCEPTION '{MESSAGE}' USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER {TABLE}_never_changes BEFORE UPDATE ON {TABLE}
    FOR EACH ROW EXECUTE FUNCTION {TABLE}_never_changes();
"""
POSTGRESQL_DROP = f"""
DROP TRIGGER IF EXISTS {TABLE}_never_changes ON {TABLE};
DROP FUNCTION IF EXISTS {TABLE}_never_changes();
"""

SQLITE_CREATE = [
    f"CREATE TRIGGER {TABLE}_no_update BEFORE UPDATE OF {COLUMNS} ON {TABLE} "
    f"BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END;",
    f"CREATE TRIGGER {TABLE}_author_only_to_null BEFORE UPDATE OF author_id ON {TABLE} "
    f"WHEN NEW.author_id IS NOT NULL BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END;",
]
SQLITE_DROP = [
    f"DROP TRIGGER IF EXISTS {TABLE}_no_update;",
    f"DROP TRIGGER IF EXISTS {TABLE}_author_only_to_null;",
]


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
    dependencies = [("labeling", "0015_audit_log_append_only")]

    operations = [migrations.RunPython(install, uninstall, elidable=False)]
