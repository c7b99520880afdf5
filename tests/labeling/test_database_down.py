"""Issue 13, item 9: while the database is unreachable, requests answer 503 with Retry-After, not 500.

The failure is real: on SQLite (the embedded stage) another connection holds an exclusive lock on the
shared test database, so the app's queries fail with ``OperationalError: database table is locked``; on
PostgreSQL (the real-services stage) the app's connection is pointed at a closed port, as while the
server restarts. Afterwards the same requests succeed again.
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
        name = connection.settings_dict["NAME"]
        uri = str(name).startswith("file:")
        locker = sqlite3.connect(str(name), uri=uri, isolation_level=None, timeout=0.1)
        try:
            locker.execute("BEGIN EXCLUSIVE")
            locker.execute("DELETE FROM labeling_scale WHERE 1 = 0")  # take the write lock
            yield
        finally:
            locker.execute("ROLLBACK")
            locker.close()
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
