"""Issue 13 with the real services: a Celery worker SIGKILLed mid-run (every job still ends), and a
PostgreSQL restarted under concurrent label submits with client retries (nothing lost or doubled).

Runs in CI's real-services stage (``FAIRTONE_REAL_WORKER=1``: PostgreSQL shared with worker processes)
where ``redis-server`` exists. The test starts its OWN Redis on a free port and its OWN worker on it, so
the machine's shared Redis and CI's worker are never stopped: a baseline run starts, the whole private
worker (main process and children) is killed with SIGKILL after its first results, the job is then left
"running" by everything but the sweeper, which gives it up at its deadline with the unfinished images
recorded as failed; a new worker finishes them through "retry failed images".

The PostgreSQL test starts its OWN cluster (``initdb`` of the installed binaries into a temporary
folder, run as the ``postgres`` user when the test runs as root) on a free port, migrates and seeds
it, serves the app from it with gunicorn, and restarts it (``pg_ctl restart -m fast``, then a stop
held for a moment and a start) while labelers submit; the machine's shared PostgreSQL is never touched.
"""

import contextlib
import glob
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from celery import current_app
from django.db import connection
from django.utils import timezone

from labeling.models import ImageBaseline, Job
from labeling.services import baselines as svc
from labeling.services import jobs as job_services
from labeling.services.images import image_create_from_bytes
from tests.factories import ProjectFactory, UserFactory, png_bytes

REAL_WORKER = os.environ.get("FAIRTONE_REAL_WORKER") == "1"
ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.services,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not REAL_WORKER, reason="needs PostgreSQL shared with worker processes (.ci/run stage 2)"),
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs the redis-server binary"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition, what: str, seconds: float = 90):
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds} s waiting for {what}")
        time.sleep(0.25)


@pytest.fixture
def private_stack():
    """A private Redis and a way to start (and SIGKILL) a private worker on it; Celery here sends to it."""
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="fairtone-fault-")
    redis = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for(lambda: _listening(port), "the private redis-server", 10)
    broker = f"redis://127.0.0.1:{port}/0"
    db = connection.settings_dict
    env = {
        **os.environ,
        "CELERY_BROKER_URL": broker,
        "DATABASE_URL": f"postgres://{db['USER']}:{db.get('PASSWORD') or ''}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "DATABASE_CONN_MAX_AGE": "0",
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
    }
    workers = []

    def start_worker():
        log = open(Path(workdir) / f"worker{len(workers)}.log", "wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--concurrency=1", "--without-gossip"]
            + ["--without-mingle", "--without-heartbeat", "-n", f"fault{len(workers)}@%h", "--loglevel=INFO"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: SIGKILL reaches the children too
        )
        workers.append(proc)
        return proc

    def kill_worker(proc):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    from tests.labeling.helpers import celery_conf

    stack = contextlib.ExitStack()

    def fresh_pools():
        current_app._pool = None
        current_app.amqp._producer_pool = None

    def use_private_broker():
        stack.enter_context(celery_conf(broker_url=broker, broker_write_url=broker, broker_read_url=broker))
        fresh_pools()

    try:
        yield use_private_broker, start_worker, kill_worker
    finally:
        stack.close()
        fresh_pools()
        for proc in workers:
            if proc.poll() is None:
                kill_worker(proc)
        for log in sorted(Path(workdir).glob("worker*.log")):  # shown by pytest when the test failed
            print(f"--- {log.name}\n" + log.read_text(errors="replace")[-3000:])
        redis.kill()
        redis.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
        return True
    except OSError:
        return False


def test_a_run_whose_worker_is_sigkilled_ends_and_its_retry_finishes(private_stack):
    use_private_broker, start_worker, kill_worker = private_stack
    project = ProjectFactory(created_by=UserFactory(username="lead-faults"))
    n = 120
    for i in range(n):  # their derivatives go to CI's worker, as usual
        image_create_from_bytes(project=project, filename=f"f{i}.png", data=png_bytes((100 + i, 110, 90)))
    use_private_broker()
    job = svc.baseline_run_start(project=project, parameters={"min_skin_fraction": 0.05})
    worker = start_worker()
    wait_for(lambda: ImageBaseline.objects.filter(job=job).count() >= 3, "the first results", 30)
    kill_worker(worker)
    time.sleep(2)
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING and job.done + job.failed < n  # stuck without the sweeper

    deadline = job_services.job_deadline_seconds(Job.Kind.BASELINE)
    report = job_services.jobs_sweep(now=timezone.now() + timedelta(seconds=deadline + 1))
    assert report["abandoned"] == 1
    job.refresh_from_db()
    assert job.status in (Job.Status.DONE, Job.Status.FAILED)
    assert job.done + job.failed == n and job.failed > 0
    lost = job.failed

    start_worker()
    retry = svc.baseline_retry_failed(job=job)
    # Every image still failed, and no other: an image can be finished between the sweep and the retry by
    # other work of CI's own worker (114 of 116 once under load), so not always all the lost ones.
    assert 0 < retry.total <= lost
    finished = wait_for(
        lambda: Job.objects.filter(pk=retry.pk, status__in=[Job.Status.DONE, Job.Status.FAILED]).first(),
        "the retry",
    )
    assert finished.done == retry.total and finished.failed == 0
    # Every image has exactly one result for these parameters: nothing lost, nothing doubled.
    rows = ImageBaseline.objects.filter(image__project=project, parameters_hash=job.parameters["parameters_hash"])
    assert rows.count() == n and rows.filter(status=ImageBaseline.Status.OK).count() == n


