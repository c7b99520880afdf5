"""Issue 13, item 9: while the database is unreachable, requests answer 503 with Retry-After, not 500.

The failure is real: on SQLite (the embedded stage) the app's connection is pointed at a file in a folder
that does not exist, so connecting fails with ``OperationalError: unable to open database file``; on
PostgreSQL (the real-services stage) the app's connection is pointed at a closed port, as while the
server restarts. Afterwards the same requests succeed again.

A database that is there but busy is not "unavailable" (issue 23): SQLite's "database is locked" and
other errors of the app answer 500, and only ``database_unreachable`` errors answer 503.
"""

import socket
import sqlite3
import uuid
from contextlib import contextmanager

import pytest
from django.db import connection
from rest_framework.test import APIClient

from tests.labeling.helpers import add_images, open_calibration_1

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def database_unreachable():
    if connection.vendor == "sqlite":
        # The database file's folder gone (an unmounted volume): the next connection cannot open it. The
        # in-memory test database's own connection is set aside meanwhile (closing it would destroy it).
        saved_name, saved_connection = connection.settings_dict["NAME"], connection.connection
        connection.connection = None
        connection.settings_dict["NAME"] = "/nonexistent-fairtone-folder/fairtone.sqlite3"
        try:
            yield
        finally:
            connection.connection = None
            connection.settings_dict["NAME"] = saved_name
            connection.connection = saved_connection
            connection.needs_rollback = False
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    saved = connection.settings_dict["HOST"], connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["HOST"], connection.settings_dict["PORT"] = "127.0.0.1", closed
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict["HOST"], connection.settings_dict["PORT"] = saved


def test_requests_get_503_with_retry_after_while_the_database_is_down(project, labelers, client_for, client):
    add_images(project, 2)
    phase = open_calibration_1(project, size=2, cal1=2)
    m = labelers[0]
    image_id = phase.assignments.filter(labeler=m).first().image_id
    api = client_for(m.user)
    api.raise_request_exception = False
    client.raise_request_exception = False
    client.force_login(m.user)
    body = {"client_id": str(uuid.uuid4()), "image": image_id, "tones": [4]}
    with database_unreachable():
        answers = [
            api.post(f"/api/phases/{phase.id}/labels/", body, format="json"),
            api.get(f"/api/phases/{phase.id}/next/"),
            APIClient().post("/api/auth/token/", {"username": "x", "password": "y"}, format="json"),
            client.get(f"/phases/{phase.id}/label/"),
        ]
        for r in answers:
            assert r.status_code == 503, (r.status_code, r.content[:200])
            assert r["Retry-After"] == "5"
        assert "retry shortly" in answers[0].json()["detail"]
        assert "Back in a moment" in answers[3].content.decode()
        ready = client.get("/readyz")
        assert ready.status_code == 503 and ready.json()["checks"]["database"] == "down"
    # The client's retry of the same submit then stores it, once.
    r = api.post(f"/api/phases/{phase.id}/labels/", body, format="json")
    assert r.status_code == 201
    assert api.post(f"/api/phases/{phase.id}/labels/", body, format="json").status_code == 200
    assert phase.labels.count() == 1


@pytest.mark.skipif(
    connection.vendor != "sqlite",
    reason="SQLite's driver errors as Django wraps them on SQLite; PostgreSQL's are the tests above",
)
def test_only_an_unreachable_database_is_503(tmp_path):
    """Real driver errors, as Django raises them: an unopenable SQLite file is unreachable; "database is
    locked" after the busy timeout, a missing table and a deadlock are not."""
    from django.db import InterfaceError, OperationalError
    from django.db.utils import DatabaseErrorWrapper

    from labeling.middleware import database_unreachable

    def raised(fn) -> Exception:
        try:
            with DatabaseErrorWrapper(connection):
                fn()
        except Exception as exc:  # noqa: BLE001 - the wrapped error is the point
            return exc
        raise AssertionError("no error")

    unopenable = raised(lambda: sqlite3.connect(str(tmp_path / "missing" / "db.sqlite3")))
    assert isinstance(unopenable, OperationalError) and database_unreachable(unopenable)
    path = str(tmp_path / "db.sqlite3")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    waiter = sqlite3.connect(path, timeout=0.05, isolation_level=None)
    locked = raised(lambda: waiter.execute("BEGIN IMMEDIATE"))
    assert "database is locked" in str(locked) and not database_unreachable(locked)
    missing = raised(lambda: waiter.execute("SELECT * FROM no_such_table"))
    assert isinstance(missing, OperationalError) and not database_unreachable(missing)
    holder.execute("ROLLBACK")
    assert database_unreachable(InterfaceError("connection already closed"))
    assert not database_unreachable(ValueError("not a database error"))

    import psycopg

    refused = OperationalError("connection refused")
    refused.__cause__ = psycopg.OperationalError("connection failed: Connection refused")
    assert database_unreachable(refused)  # no SQLSTATE: the client could not connect
    deadlock = OperationalError("deadlock detected")
    deadlock.__cause__ = psycopg.errors.DeadlockDetected("deadlock detected")
    assert not database_unreachable(deadlock)
    shutdown = OperationalError("terminating connection due to administrator command")
    shutdown.__cause__ = psycopg.errors.AdminShutdown("terminating connection")
    assert database_unreachable(shutdown)


def test_a_locked_sqlite_database_is_an_error_not_unavailable(project, labelers, client_for):
    """A lock held past the busy timeout answers 500 (logged with its traceback), not 503."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's lock")
    add_images(project, 1)
    phase = open_calibration_1(project, size=1, cal1=1)
    api = client_for(labelers[0].user)
    api.raise_request_exception = False
    name = connection.settings_dict["NAME"]
    locker = sqlite3.connect(str(name), uri=str(name).startswith("file:"), isolation_level=None, timeout=0.1)
    try:
        locker.execute("BEGIN EXCLUSIVE")
        locker.execute("DELETE FROM labeling_scale WHERE 1 = 0")  # take the write lock
        r = api.get(f"/api/phases/{phase.id}/next/")
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert r.status_code == 500, (r.status_code, r.content[:200])
