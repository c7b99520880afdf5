"""Issue 13, item 1 with the real services: a Celery worker SIGKILLed mid-run, and every job still ends.

Runs in CI's real-services stage (``FAIRTONE_REAL_WORKER=1``: PostgreSQL shared with worker processes)
where ``redis-server`` exists. The test starts its OWN Redis on a free port and its OWN worker on it, so
the machine's shared Redis and CI's worker are never stopped: a baseline run starts, the whole private
worker (main process and children) is killed with SIGKILL after its first results, the job is then left
"running" by everything but the sweeper, which gives it up at its deadline with the unfinished images
recorded as failed; a new worker finishes them through "retry failed images".
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
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

    conf = current_app.conf
    saved = conf.broker_url, conf.broker_write_url, conf.broker_read_url

    def point_at(urls):
        conf.broker_url, conf.broker_write_url, conf.broker_read_url = urls
        current_app._pool = None
        current_app.amqp._producer_pool = None

    def use_private_broker():
        point_at((broker, broker, broker))

    try:
        yield use_private_broker, start_worker, kill_worker
    finally:
        point_at(saved)
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
    assert retry.total == lost
    finished = wait_for(
        lambda: Job.objects.filter(pk=retry.pk, status__in=[Job.Status.DONE, Job.Status.FAILED]).first(),
        "the retry",
    )
    assert finished.done == lost and finished.failed == 0
    # Every image has exactly one result for these parameters: nothing lost, nothing doubled.
    rows = ImageBaseline.objects.filter(image__project=project, parameters_hash=job.parameters["parameters_hash"])
    assert rows.count() == n and rows.filter(status=ImageBaseline.Status.OK).count() == n
