"""Issue 23: the embedded default (SQLite, ``bin/demo``) holds a small real study under concurrency.

A real server (``manage.py runserver``, as ``bin/demo`` starts it, with the demo's settings) on a free port
serves a SQLite file in a temporary folder. Ten labelers submit their labels at the same moment (one thread
each, released together), and a lead double-clicks an upload (two identical import POSTs at once). Every
answer is checked: none is a 503 "database unavailable", every label is stored exactly once, and no import
is left failed. Before the SQLite ``OPTIONS`` of ``config.settings.base`` (a busy timeout, ``BEGIN
IMMEDIATE`` transactions, WAL) about one submit in seven answered 503 here.
"""

import json
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest
import requests

# A server in a subprocess and 70 concurrent submits: the slow tier (CI runs it, bin/test --fast skips it).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
LABELERS = 10
IMAGES = 7  # each labeler labels every image of calibration 1: 70 submits

SETUP = f"""
import json, django
django.setup()
from django.contrib.auth.models import Permission
from rest_framework.authtoken.models import Token
from labeling.models import Membership
from tests.factories import MembershipFactory, ProjectFactory, UserFactory
from tests.labeling.helpers import add_images, open_calibration_1

lead = UserFactory(username="lead")
lead.user_permissions.add(Permission.objects.get(codename="add_project", content_type__app_label="labeling"))
project = ProjectFactory(created_by=lead)
members = [
    MembershipFactory(project=project, user=UserFactory(username=f"labeler{{i}}"), pseudonym=f"L{{i}}")
    for i in range({LABELERS})
]
add_images(project, {IMAGES})
phase = open_calibration_1(project, size={IMAGES}, cal1={IMAGES}, labels_per_image={LABELERS})
out = {{
    "project": project.id,
    "phase": phase.id,
    "lead": Token.objects.get_or_create(user=lead)[0].key,
    "labelers": [
        {{
            "token": Token.objects.get_or_create(user=m.user)[0].key,
            "images": list(phase.assignments.filter(labeler=m).order_by("position").values_list("image_id", flat=True)),
        }}
        for m in members
    ],
}}
print("SETUP" + json.dumps(out))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    """The demo's settings on a SQLite file of its own, served by ``runserver`` (threaded, as in ``bin/demo``)."""
    work = Path(tempfile.mkdtemp(prefix="fairtone-sqlite-"))
    db = work / "fairtone.sqlite3"
    (work / "media").mkdir()
    (work / "static").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_", "CELERY_", "REDIS_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.local",
        DJANGO_DEBUG="0",
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        DJANGO_STATIC_ROOT=str(work / "static"),
        DATABASE_URL=f"sqlite:///{db}",
        FAIRTONE_MEDIA_ROOT=str(work / "media"),
        PYTHONPATH=str(ROOT),
    )
    run = dict(cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    migrated = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], **run)
    assert migrated.returncode == 0, migrated.stderr[-2000:]
    made = subprocess.run([sys.executable, "-c", SETUP], **run)
    assert made.returncode == 0, made.stderr[-2000:]
    study = json.loads(made.stdout.split("SETUP", 1)[1])
    port = free_port()
    log = open(work / "server.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if requests.get(f"{base}/healthz", timeout=2).status_code == 200:
                break
        except requests.ConnectionError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, (work / "server.log").read_text()[-2000:]
        time.sleep(0.2)
    try:
        yield {"base": base, "db": db, "log": work / "server.log", **study}
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def test_ten_labelers_at_once_and_a_double_clicked_upload_get_no_503_and_lose_nothing(server):
    base, phase = server["base"], server["phase"]
    barrier = threading.Barrier(LABELERS + 2)
    answers: list[tuple[str, int, str]] = []
    sent: list[str] = []
    lock = threading.Lock()

    def labeler(who: dict):
        session = requests.Session()
        session.headers["Authorization"] = f"Token {who['token']}"
        barrier.wait()
        for image_id in who["images"]:
            client_id = str(uuid.uuid4())
            with lock:
                sent.append(client_id)
            r = session.post(
                f"{base}/api/phases/{phase}/labels/",
                json={"client_id": client_id, "image": image_id, "tones": [4]},
                timeout=120,
            )
            with lock:
                answers.append(("label", r.status_code, r.text[:200]))

    upload = [(f"double-{i}.png", _png(i)) for i in range(3)]

    def uploader():
        barrier.wait()
        r = requests.post(
            f"{base}/api/projects/{server['project']}/imports/",
            headers={"Authorization": f"Token {server['lead']}"},
            files=[("files", (name, data, "image/png")) for name, data in upload],
            timeout=120,
        )
        with lock:
            answers.append(("import", r.status_code, r.text[:300]))

    threads = [threading.Thread(target=labeler, args=(who,)) for who in server["labelers"]]
    threads += [threading.Thread(target=uploader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)

    unavailable = [a for a in answers if a[1] == 503]
    assert len(answers) == LABELERS * IMAGES + 2
    assert not unavailable, f"{len(unavailable)} of {len(answers)} answers were 503: {unavailable[:3]}"
    others = [a for a in answers if a[1] != 201]
    assert not others, f"{len(others)} of {len(answers)} answers were not 201: {others[:3]}"

    with sqlite3.connect(server["db"]) as db:
        stored = [
            row[0]
            for row in db.execute(
                "SELECT r.client_id FROM labeling_labelrevision r JOIN labeling_label l ON l.id = r.label_id"
                " WHERE l.phase_id = ?",
                (phase,),
            )
        ]
        assert sorted(uuid.UUID(c).hex for c in stored) == sorted(uuid.UUID(c).hex for c in sent)
        ((labels, pairs),) = db.execute(
            "SELECT COUNT(*), COUNT(DISTINCT labeler_id || '-' || image_id) FROM labeling_label WHERE phase_id = ?",
            (phase,),
        )
        assert labels == pairs == LABELERS * IMAGES
        statuses = [row[0] for row in db.execute("SELECT status FROM labeling_importbatch")]
        assert statuses and "failed" not in statuses and "running" not in statuses, statuses
        # The double click: each photo stored once, the other upload reports it as a duplicate.
        names = [
            row[0]
            for row in db.execute("SELECT original_filename FROM labeling_image WHERE external_id LIKE 'double-%'")
        ]
        assert sorted(names) == sorted(name for name, _ in upload)


def _png(i: int) -> bytes:
    from tests.factories import png_bytes

    return png_bytes(colour=(10 + i, 200, 30 + i), size=(80, 60))
