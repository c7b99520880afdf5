import gc
import os
import time

import pytest

from tests.factories import ProjectFactory, make_labelers, make_lead


@pytest.fixture
def lead(db):
    """A project lead: may create projects (the ``labeling.add_project`` permission), not staff."""
    return make_lead()


@pytest.fixture
def project(db, lead):
    return ProjectFactory(created_by=lead)  # the creator becomes its lead


@pytest.fixture
def labelers(project):
    return make_labelers(project)


def pytest_collection_finish(session):
    """Move everything alive after collection (Django, the app, every test module) out of the garbage
    collector's sight: it is never freed before the run ends, and a full collection (a release build makes
    several: ``releases.memory.memory_release``) would otherwise walk all of it, about 0.2 s each time in a
    test process. Objects made later are collected as before. https://docs.python.org/3/library/gc.html#gc.freeze"""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session")
def _sqlite_test_db_template():
    """SQLite's test database restored from a migrated template (``tests.sqlite_template``)."""
    from tests.sqlite_template import install

    install()


@pytest.fixture(scope="session")
def django_db_setup(_sqlite_test_db_template, django_db_setup):
    """pytest-django's test databases (SQLite's from the migrated template), then the same freeze for what
    their setup left alive."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _empty_cache():
    """Each test starts with an empty cache (ids can repeat across tests in a rolled-back database)."""
    from django.core.cache import cache

    from labeling.services.queue import debounce_forget

    cache.clear()
    debounce_forget()  # and the debounce windows this process remembers (services.queue)
    yield


@pytest.fixture
def client_for(db):
    """``client_for(user)``: an API client signed in with ``user``'s token."""
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    def make(user) -> APIClient:
        client = APIClient()
        token, _ = Token.objects.get_or_create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
        return client

    return make


@pytest.fixture(autouse=True)
def _worker_settled(request, _django_db_marker):
    """CI stage 2 (a real worker): a transactional test's new images get their display images and baselines
    from the worker after the test body. Wait for that (bounded) before the database is flushed: a flush
    racing the worker's row locks can deadlock (seen once in CI). Nothing to do in the embedded run."""
    if os.environ.get("FAIRTONE_REAL_WORKER") != "1":
        yield
        return
    marker = request.node.get_closest_marker("django_db")
    transactional = bool(marker and marker.kwargs.get("transaction"))
    if "transactional_db" in request.fixturenames or "live_server" in request.fixturenames:
        request.getfixturevalue("transactional_db")  # set up before this fixture: flushed after it waits
        transactional = True
    yield
    if not transactional:
        return
    from labeling.models import Image

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            busy = (
                Image.objects.filter(derivative_status=Image.DerivativeStatus.PENDING).exists()
                or Image.objects.filter(derivative_status=Image.DerivativeStatus.READY, baselines__isnull=True).exists()
            )
        except Exception:  # noqa: BLE001 - a test that broke its connection: let the flush report it
            return
        if not busy:
            return
        time.sleep(0.2)


@pytest.fixture(autouse=True)
def _audit_log_flushable(request, _django_db_marker):
    """On SQLite the audit log's triggers refuse ``DELETE`` (``labeling/migrations/0015``), and Django's flush of a
    transactional test deletes row by row: lift the guard for the flush only (PostgreSQL's flush is a TRUNCATE,
    which the guard leaves to the database's owner)."""
    marker = request.node.get_closest_marker("django_db")
    transactional = bool(marker and marker.kwargs.get("transaction"))
    if "transactional_db" in request.fixturenames or "live_server" in request.fixturenames:
        request.getfixturevalue("transactional_db")  # set up before this fixture: its flush runs after this
        transactional = True
    yield
    if not transactional:
        return
    import importlib

    from django.db import connection

    if connection.vendor != "sqlite":
        return
    guard = importlib.import_module("labeling.migrations.0015_audit_log_append_only")
    with connection.cursor() as cursor:
        for statement in guard.SQLITE_DROP:
            cursor.execute(statement)
        cursor.execute(f"DELETE FROM {guard.TABLE}")
        for statement in guard.SQLITE_CREATE:
            cursor.execute(statement)


@pytest.fixture
def coefficients_from_few_images(monkeypatch):
    """Lower the floor under agreement coefficients (30 units, ``numbers.COEFFICIENT_MIN_UNITS``) to 2, for
    tests of the computation itself on small fixtures; the floor is tested at its own value."""
    from labeling.services.consensus import numbers

    monkeypatch.setattr(numbers, "COEFFICIENT_MIN_UNITS", 2)
