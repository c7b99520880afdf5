"""Soak benchmark: 50 labelers for a long while, with retries, double submits and reloads, while a
release is built and a baseline run computes (issue 13, "a soak benchmark"). Not run by CI.

Run: ``python bench/bench_soak.py`` (10 minutes) or ``python bench/bench_soak.py --minutes 1`` (a quick
run). PostgreSQL on 127.0.0.1:5432 (user ``postgres``, trust authentication) and ``redis-server`` on
the PATH. ``--help`` lists the options.

What it does, all on this machine:

1. creates a fresh database (``fairtone_bench_soak``) on the shared PostgreSQL, migrates it and makes a
   project with ``--labelers`` labelers (API tokens), real small images (display derivatives and
   baselines made at import) plus image rows sharing those files, and opens calibration 1 with every
   labeler on every image;
2. starts its OWN ``redis-server`` on a free port (the broker and the cache), a Celery worker on it and
   gunicorn (``config.settings.production``, plain HTTP) on the database;
3. for ``--minutes``: each simulated labeler (a thread with a keep-alive connection) submits the image
   it is shown and takes the next one from the answer (submit-and-next), one image every
   ``--interval`` seconds, and asks ``/healthz`` (the trivial view, measured under the same load) once
   per cycle: in every other cycle halfway to its next submit, after an idle pause as a submit comes (the
   reference of the goal), in the others right after the submit's answer. The two are printed apart: a
   request sent at once after another one, to processes still running, is answered about 1 ms sooner on
   this machine than one after a pause (``/healthz`` 0.5 against 1.8 ms, one client, no load), so the
   second alone would compare a submit that waits for a wake-up with a reference that never does.
   A submit answered 503 or cut off is retried with the same client id after a pause, as the labeling
   page does; some submits are sent twice (at once on two connections, or again right after: a
   double click), some cycles start with a reload (``GET next``). Meanwhile a lead keeps a release
   build and a baseline run going (a new one as soon as the last one ended);
4. checks every answer against the database: each label stored once per labeler and image, with
   exactly the client ids whose submit was answered 200/201 (lost: answered but absent; duplicated:
   a second label or revision), and counts the answers of 500;
5. prints the counts, the p95 of submit-and-next against the p95 of ``/healthz`` (goal: at most 3x),
   what the release builds and baseline runs did, then drops the database and stops what it started.

Exit status 1 when a label was lost or duplicated or an answer was 500.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
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
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_labeling import PG, free_port, gunicorn, pg_admin, small_jpeg  # noqa: E402

DB_NAME = "fairtone_bench_soak"
GOAL_RATIO = 3.0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=10.0, help="how long the labelers work")
    p.add_argument("--labelers", type=int, default=50)
    p.add_argument("--interval", type=float, default=2.0, help="seconds per image per labeler")
    p.add_argument("--double", type=float, default=0.05, help="share of submits sent twice")
    p.add_argument("--reload", type=float, default=0.05, help="share of cycles that start with a reload")
    p.add_argument("--real-images", type=int, default=60)
    p.add_argument("--images", type=int, default=0, help="images in the phase (0: enough for the run)")
    p.add_argument("--gunicorn", default="2x4", help="workers x threads (gthread)")
    p.add_argument("--worker-concurrency", type=int, default=1)
    p.add_argument(
        "--worker-nice", type=int, default=0, help="run the Celery worker at this niceness (0: as docker compose)"
    )
    p.add_argument("--no-jobs", action="store_true", help="no release build or baseline run (for comparison)")
    p.add_argument("--keep-db", action="store_true")
    return p.parse_args()


# --------------------------------------------------------------------------- set-up


def seed(args: argparse.Namespace, n_images: int) -> dict:
    """Migrate; a project, labelers with tokens, images (derivatives and baselines made here) and calibration 1."""
    import django

    django.setup()
    from celery import current_app
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password
    from django.core.management import call_command
    from django.db import connection
    from rest_framework.authtoken.models import Token

    from labeling.models import Image, Membership
    from labeling.services.images import image_create_from_bytes
    from labeling.services.phases import calibration_configure, phase_open
    from labeling.services.projects import project_create

    t0 = time.perf_counter()
    call_command("migrate", verbosity=0)
    current_app.conf.task_always_eager = True  # the imports' derivatives and baselines, here
    try:
        User = get_user_model()
        lead = User.objects.create(username="soak-lead", password=make_password(None), is_staff=True)
        project = project_create(name="Bench: soak", created_by=lead, labels_per_image=args.labelers)
        rng = np.random.default_rng(5)
        real = [
            image_create_from_bytes(project=project, filename=f"soak{i:04d}.jpg", data=small_jpeg(i, rng))
            for i in range(args.real_images)
        ]
    finally:
        current_app.conf.task_always_eager = False
    for image in real:
        image.refresh_from_db()
    fill = []
    for i in range(max(0, n_images - len(real))):
        src = real[i % len(real)]
        fill.append(
            Image(
                project=project,
                external_id=f"fill{i:05d}",
                original=src.original.name,
                original_filename=src.original_filename,
                sha256=hashlib.sha256(f"soak-fill{i}".encode()).hexdigest(),
                file_size=src.file_size,
                format=src.format,
                source_mode=src.source_mode,
                width=src.width,
                height=src.height,
                display=src.display.name,
                thumbnail=src.thumbnail.name,
                derivative_status=Image.DerivativeStatus.READY,
            )
        )
    Image.objects.bulk_create(fill, batch_size=1000)
    users = User.objects.bulk_create(
        [User(username=f"soak-l{i:03d}", password=make_password(None)) for i in range(args.labelers)]
    )
    Membership.objects.bulk_create(
        [
            Membership(project=project, user=u, role=Membership.Role.LABELER, pseudonym=f"S{i + 1:03d}")
            for i, u in enumerate(users)
        ]
    )
    tokens = [Token.objects.create(user=u).key for u in users]
    total = project.images.count()
    cal1, _ = calibration_configure(project=project, size=total, calibration_1_size=total, n_repeated=0, seed=1)
    cal1 = phase_open(phase=cal1, labels_per_image=args.labelers)
    with connection.cursor() as cur:
        cur.execute("ANALYZE")
    return {
        "project": project.pk,
        "lead": lead.pk,
        "phase": cal1.id,
        "tokens": tokens,
        "usernames": [u.username for u in users],
        "images": total,
        "seconds": time.perf_counter() - t0,
    }


@contextlib.contextmanager
def private_redis(workdir: Path):
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            time.sleep(0.05)
        yield port
    finally:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def celery_worker(env: dict, concurrency: int, log: Path, nice: int = 0):
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                "nice",
                "-n",
                str(nice),
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                f"--concurrency={concurrency}",
            ]
            + ["--without-gossip", "--without-mingle", "--loglevel=WARNING", "-n", "soak@%h"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield proc.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# --------------------------------------------------------------------------- the labelers


class Labeler(threading.Thread):
    def __init__(self, i: int, args, port: int, phase: int, token: str, t_end: float):
        super().__init__(daemon=True)
        self.i, self.args, self.port, self.phase, self.t_end = i, args, port, phase, t_end
        self.rng = random.Random(i)
        self.headers = {"Authorization": f"Token {token}", "Accept": "application/json"}
        self.conn = self._connect()
        self.stored: dict[int, set[str]] = {}  # image -> client ids answered 200/201
        self.statuses: Counter[str] = Counter()
        self.latency: dict[str, list[float]] = {"submit": [], "healthz": [], "healthz_hot": [], "next": [], "open": []}
        self.retries = self.doubles = self.concurrent_doubles = self.reloads = self.cut = 0
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.current: int | None = None

    def _connect(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def request(self, conn, kind: str, method: str, path: str, body: bytes | None = None):
        """(status, body, seconds) or (None, b"", seconds) when the connection broke."""
        headers = dict(self.headers)
        if body is not None:
            headers["Content-Type"] = "application/json"
        t0 = time.perf_counter()
        try:
            conn.request(method, path, body, headers)
            response = conn.getresponse()
            status, content = response.status, response.read()
        except (OSError, http.client.HTTPException):
            conn.close()
            with self.lock:
                self.cut += 1
                self.statuses[f"{kind} cut"] += 1
            return None, b"", time.perf_counter() - t0
        seconds = time.perf_counter() - t0
        with self.lock:
            self.statuses[f"{kind} {status}"] += 1
            if 200 <= status < 300:
                self.latency[kind].append(seconds)
            elif status != 503 and len(self.errors) < 5:
                self.errors.append(f"{kind} {status}: {content[:160]!r}")
        return status, content, seconds

    def take(self, assignment) -> None:
        self.current = None if assignment is None else assignment["image"]["id"]

    def reload(self, kind: str = "next") -> None:
        while time.monotonic() < self.t_end + 60:
            status, content, _ = self.request(self.conn, kind, "GET", f"/api/phases/{self.phase}/next/")
            if status == 200:
                self.take(json.loads(content)["current"])
                return
            time.sleep(0.5)

    def submit(self, conn, body: bytes, image: int, client_id: str, *, count_retries: bool = True):
        """Submit until answered 200/201 (retrying a 503 or a cut connection with the same client id)."""
        while True:
            status, content, _ = self.request(conn, "submit", "POST", f"/api/phases/{self.phase}/labels/", body)
            if status in (200, 201):
                with self.lock:
                    self.stored.setdefault(image, set()).add(client_id)
                return json.loads(content)
            if status not in (None, 503) or time.monotonic() > self.t_end + 120:
                return None  # counted in statuses (a 500 among them)
            if count_retries:
                with self.lock:
                    self.retries += 1
            time.sleep(0.2 + 0.5 * self.rng.random())

    def submit_twin(self, body: bytes, image: int, client_id: str) -> None:
        conn = self._connect()
        try:
            self.submit(conn, body, image, client_id, count_retries=False)
        finally:
            conn.close()

    def run(self) -> None:
        self.reload("open")  # the labeling page opened (all labelers at once: not counted as a reload)
        k = 0
        start = time.monotonic() + self.rng.random() * self.args.interval
        while True:
            slot = start + k * self.args.interval
            if slot >= self.t_end:
                break
            time.sleep(max(0.0, slot - time.monotonic()))
            k += 1
            if self.rng.random() < self.args.reload:
                self.reloads += 1
                self.reload()
            if self.current is None:
                self.errors.append("the queue ran out")
                break
            image, client_id = self.current, str(uuid.uuid4())
            payload = {
                "client_id": client_id,
                "image": image,
                "tones": [self.rng.randint(1, 10)],
                "time_spent_ms": self.rng.randint(1500, 2500),
                "tone_order": list(range(1, 11)),
            }
            body = json.dumps(payload).encode()
            double = self.rng.random() < self.args.double
            twin = None
            if double and self.rng.random() < 0.5:  # the same answer at once on a second connection
                self.concurrent_doubles += 1
                twin = threading.Thread(target=self.submit_twin, args=(body, image, client_id))
                twin.start()
            answer = self.submit(self.conn, body, image, client_id)
            if double and twin is None:  # a double click: the same answer again right after
                self.doubles += 1
                self.submit(self.conn, body, image, client_id, count_retries=False)
            if twin is not None:
                twin.join()
            if answer is None:
                self.reload()
            else:
                self.take(answer["next"])
            if k % 2:  # halfway to the next submit, after a pause as the submit came: the goal's reference
                time.sleep(max(0.0, slot + self.args.interval / 2 - time.monotonic()))
                self.request(self.conn, "healthz", "GET", "/healthz")
            else:  # at once after the submit's answer (printed beside)
                self.request(self.conn, "healthz_hot", "GET", "/healthz")
        self.conn.close()


# --------------------------------------------------------------------------- the lead


class Lead(threading.Thread):
    """Keeps a release build and a baseline run going while the labelers work."""

    def __init__(self, project_id: int, lead_id: int, stop: threading.Event):
        super().__init__(daemon=True)
        self.project_id, self.lead_id, self.stop = project_id, lead_id, stop
        self.releases: list[int] = []
        self.baselines: list[int] = []
        self.refused: Counter[str] = Counter()

    def run(self) -> None:
        from django.contrib.auth import get_user_model
        from django.core.exceptions import ValidationError
        from django.db import connection

        from labeling.models import Job, Project, Release
        from labeling.services.baselines import baseline_run_start
        from labeling.services.releases import CATEGORIES, release_request
        from tests.card_texts import card_texts_for_tests

        project = Project.objects.get(pk=self.project_id)
        lead = get_user_model().objects.get(pk=self.lead_id)
        active = [Job.Status.QUEUED, Job.Status.RUNNING]
        try:
            while not self.stop.wait(2.0):
                if not Release.objects.filter(project=project, status__in=Release.ACTIVE).exists():
                    try:
                        release = release_request(
                            project=project,
                            user=lead,
                            rule={"include": dict.fromkeys(CATEGORIES, True)},
                            card_text=card_texts_for_tests(),
                        )
                        self.releases.append(release.pk)
                    except ValidationError as exc:
                        self.refused[str(exc.messages[0])[:60]] += 1
                if not Job.objects.filter(project=project, kind=Job.Kind.BASELINE, status__in=active).exists():
                    fraction = 0.05 if len(self.baselines) % 2 == 0 else 0.1  # new parameters: every image again
                    job = baseline_run_start(project=project, parameters={"min_skin_fraction": fraction}, user=lead)
                    self.baselines.append(job.pk)
        finally:
            connection.close()


# --------------------------------------------------------------------------- the check and the report


def check(fx: dict, labelers: list[Labeler]) -> dict:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            "SELECT u.username, l.image_id, count(*) OVER (PARTITION BY l.labeler_id, l.image_id), "
            "array(SELECT r.client_id::text FROM labeling_labelrevision r WHERE r.label_id = l.id) "
            "FROM labeling_label l JOIN labeling_membership m ON m.id = l.labeler_id "
            "JOIN auth_user u ON u.id = m.user_id WHERE l.phase_id = %s",
            [fx["phase"]],
        )
        rows = cur.fetchall()
    stored = {(row[0], row[1]): (row[2], sorted(row[3])) for row in rows}
    lost = duplicated = answered = 0
    for i, labeler in enumerate(labelers):
        username = fx["usernames"][i]
        for image, client_ids in labeler.stored.items():
            answered += 1
            got = stored.get((username, image))
            if got is None or not set(client_ids) <= set(got[1]):
                lost += 1
    for n, client_ids in stored.values():
        # One label per labeler and image, one revision per client id (a double submit adds none).
        if n > 1 or len(client_ids) != len(set(client_ids)) or len(client_ids) > 1:
            duplicated += 1
    return {"answered": answered, "stored": len(rows), "lost": lost, "duplicated": duplicated}


def p(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000, q)) if values else float("nan")


def main() -> int:
    args = parse_args()
    seconds = args.minutes * 60
    n_images = args.images or int(seconds / args.interval * 1.3) + 50
    workdir = Path(tempfile.mkdtemp(prefix="fairtone-soak-"))
    media = workdir / "media"
    media.mkdir()
    workers, threads = (int(x) for x in args.gunicorn.split("x"))
    with private_redis(workdir) as redis_port:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.production",
            "DATABASE_URL": f"postgres://{PG['user']}@{PG['host']}:{PG['port']}/{DB_NAME}",
            "DJANGO_SECRET_KEY": "bench-only-" + os.urandom(16).hex(),
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DJANGO_DEBUG": "0",
            "DJANGO_SECURE_SSL_REDIRECT": "0",
            "DJANGO_SECURE_HSTS_SECONDS": "0",
            "DJANGO_SECURE_COOKIES": "0",
            "FAIRTONE_MEDIA_ROOT": str(media),
            "CELERY_BROKER_URL": f"redis://127.0.0.1:{redis_port}/0",
            "REDIS_CACHE_URL": f"redis://127.0.0.1:{redis_port}/1",
            "LOG_LEVEL": "WARNING",
            "PYTHONPATH": str(ROOT),
        }
        os.environ.update(env)
        sys.path.insert(0, str(ROOT))
        pg_admin(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        pg_admin(f"CREATE DATABASE {DB_NAME}")
        try:
            fx = seed(args, n_images)
            print(
                f"Soak benchmark: {args.labelers} labelers x 1 image / {args.interval:g} s for {args.minutes:g} min, "
                f"gunicorn {workers}x{threads} (config.settings.production), a Celery worker (concurrency "
                f"{args.worker_concurrency}, nice {args.worker_nice}), PostgreSQL and a private Redis; {os.cpu_count()} cores"
            )
            print(
                f"  setup {fx['seconds']:.0f} s: {fx['images']} images ({args.real_images} real files), "
                f"double submits {args.double:.0%}, reloads {args.reload:.0%} of cycles"
            )
            log = workdir / "gunicorn.log"
            with (
                celery_worker(env, args.worker_concurrency, workdir / "worker.log", args.worker_nice),
                gunicorn(workers, threads, env, str(ROOT), log) as (port, _pid),
            ):
                stop = threading.Event()
                lead = Lead(fx["project"], fx["lead"], stop)
                if not args.no_jobs:
                    lead.start()
                t_end = time.monotonic() + seconds
                labelers = [Labeler(i, args, port, fx["phase"], token, t_end) for i, token in enumerate(fx["tokens"])]
                for labeler in labelers:
                    labeler.start()
                for labeler in labelers:
                    labeler.join()
                stop.set()
                if lead.is_alive():
                    lead.join()
                from labeling.models import ImageBaseline, Job, Release

                releases = Counter(Release.objects.filter(pk__in=lead.releases).values_list("status", flat=True))
                jobs = list(Job.objects.filter(pk__in=lead.baselines))
                computed = ImageBaseline.objects.filter(job__in=jobs).count()
                gunicorn_errors = log.read_text(errors="replace") if log.exists() else ""
            result = check(fx, labelers)
        finally:
            with contextlib.suppress(Exception):
                from django.db import connections

                connections.close_all()
            if not args.keep_db:
                pg_admin(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")

    statuses: Counter[str] = Counter()
    latency: dict[str, list[float]] = {"submit": [], "healthz": [], "healthz_hot": [], "next": [], "open": []}
    for labeler in labelers:
        statuses.update(labeler.statuses)
        for kind, values in labeler.latency.items():
            latency[kind].extend(values)
    errors = [e for labeler in labelers for e in labeler.errors]
    n500 = sum(n for key, n in statuses.items() if key.endswith(" 500"))
    submit95, health95 = p(latency["submit"], 95), p(latency["healthz"], 95)
    ratio = submit95 / health95 if health95 else float("inf")
    print(f"  answers: {dict(sorted(statuses.items()))}")
    print(
        f"  retries {sum(x.retries for x in labelers)}, cut connections {sum(x.cut for x in labelers)}, "
        f"double submits {sum(x.doubles for x in labelers)} + {sum(x.concurrent_doubles for x in labelers)} at once, "
        f"reloads {sum(x.reloads for x in labelers)}"
    )
    print(
        f"  release builds requested {len(lead.releases)} (at the end: {dict(releases)}), baseline runs {len(jobs)} "
        f"({dict(Counter(j.status for j in jobs))}), {computed} baselines computed; refused: {dict(lead.refused)}"
    )
    print(
        f"  labels answered stored {result['answered']}, in the database {result['stored']}: "
        f"lost {result['lost']}, duplicated {result['duplicated']}, answers of 500: {n500}"
    )
    print(f"  {'request':<18}{'n':>7}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}")
    for kind, name in (
        ("submit", "submit-and-next"),
        ("healthz", "/healthz"),
        ("healthz_hot", "/healthz at once"),
        ("next", "GET next (reload)"),
        ("open", "GET next (opening)"),
    ):
        values = latency[kind]
        print(f"  {name:<18}{len(values):>7}{p(values, 50):>9.1f}{p(values, 95):>9.1f}{p(values, 99):>9.1f}")
    verdict = "PASS" if ratio <= GOAL_RATIO else "FAIL"
    print(f"  p95 submit-and-next / p95 /healthz = {ratio:.2f} (goal <= {GOAL_RATIO:g}x): {verdict}")
    hot95 = p(latency["healthz_hot"], 95)
    print(
        f"  (p95 submit-and-next / p95 /healthz at once after a submit = {submit95 / hot95 if hot95 else float('inf'):.2f})"
    )
    if errors:
        print("  first errors: " + " | ".join(errors[:5]))
    if gunicorn_errors.strip():
        print("  gunicorn log (tail):\n" + gunicorn_errors[-1500:])
    shutil.rmtree(workdir, ignore_errors=True)
    return 1 if result["lost"] or result["duplicated"] or n500 else 0


if __name__ == "__main__":
    sys.exit(main())
