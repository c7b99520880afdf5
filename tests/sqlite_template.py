"""The SQLite test database from a migrated template instead of migrating it in every test process.

Migrating the test database took 2.2-2.4 s in each pytest process (two workers, or a single test run
alone), 80% of it Django rendering the migration states. The first process to need a database migrates
it as before and saves a copy in ``var/test-db/<key>.sqlite3``; every later process restores that copy
into its in-memory database (SQLite's online backup, a few milliseconds) and then lets ``migrate`` run
as usual: it finds every migration applied and does nothing but the post-migrate signals.

The key is the hash of what the migrated database is made from: every installed app's migration files,
the code a data migration calls (``labeling.services.scales``: the built-in scales), and the Django and
SQLite versions. ``tests/test_sqlite_template.py`` (slow tier) holds a restored template equal to a
freshly migrated database, schema and rows. PostgreSQL runs are untouched (CI's second stage migrates).
https://docs.python.org/3/library/sqlite3.html#sqlite3.Connection.backup
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

#: Files outside the migrations folders whose code a migration runs (``RunPython``).
MIGRATION_CODE = ("labeling/services/scales.py",)
_ROOT = Path(__file__).resolve().parent.parent
#: The in-memory databases restored in this process, kept open: a shared-cache in-memory database lives
#: as long as one connection to it is open.
_KEEP: list[sqlite3.Connection] = []


def template_key() -> str:
    import django
    from django.apps import apps

    digest = hashlib.sha256(f"{django.__version__} {sqlite3.sqlite_version}".encode())
    files = []
    for app in apps.get_app_configs():
        folder = Path(app.path) / "migrations"
        if folder.is_dir():
            files += sorted(folder.glob("*.py"))
    files += [_ROOT / name for name in MIGRATION_CODE]
    for path in files:
        digest.update("/".join(path.parts[-2:]).encode())  # "migrations/0001_initial.py", "services/scales.py"
        digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def template_path() -> Path:
    return _ROOT / "var" / "test-db" / f"{template_key()}.sqlite3"


def install() -> None:
    """Make SQLite's test database creation restore the template (or make it). Idempotent."""
    from django.db.backends.sqlite3.creation import DatabaseCreation

    if getattr(DatabaseCreation.create_test_db, "_from_template", False):
        return
    original = DatabaseCreation.create_test_db

    def create_test_db(self, verbosity=1, autoclobber=False, serialize=True, keepdb=False):
        name = self._get_test_db_name()
        if keepdb or not self.is_in_memory_db(name) or os.environ.get("FAIRTONE_TEST_DB_TEMPLATE") == "0":
            return original(self, verbosity, autoclobber, serialize, keepdb)
        template = template_path()
        if template.exists():
            restore(template, name)
            return original(self, verbosity, autoclobber, serialize, keepdb)
        result = original(self, verbosity, autoclobber, serialize, keepdb)
        save(self.connection, template)
        return result

    create_test_db._from_template = True  # type: ignore[attr-defined]
    DatabaseCreation.create_test_db = create_test_db


def restore(template: Path, name: str) -> None:
    target = sqlite3.connect(name, uri=True)
    source = sqlite3.connect(f"file:{template}?mode=ro", uri=True)
    try:
        source.backup(target)
    finally:
        source.close()
    _KEEP.append(target)


def save(connection, template: Path) -> None:
    """Copy the migrated database to ``template`` (written beside it, then renamed: two processes making it
    at once each write a whole file); older templates are removed."""
    template.parent.mkdir(parents=True, exist_ok=True)
    partial = template.with_name(f"{template.stem}.{os.getpid()}.partial")
    connection.ensure_connection()
    out = sqlite3.connect(partial)
    try:
        connection.connection.backup(out)
    finally:
        out.close()
    os.replace(partial, template)
    for old in template.parent.glob("*.sqlite3"):
        if old != template:
            old.unlink(missing_ok=True)
