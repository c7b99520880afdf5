"""The migrated template (``tests.sqlite_template``) holds exactly what migrating gives: schema and rows."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts Python processes that migrate a database

ROOT = Path(__file__).resolve().parent.parent

# The test database as pytest makes it (``how=template``: through ``tests.sqlite_template``, which makes the
# template when it is missing and restores it otherwise) or as Django alone makes it (``how=migrate``), then
# every table's schema and rows as JSON. Date-time columns (``django_migrations.applied``, a built-in scale's
# ``created_at``) hold when the database was made: left out.
SCRIPT = r"""
import json, os, sys
os.environ.pop("DATABASE_URL", None)
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
import django
django.setup()
from django.db import connection
if sys.argv[1] == "template":
    from tests.sqlite_template import install
    install()
else:
    os.environ["FAIRTONE_TEST_DB_TEMPLATE"] = "0"
connection.creation.create_test_db(verbosity=0, serialize=False)
with connection.cursor() as cursor:
    cursor.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")
    schema = [list(row) for row in cursor.fetchall()]
    rows = {}
    for kind, name, _table, _sql in schema:
        if kind != "table":
            continue
        cursor.execute(f'PRAGMA table_info("{name}")')
        keep = [i for i, column in enumerate(cursor.fetchall()) if column[2].lower() != "datetime"]
        cursor.execute(f'SELECT * FROM "{name}"')
        rows[name] = sorted(json.dumps([row[i] for i in keep], default=str) for row in cursor.fetchall())
print(json.dumps({"schema": schema, "rows": rows}))
"""


def _dump(how: str, env: dict) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, how], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_restored_template_is_the_migrated_database(tmp_path):
    from tests.sqlite_template import template_path

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    migrated = _dump("migrate", env)
    assert "labeling_tone" in migrated["rows"] and migrated["rows"]["labeling_tone"], "the built-in scales"
    first = _dump("template", env)  # makes the template if this key has none yet
    assert template_path().exists()
    restored = _dump("template", env)  # restores it
    assert first == migrated
    assert restored == migrated


def test_the_key_changes_with_the_code_a_migration_runs(monkeypatch, tmp_path):
    import tests.sqlite_template as template

    before = template.template_key()
    copy = tmp_path / "scales.py"
    copy.write_text((ROOT / "labeling/services/scales.py").read_text() + "\n# changed\n")
    monkeypatch.setattr(template, "MIGRATION_CODE", (str(copy),))
    assert template.template_key() != before
