"""Issue 13, item 2: labeling goes on while Redis is down.

Storing a label needs only the database: cache errors are misses (``config.cache``), a task that
cannot be sent is recorded and sent later (``services.queue``), and ``/readyz`` tells a degraded
app (cache, broker or worker down) from one that cannot work (database down).

Redis "down" here is real: a closed port (nothing listens), or a private ``redis-server`` on its own
port that the test stops and starts again (skipped where the binary is missing). The machine's shared
Redis is never touched.
"""

import shutil
import socket
import subprocess
import tempfile
import time
import uuid

import pytest
from celery import current_app
from django.test import override_settings
from rest_framework.test import APIClient

from labeling.models import PendingTask
from labeling.services import queue
from tests.labeling.helpers import add_images, celery_conf, eager, open_calibration_1

pytestmark = pytest.mark.django_db


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_cache(port: int) -> dict:
    """The cache entry ``config.settings.base`` makes from ``REDIS_CACHE_URL``, on ``port``."""
    return {
        "default": {
            "BACKEND": "config.cache.ResilientRedisCache",
            "LOCATION": f"redis://127.0.0.1:{port}/0",
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
    }


@pytest.fixture
def labeling_session(project, labelers, client_for):
    add_images(project, 30)
    phase = open_calibration_1(project, size=30, cal1=30, labels_per_image=4)
    m = labelers[0]
    images = list(phase.assignments.filter(labeler=m).order_by("position").values_list("image_id", flat=True))
    return phase, m, images


def submit_all(api, phase, image_ids) -> list[int]:
    codes = []
    for image_id in image_ids:
        r = api.post(
            f"/api/phases/{phase.id}/labels/",
            {"client_id": str(uuid.uuid4()), "image": image_id, "tones": [5]},
            format="json",
        )
        codes.append(r.status_code)
        codes.append(api.get(f"/api/phases/{phase.id}/next/").status_code)
    return codes


def test_label_submits_and_sign_in_work_with_the_cache_unreachable(labeling_session, client):
    phase, m, images = labeling_session
    with override_settings(CACHES=redis_cache(free_port())):
        from rest_framework.authtoken.models import Token

        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=m.user)[0].key}")
        codes = submit_all(api, phase, images[:10])
        assert codes.count(201) == 10 and set(codes) == {200, 201}, codes
        # The sign-in page and the token endpoint (their rate lives in the cache) work too.
        assert client.post("/login/", {"username": m.user.username, "password": "pw-test-123"}).status_code == 302
        r = APIClient().post("/api/auth/token/", {"username": m.user.username, "password": "pw-test-123"})
        assert r.status_code == 200
        ready = client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["checks"]["cache"] == "down"
        assert ready.json()["status"] == "degraded"
    assert phase.labels.count() == 10


def start_private_redis(port: int, workdir: str) -> subprocess.Popen:
    """A ``redis-server`` of this test's own on ``port`` (no persistence), answering when returned."""
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("the private redis-server did not start")


