"""Shared set-up for phase and label tests: a project with images, a lead and labelers."""

import contextlib
import itertools
import uuid

from labeling.models import Phase
from labeling.services.phases import calibration_configure, phase_get, phase_open
from tests.factories import make_image

_colours = itertools.count()


def add_images(project, n: int, *, subjects: int | None = None):
    from labeling.models import Subject

    images = []
    for _ in range(n):
        i = next(_colours)
        subject = None
        if subjects:
            subject, _ = Subject.objects.get_or_create(project=project, external_id=f"S{len(images) % subjects}")
        images.append(make_image(project, colour=(i % 256, (i // 256) % 256, 77), subject=subject))
    return images


def add_box_images(project, n: int, *, per_photo: int = 3):
    """``n`` items that are people's boxes in group photos (``per_photo`` side by side in each), each with its
    own subject (issue 23)."""
    from labeling.models import Subject
    from labeling.services.images import image_create_from_bytes
    from tests.factories import png_bytes

    images = []
    while len(images) < n:
        i = next(_colours)
        data = png_bytes(colour=(i % 256, (i // 256) % 256, 177), size=(40 * per_photo, 48))
        for k in range(min(per_photo, n - len(images))):
            subject, _ = Subject.objects.get_or_create(project=project, external_id=f"P{i}-{k}")
            images.append(
                image_create_from_bytes(
                    project=project,
                    filename=f"group-{i}.png",
                    data=data,
                    subject=subject,
                    external_id=f"group-{i}#{k}",
                    box=(40 * k + 5, 4, 30, 40),
                )
            )
    return images


def open_calibration_1(project, *, size=6, cal1=6, repeated=0, labels_per_image=4) -> Phase:
    calibration_configure(project=project, size=size, calibration_1_size=cal1, n_repeated=repeated, seed=42)
    return phase_open(phase=phase_get(project, Phase.Kind.CALIBRATION_1), labels_per_image=labels_per_image)


def submit(phase, labeler, image_id, tones=(5,), **kwargs):
    from labeling.services.labels import label_submit

    kwargs.setdefault("client_id", uuid.uuid4())
    return label_submit(phase=phase, labeler=labeler, image_id=image_id, tones=list(tones), **kwargs)


def label_all(phase, labeler, tone=5):
    for a in phase.assignments.filter(labeler=labeler, done_at__isnull=True).order_by("position"):
        submit(phase, labeler, a.image_id, tones=[tone])


@contextlib.contextmanager
def celery_conf(**values):
    """Celery settings for the block (``broker_url=...``, ``task_always_eager=...``), then exactly as before.

    Each is set under its own name and its Django-namespaced twin (``CELERY_BROKER_URL``): Celery 5.6 reads
    the namespaced key first, and from the Django settings while no override is set, so setting only the
    short name did nothing in CI's real-services run. On leaving, the overrides this set are removed (or
    put back as they were), never frozen at the value read under some test's settings.
    """
    from config.celery import app

    changes = app.conf.changes
    keys = [name for key in values for name in (key, "CELERY_" + key.upper())]
    saved = {key: changes[key] for key in keys if key in changes}
    for key, value in values.items():
        changes[key] = changes["CELERY_" + key.upper()] = value
    try:
        yield
    finally:
        for key in keys:
            if key in saved:
                changes[key] = saved[key]
            else:
                changes.pop(key, None)


def eager(value: bool):
    """Celery runs tasks in this process (True) or sends them (False) inside the block (:func:`celery_conf`)."""
    return celery_conf(task_always_eager=value)


def run_tasks_here(monkeypatch) -> None:
    """For one test: Celery runs tasks in this process, even with CI's real worker (see :func:`eager`;
    undone by ``monkeypatch``, which removes the overrides it added)."""
    from config.celery import app

    for key in ("task_always_eager", "CELERY_TASK_ALWAYS_EAGER"):
        monkeypatch.setitem(app.conf.changes, key, True)


def shared_world(name: str, build, *, private_media: bool = False):
    """Two fixtures for a world built once per module instead of once per test: ``_shared_world`` (module
    scope) and ``<name>`` (the one tests ask for). Bind both at module level, one world per module:
    ``_shared_world, noisy_study = shared_world("noisy_study", build)``.

    ``build()`` runs once, the first time a test of the module asks for ``<name>``, inside a transaction
    rolled back after the module's last test, with tasks run in this process (``run_tasks_here``: a worker
    would not see rows that are never committed) and the module's own media folder; each test runs in a
    savepoint inside it (the ``db`` fixture), so it sees the world as built whatever an earlier test wrote,
    and gets a deep copy of what ``build()`` returned (a test that changes an object changes its copy only).
    A test outside the world that runs after it runs inside that transaction too: the world's usernames must
    differ from the ``lead`` fixture's and the other usernames of the module, and such a test must ask for its
    own project's rows (``Image.objects.filter(project=project)``, not ``Image.objects.count()``): xdist may
    run it after the world is built (each world module passes with its tests in reverse order, checked in
    session 39).
    Files are not rolled back: with ``private_media`` each test gets its own copy of the world's media folder
    (``tmp_path / "media"``, a few milliseconds) for tests that delete or write files (an erasure, a second
    release whose id an earlier, rolled-back test also used).
    The pattern of ``test_authorization_matrix`` and ``test_archived_read_only``, in one place."""
    import copy
    import shutil

    import pytest

    @pytest.fixture(scope="module", name="_shared_world")
    def built(django_db_setup, django_db_blocker, tmp_path_factory):
        from django.db import transaction
        from django.test import override_settings

        media = tmp_path_factory.mktemp(name) / "media"
        with (
            pytest.MonkeyPatch.context() as monkeypatch,
            django_db_blocker.unblock(),
            override_settings(MEDIA_ROOT=str(media)),
            transaction.atomic(),
        ):
            run_tasks_here(monkeypatch)
            yield media, build()
            transaction.set_rollback(True)

    @pytest.fixture(name=name)
    def world(_shared_world, db, settings, tmp_path):
        media, value = _shared_world
        if private_media:
            mine = tmp_path / "media"
            if media.is_dir():
                shutil.copytree(media, mine, dirs_exist_ok=True)
            media = mine
        settings.MEDIA_ROOT = str(media)
        return copy.deepcopy(value)

    return built, world