# --------------------------------------------------------------------------- PostgreSQL restarted under load


def _pg_bin() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[-3]))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


class PrivatePostgres:
    """A PostgreSQL cluster of this test's own: ``initdb`` into ``workdir``, served on ``port``."""

    def __init__(self, workdir: Path, port: int):
        self.bin, self.port = _pg_bin(), port
        self.data, self.log = workdir / "data", workdir / "postgres.log"
        self.as_postgres = os.geteuid() == 0  # initdb refuses root
        if self.as_postgres:
            shutil.chown(workdir, "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
        self.options = f"-p {port} -k {workdir} -c listen_addresses=127.0.0.1 -c fsync=off"

    def _run(self, tool: str, *args: str) -> None:
        cmd = [os.path.join(self.bin, tool), *args]
        if self.as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)

    def pg_ctl(self, action: str, *extra: str) -> None:
        opts = ["-o", self.options, "-l", str(self.log)] if action in ("start", "restart") else []
        self._run("pg_ctl", action, "-D", str(self.data), "-w", *opts, *extra)

    def url(self, db: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{db}"


#: Run in a subprocess against the private cluster: migrate, then a project, labelers with tokens and
#: images, and calibration 1 open with every labeler on every image. Prints what the clients need.
SEED = """
import json, sys
import django
django.setup()
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from labeling.models import Membership
from labeling.services.images import image_create_from_bytes
from labeling.services.phases import calibration_configure, phase_open
from labeling.services.projects import project_create
from tests.factories import png_bytes

n_labelers, n_images = int(sys.argv[1]), int(sys.argv[2])
call_command("migrate", verbosity=0)
User = get_user_model()
lead = User.objects.create(username="pg-lead", is_staff=True)
project = project_create(name="PostgreSQL restart", created_by=lead, labels_per_image=n_labelers)
for i in range(n_images):
    image_create_from_bytes(project=project, filename=f"pg{i}.png", data=png_bytes((60 + i, 100, 90), size=(16, 12)))
tokens = []
for i in range(n_labelers):
    user = User.objects.create(username=f"pg-l{i}")
    Membership.objects.create(project=project, user=user, role=Membership.Role.LABELER, pseudonym=f"P{i}")
    tokens.append(Token.objects.create(user=user).key)
cal1, _ = calibration_configure(project=project, size=n_images, calibration_1_size=n_images, n_repeated=0, seed=1)
cal1 = phase_open(phase=cal1, labels_per_image=n_labelers)
print(json.dumps({"phase": cal1.id, "tokens": tokens, "images": list(project.images.values_list("id", flat=True))}))
"""


class Submitter(threading.Thread):
    """One labeler: each image submitted once with its own client id, retried (same id) until stored.

    A 503 or a broken connection is retried after a short pause, as the labeling page does; anything
    else that is not 200/201 is recorded and ends the labeler's work (the test then fails)."""

    def __init__(self, port: int, phase: int, token: str, images: list[int], seed: int):
        super().__init__(daemon=True)
        self.port, self.phase, self.token, self.images = port, phase, token, images
        self.rng = random.Random(seed)
        self.stored: dict[int, str] = {}  # image -> client id, once answered 200/201
        self.answers: dict[int, int] = {}  # status -> count
        self.retries = self.connection_errors = 0
        self.unexpected: list[str] = []

    def post(self, conn, body: bytes):
        conn.request(
            "POST",
            f"/api/phases/{self.phase}/labels/",
            body,
            {"Authorization": f"Token {self.token}", "Content-Type": "application/json", "Accept": "application/json"},
        )
        response = conn.getresponse()
        return response.status, response.read()

    def run(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        give_up = time.monotonic() + 120
        for image in self.images:
            client_id = str(uuid.uuid4())
            body = json.dumps({"client_id": client_id, "image": image, "tones": [self.rng.randint(1, 10)]}).encode()
            while True:
                try:
                    status, content = self.post(conn, body)
                except (OSError, http.client.HTTPException):
                    self.connection_errors += 1
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                    status, content = None, b""
                if status is not None:
                    self.answers[status] = self.answers.get(status, 0) + 1
                if status in (200, 201):
                    self.stored[image] = client_id
                    break
                if status not in (None, 503) or time.monotonic() > give_up:
                    self.unexpected.append(f"image {image}: {status} {content[:200]!r}")
                    conn.close()
                    return
                self.retries += 1
                time.sleep(0.05 + 0.1 * self.rng.random())
            time.sleep(0.02 * self.rng.random())
        conn.close()


@pytest.mark.skipif(_pg_bin() is None, reason="needs the PostgreSQL server binaries (initdb, pg_ctl)")
def test_label_submits_through_a_postgresql_restart_lose_nothing_and_double_nothing():
    import psycopg

    n_labelers, n_images = 8, 25
    workdir = Path(tempfile.mkdtemp(prefix="fairtone-pg-"))
    media = workdir / "media"
    media.mkdir()
    pg = PrivatePostgres(workdir, free_port())
    gunicorn = None
    try:
        pg.pg_ctl("start")
        with psycopg.connect(pg.url("postgres"), autocommit=True) as admin:
            admin.execute("CREATE DATABASE fairtone")
        env = {k: v for k, v in os.environ.items() if k not in ("CELERY_BROKER_URL", "REDIS_CACHE_URL")}
        env.update(
            DATABASE_URL=pg.url("fairtone"),
            DJANGO_SETTINGS_MODULE="config.settings.test",
            FAIRTONE_MEDIA_ROOT=str(media),
            PYTHONPATH=str(ROOT),
        )
        seeded = subprocess.run(
            [sys.executable, "-c", SEED, str(n_labelers), str(n_images)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert seeded.returncode == 0, seeded.stderr[-3000:]
        fixture = json.loads(seeded.stdout.strip().splitlines()[-1])

        port = free_port()
        log = workdir / "gunicorn.log"
        gunicorn = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "config.wsgi", "-w", "2", "-k", "gthread", "--threads", "4"]
            + ["-b", f"127.0.0.1:{port}", "--error-logfile", str(log), "--log-level", "warning"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: _healthy(port), "gunicorn", 60)

        submitters = [
            Submitter(port, fixture["phase"], token, random.Random(i).sample(fixture["images"], n_images), seed=i)
            for i, token in enumerate(fixture["tokens"])
        ]
        total = n_labelers * n_images
        for submitter in submitters:
            submitter.start()

        def stored() -> int:
            return sum(len(s.stored) for s in submitters)

        # A restart as an operator makes it, then an outage held long enough for every labeler to meet it.
        wait_for(lambda: stored() >= total // 5, "the first labels", 60)
        pg.pg_ctl("restart", "-m", "fast")
        wait_for(lambda: stored() >= total // 2, "labels after the restart", 60)
        pg.pg_ctl("stop", "-m", "fast")
        time.sleep(1.5)
        pg.pg_ctl("start")
        for submitter in submitters:
            submitter.join(timeout=120)
        assert not any(s.is_alive() for s in submitters), "a labeler never finished"

        answers: dict[int, int] = {}
        for submitter in submitters:
            for status, n in submitter.answers.items():
                answers[status] = answers.get(status, 0) + n
        retries = sum(s.retries for s in submitters)
        broken = sum(s.connection_errors for s in submitters)
        print(
            f"\nPostgreSQL restart: {total} labels, answers {answers}, {retries} retries ({broken} broken connections)"
        )
        assert [u for s in submitters for u in s.unexpected] == []
        assert 500 not in answers and set(answers) <= {200, 201, 503}, answers

        with psycopg.connect(pg.url("fairtone")) as db:
            labels = db.execute(
                "SELECT l.image_id, u.username, count(*) OVER (PARTITION BY l.image_id, l.labeler_id), "
                "(SELECT count(*) FROM labeling_labelrevision r WHERE r.label_id = l.id), "
                "(SELECT string_agg(r.client_id::text, ',') FROM labeling_labelrevision r WHERE r.label_id = l.id) "
                "FROM labeling_label l JOIN labeling_membership m ON m.id = l.labeler_id "
                "JOIN auth_user u ON u.id = m.user_id WHERE l.phase_id = %s",
                [fixture["phase"]],
            ).fetchall()
        expected = {(image, f"pg-l{i}"): s.stored[image] for i, s in enumerate(submitters) for image in s.stored}
        assert len(expected) == total  # every answer stored in the end (after its retries)
        found = {(image, username): client_ids for image, username, _n, _revisions, client_ids in labels}
        assert len(labels) == total and set(found) == set(expected)  # 0 lost
        assert all(n == 1 and revisions == 1 for _i, _u, n, revisions, _c in labels)  # 0 duplicated
        assert found == expected  # each stored once, under the client id its answer named
    finally:
        if gunicorn is not None:
            gunicorn.terminate()
            try:
                gunicorn.wait(timeout=20)
            except subprocess.TimeoutExpired:
                gunicorn.kill()
                gunicorn.wait()
            if (workdir / "gunicorn.log").exists():
                print("--- gunicorn.log\n" + (workdir / "gunicorn.log").read_text(errors="replace")[-3000:])
        try:
            pg.pg_ctl("stop", "-m", "immediate")
        except subprocess.CalledProcessError:
            pass  # already stopped
        shutil.rmtree(workdir, ignore_errors=True)


def _healthy(port: int) -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        conn.request("GET", "/healthz")
        ok = conn.getresponse().status == 200
        conn.close()
        return ok
    except OSError:
        return False