@pytest.mark.slow  # starts and stops a private redis-server: CI runs it, bin/test --fast skips it
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs the redis-server binary")
def test_a_private_redis_stopped_and_started_during_labeling_loses_nothing(labeling_session):
    """Ten submits with the cache up, ten while its Redis is stopped, ten after it is back: 0 errors."""
    phase, m, images = labeling_session
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="fairtone-redis-")

    def start():
        return start_private_redis(port, workdir)

    redis = start()
    try:
        with override_settings(CACHES=redis_cache(port)):
            from django.core.cache import cache

            from config import cache as resilient

            api = APIClient()
            from rest_framework.authtoken.models import Token

            api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=m.user)[0].key}")
            up = submit_all(api, phase, images[:10])
            assert cache.get(f"membership:{m.user_id}:{phase.project_id}")  # Redis really served the cache
            redis.kill()
            redis.wait()
            down = submit_all(api, phase, images[10:20])
            redis = start()
            time.sleep(resilient.RETRY_AFTER_SECONDS)  # the cache tries Redis again after this
            back = submit_all(api, phase, images[20:30])
            assert cache.get(f"membership:{m.user_id}:{phase.project_id}")
    finally:
        redis.kill()
        redis.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    for codes in (up, down, back):
        assert codes.count(201) == 10 and set(codes) == {200, 201}, codes
    assert phase.labels.count() == 30


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs the redis-server binary")
def test_a_membership_deactivated_while_redis_hangs_is_not_served_stale_once_it_answers(labeling_session):
    """The membership's cache entry cannot be deleted while Redis hangs (its data kept): the delete is
    replayed when Redis answers again, and the entry would expire within 30 s anyway."""
    import os
    import signal

    import redis as redis_py
    from django.core.cache import cache
    from rest_framework.authtoken.models import Token

    from config import cache as resilient
    from labeling.api.authentication import TOKEN_CACHE_SECONDS
    from labeling.models import Membership
    from labeling.selectors import MEMBERSHIP_CACHE_SECONDS

    assert MEMBERSHIP_CACHE_SECONDS <= 30 and TOKEN_CACHE_SECONDS <= 30
    phase, m, images = labeling_session
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="fairtone-redis-")
    server = start_private_redis(port, workdir)
    direct = redis_py.Redis(host="127.0.0.1", port=port, socket_timeout=5)
    stopped = False
    try:
        with override_settings(CACHES=redis_cache(port)):
            api = APIClient()
            api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=m.user)[0].key}")
            assert submit_all(api, phase, images[:1]) == [201, 200]
            key = cache.make_key(f"membership:{m.user_id}:{phase.project_id}")
            assert direct.exists(key)  # the membership is served from Redis

            os.kill(server.pid, signal.SIGSTOP)  # Redis hangs: it keeps its data, nothing answers
            stopped = True
            assert cache.get("probe") is None  # a timeout: the cache counts Redis down for a while
            membership = Membership.objects.get(pk=m.pk)
            membership.is_active = False
            membership.save()  # its cache entry's delete cannot reach Redis: recorded
            assert resilient.missed_deletes(cache.server_id) >= 1
            os.kill(server.pid, signal.SIGCONT)
            stopped = False

            # Redis answers again with the stale entry in it; whatever happens, it expires within 30 s.
            assert direct.exists(key) and 0 < direct.pttl(key) <= MEMBERSHIP_CACHE_SECONDS * 1000
            token_key = cache.make_key(f"api-token:{Token.objects.get(user=m.user).key}")
            assert 0 < direct.pttl(token_key) <= TOKEN_CACHE_SECONDS * 1000
            cache._down_until = 0.0  # the retry interval is over (config.cache.RETRY_AFTER_SECONDS)
            r = api.post(
                f"/api/phases/{phase.id}/labels/",
                {"client_id": str(uuid.uuid4()), "image": images[1], "tones": [5]},
                format="json",
            )
            assert r.status_code in (403, 404), r.status_code  # the deactivated labeler is refused at once
            assert resilient.missed_deletes(cache.server_id) == 0
            assert cache.get(f"membership:{m.user_id}:{phase.project_id}") == {}  # re-read from the database
    finally:
        if stopped:
            os.kill(server.pid, signal.SIGCONT)
        server.kill()
        server.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    assert phase.labels.count() == 1


@pytest.fixture
def broker_down():
    """Celery pointed at a closed port, not eager: sending a task fails as it does during an outage."""

    def fresh_pools():
        current_app._pool = None
        current_app.amqp._producer_pool = None

    closed = f"redis://127.0.0.1:{free_port()}/0"
    with celery_conf(task_always_eager=False, broker_url=closed, broker_write_url=closed, broker_read_url=closed):
        fresh_pools()
        assert current_app.connection_for_write().as_uri().endswith(closed.split("@")[-1].split("//")[-1])
        yield
    fresh_pools()


def test_a_task_sent_while_the_broker_is_down_is_recorded_then_sent(
    broker_down, project, lead, django_capture_on_commit_callbacks
):
    from labeling.services.baselines import baseline_run_start

    add_images(project, 2)
    before = PendingTask.objects.count()
    with django_capture_on_commit_callbacks(execute=True):
        job = baseline_run_start(project=project, user=lead)  # sent when the transaction commits
    pending = list(PendingTask.objects.order_by("id"))[before:]
    assert [(p.name, p.args) for p in pending] == [(queue.BASELINE_RUN, [job.id])]
    assert pending[0].last_error == "OperationalError"
    # Still down: the sweeper keeps it and counts the attempt.
    assert queue.pending_tasks_send() == 0
    assert PendingTask.objects.get(pk=pending[0].pk).attempts == 2


def test_pending_tasks_are_sent_when_the_broker_is_back(project, lead, django_capture_on_commit_callbacks):
    """The sweeper sends what was recorded; the job it starts then runs to its end (in this process, in
    both CI stages: a real worker could not see this test's uncommitted rows)."""
    from labeling.models import Job
    from labeling.services.baselines import baseline_run_start
    from labeling.services.jobs import jobs_sweep

    add_images(project, 2)
    with django_capture_on_commit_callbacks(execute=False):  # its task never went out
        job = baseline_run_start(project=project, user=lead)
    PendingTask.objects.create(name=queue.BASELINE_RUN, args=[job.id], attempts=1, last_error="OperationalError")
    with eager(True):
        assert jobs_sweep()["pending_sent"] == 1
    assert not PendingTask.objects.exists()
    job.refresh_from_db()
    assert job.status == Job.Status.DONE and job.done == 2


def test_readiness_is_503_only_when_the_database_is_down(client):
    r = client.get("/readyz")
    assert r.status_code == 200 and r.json()["checks"]["database"] == "ok"
    assert client.get("/healthz").status_code == 200
