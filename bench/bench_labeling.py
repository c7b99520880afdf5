"""Load benchmark of the labeling API under gunicorn on PostgreSQL.

Run: ``python bench/bench_labeling.py`` (PostgreSQL on 127.0.0.1:5432, user
``postgres``, trust authentication). ``--help`` lists the options.

What it does, all on this machine:

1. creates a fresh database (``fairtone_bench_labeling``), migrates it, and makes
   a project with 50 labelers (API tokens), ~200 real small images (display
   derivatives made at import, as in production) plus image rows sharing those
   files so that every labeler's queue is long, and opens calibration 1 with
   50 labels per image (every labeler has every image);
2. for each gunicorn configuration (``-w W -k gthread --threads T``) starts the app
   with ``config.settings.production`` (DEBUG off) and waits for ``/healthz``;
3. paced phase: 50 simulated labelers each submit a label and get the next image
   (``POST /api/phases/<id>/labels/``), then fetch its display image, one image
   every 2 s on an open-loop schedule (every 4th cycle also ``GET .../next/``),
   while 50 more virtual users hit ``/healthz`` on the same schedule: the trivial
   view measured under the same load;
4. saturation phase: the 50 labelers submit back to back (no think time);
   labels per second;
5. drops the database and the media folder.

The load generator (``bench/_loadgen.py``) is a separate single-threaded asyncio
process; its CPU use is reported next to gunicorn's and PostgreSQL's.

Goals (issue 3): with 50 labelers at one image every 2 s, the p95 of
submit-and-next is at most 50 ms and at most 3x the p95 of ``/healthz``; the
display image is served as stored (never re-encoded per request).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
DB_NAME = "fairtone_bench_labeling"
PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}
# Local traffic only: never through an HTTP proxy from the environment.
HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))
GOAL_P95_MS = 50.0
GOAL_RATIO = 3.0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--labelers", type=int, default=50)
    p.add_argument("--interval", type=float, default=2.0, help="seconds per image per labeler (paced phase)")
    p.add_argument("--duration", type=float, default=30.0, help="measured seconds of the paced phase")
    p.add_argument("--sat-duration", type=float, default=20.0, help="measured seconds of the saturation phase")
    p.add_argument("--warmup", type=float, default=4.0, help="unrecorded seconds before each phase")
    p.add_argument("--next-every", type=int, default=4, help="GET next every N-th cycle (0: never)")
    p.add_argument("--real-images", type=int, default=200)
    p.add_argument("--images", type=int, default=5000, help="images in the phase (real ones + rows sharing files)")
    p.add_argument("--configs", default="2x4,3x4,4x2", help="gunicorn workers x threads (gthread), comma-separated")
    p.add_argument("--conn-max-age", default="60", help="DATABASE_CONN_MAX_AGE for the app")
    p.add_argument("--settings", default="config.settings.production")
    p.add_argument("--app-dir", default=str(ROOT), help="the project to serve (e.g. a scratch copy)")
    p.add_argument("--keep-db", action="store_true", help="do not drop the database at the end")
    return p.parse_args()


# --- database and data ------------------------------------------------------------


def pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(dbname="postgres", autocommit=True, **PG) as conn:
        conn.execute(sql)


def small_jpeg(i: int, rng: np.random.Generator, size: tuple[int, int] = (480, 640)) -> bytes:
    """A distinct 640x480 JPEG: a colour gradient, a disc and noise."""
    from PIL import Image as PILImage

    h, w = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    base = rng.uniform(40, 215, 3).astype(np.float32)
    img = base + 30 * np.stack([xx / w, yy / h, (xx + yy) / (w + h)], axis=-1)
    disc = (xx - w * rng.uniform(0.3, 0.7)) ** 2 + (yy - h * rng.uniform(0.3, 0.7)) ** 2 < (h * 0.2) ** 2
    img[disc] = rng.uniform(30, 230, 3)
    img += rng.normal(0, 6, img.shape)
    buf = io.BytesIO()
    PILImage.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(buf, format="JPEG", quality=88)
    return buf.getvalue()


def seed_database(args: argparse.Namespace) -> dict:
    """Project, labelers, tokens, images and an open phase; returns what the load generator needs."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password
    from django.core.management import call_command
    from django.db import connection, connections
    from rest_framework.authtoken.models import Token

    from labeling.models import Image, Membership
    from labeling.services.images import image_create_from_bytes, image_make_derivatives
    from labeling.services.phases import calibration_configure, phase_open
    from labeling.services.projects import project_create

    t0 = time.perf_counter()
    call_command("migrate", verbosity=0)
    User = get_user_model()
    lead = User.objects.create(username="bench-lead", password=make_password(None), is_staff=True)
    project = project_create(name="Bench: labeling load", created_by=lead, labels_per_image=args.labelers)
    rng = np.random.default_rng(3)
    real = []
    for i in range(args.real_images):
        image = image_create_from_bytes(project=project, filename=f"bench{i:04d}.jpg", data=small_jpeg(i, rng))
        image.refresh_from_db()
        if image.derivative_status != Image.DerivativeStatus.READY:
            image_make_derivatives(image=image)
        real.append(image)
    # More image rows sharing the real files: long queues without thousands of encodes.
    fill = []
    for i in range(max(0, args.images - len(real))):
        src = real[i % len(real)]
        fill.append(
            Image(
                project=project,
                external_id=f"fill{i:05d}",
                original=src.original.name,
                original_filename=src.original_filename,
                sha256=hashlib.sha256(f"fill{i}".encode()).hexdigest(),
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
        [User(username=f"bench-l{i:03d}", password=make_password(None)) for i in range(args.labelers)]
    )
    Membership.objects.bulk_create(
        [
            Membership(project=project, user=u, role=Membership.Role.LABELER, pseudonym=f"L{i + 1:03d}")
            for i, u in enumerate(users)
        ]
    )
    tokens = [Token.objects.create(user=u).key for u in users]
    n_images = project.images.count()
    cal1, _ = calibration_configure(project=project, size=n_images, calibration_1_size=n_images, n_repeated=0, seed=1)
    cal1 = phase_open(phase=cal1, labels_per_image=args.labelers)
    n_assignments = cal1.assignments.count()
    with connection.cursor() as cur:
        cur.execute("ANALYZE")
    check = real[0]
    check.refresh_from_db()
    media = Path(os.environ["FAIRTONE_MEDIA_ROOT"])
    fixture = {
        "phase_id": cal1.id,
        "tokens": tokens,
        "n_images": n_images,
        "n_assignments": n_assignments,
        "check_image": {
            "id": check.id,
            "display_sha256": hashlib.sha256((media / check.display.name).read_bytes()).hexdigest(),
            "original_sha256": check.sha256,
            "display_size": (media / check.display.name).stat().st_size,
        },
        "seconds": time.perf_counter() - t0,
    }
    connections.close_all()
    return fixture


# --- gunicorn ----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {proc.returncode}")
        try:
            with HTTP.open(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("gunicorn did not answer /healthz in time")


@contextlib.contextmanager
def gunicorn(workers: int, threads: int, env: dict, app_dir: str, log: Path):
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "gunicorn",
        "config.wsgi",
        "-w",
        str(workers),
        "-k",
        "gthread",
        "--threads",
        str(threads),
        "-b",
        f"127.0.0.1:{port}",
        "--keep-alive",
        "5",
        "--log-level",
        "warning",
        "--error-logfile",
        str(log),
        "--worker-tmp-dir",
        "/dev/shm",
    ]
    proc = subprocess.Popen(cmd, cwd=app_dir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(port, proc)
        yield port, proc.pid
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def check_display_served_as_stored(port: int, token: str, check: dict) -> tuple[bool, str]:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/images/{check['id']}/file/display/", headers={"Authorization": f"Token {token}"}
    )
    with HTTP.open(req, timeout=10) as r:
        body = r.read()
        ctype = r.headers.get("Content-Type")
    served = hashlib.sha256(body).hexdigest()
    same = served == check["display_sha256"]
    return same, f"{len(body):,} bytes, {ctype}, sha256 {'==' if same else '!='} stored display file"


def run_loadgen(spec: dict) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
        path = f.name
    try:
        out = subprocess.run(
            [sys.executable, str(BENCH / "_loadgen.py"), path],
            capture_output=True,
            text=True,
            timeout=spec["warmup"] + spec["duration"] + 120,
        )
    finally:
        os.unlink(path)
    if out.returncode != 0:
        raise RuntimeError(f"load generator failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout)


# --- report ------------------------------------------------------------------------


def summary(latencies: list[float], seconds: float) -> dict:
    a = np.asarray(latencies)
    if a.size == 0:
        return {"n": 0}
    p50, p95, p99 = np.percentile(a, [50, 95, 99])
    return {"n": int(a.size), "p50": p50, "p95": p95, "p99": p99, "max": float(a.max()), "rate": a.size / seconds}


def print_table(title: str, rows: dict[str, dict]) -> None:
    print(f"  {title}")
    print(f"    {'request':<22}{'n':>7}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'max ms':>9}{'req/s':>9}")
    for name, r in rows.items():
        if not r.get("n"):
            print(f"    {name:<22}{0:>7}")
            continue
        print(
            f"    {name:<22}{r['n']:>7}{r['p50']:>9.1f}{r['p95']:>9.1f}{r['p99']:>9.1f}{r['max']:>9.1f}{r['rate']:>9.1f}"
        )


def print_cpu(cpu: dict) -> None:
    print(
        f"    CPU (cores of {cpu['ncpu']}): machine {cpu['machine_cores']:.2f}, gunicorn {cpu['gunicorn_cores']:.2f}, "
        f"postgres {cpu['postgres_cores']:.2f}, load generator {cpu['loadgen_cores']:.2f}, other processes "
        f"{max(0.0, cpu['machine_cores'] - cpu['gunicorn_cores'] - cpu['postgres_cores'] - cpu['loadgen_cores']):.2f}"
    )


def problems(result: dict) -> list[str]:
    out = []
    for kind, by_status in result["statuses"].items():
        bad = {s: n for s, n in by_status.items() if not s.startswith("2")}
        if bad:
            out.append(f"{kind}: non-2xx {bad}")
    if result["errors"]:
        out.append("first errors: " + " | ".join(result["errors"][:3]))
    if result["exhausted"]:
        out.append(f"{result['exhausted']} labeler queues ran out")
    return out


def main() -> None:
    args = parse_args()
    media = Path(tempfile.mkdtemp(prefix="fairtone-bench-media-"))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": args.settings,
        "DATABASE_URL": f"postgres://{PG['user']}@{PG['host']}:{PG['port']}/{DB_NAME}",
        "DATABASE_CONN_MAX_AGE": str(args.conn_max_age),
        "DJANGO_SECRET_KEY": "bench-only-" + os.urandom(16).hex(),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DJANGO_DEBUG": "0",
        # Plain HTTP on this machine (the production settings redirect to HTTPS by default).
        "DJANGO_SECURE_SSL_REDIRECT": "0",
        "DJANGO_SECURE_HSTS_SECONDS": "0",
        "DJANGO_SECURE_COOKIES": "0",
        "FAIRTONE_MEDIA_ROOT": str(media),
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": args.app_dir,
    }
    env.pop("CELERY_BROKER_URL", None)
    env.pop("REDIS_CACHE_URL", None)
    os.environ.update(env)
    os.environ.pop("CELERY_BROKER_URL", None)
    sys.path.insert(0, args.app_dir)
    configs = [tuple(int(x) for x in c.split("x")) for c in args.configs.split(",") if c]

    pg_admin(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
    pg_admin(f"CREATE DATABASE {DB_NAME}")
    results = []
    try:
        fx = seed_database(args)
        print(
            f"Labeling API load benchmark: {args.settings} (DEBUG off), PostgreSQL, {os.cpu_count()} cores, "
            f"app {args.app_dir}"
        )
        print(
            f"  setup {fx['seconds']:.1f} s: {args.labelers} labelers, {fx['n_images']} images "
            f"({args.real_images} real files), {fx['n_assignments']:,} assignments in the open phase; "
            f"DATABASE_CONN_MAX_AGE={args.conn_max_age}"
        )
        print(
            f"  paced: {args.labelers} labelers x 1 image / {args.interval:g} s (submit-and-next + display image"
            f"{f', GET next every {args.next_every}th' if args.next_every else ''}) + {args.labelers} /healthz users"
            f" at the same rate; {args.duration:g} s measured after {args.warmup:g} s warm-up. "
            f"Saturation: no think time, {args.sat_duration:g} s."
        )
        base_spec = {"host": "127.0.0.1", "phase_id": fx["phase_id"], "users": [{"token": t} for t in fx["tokens"]]}
        for workers, threads in configs:
            log = Path(tempfile.gettempdir()) / f"fairtone-bench-gunicorn-{workers}x{threads}.log"
            with gunicorn(workers, threads, env, args.app_dir, log) as (port, pid):
                stored_ok, stored_note = check_display_served_as_stored(port, fx["tokens"][0], fx["check_image"])
                spec = {**base_spec, "port": port, "gunicorn_pid": pid, "warmup": args.warmup}
                paced = run_loadgen(
                    {
                        **spec,
                        "mode": "paced",
                        "duration": args.duration,
                        "interval": args.interval,
                        "next_every": args.next_every,
                        "seed": workers * 100 + threads,
                    }
                )
                sat = run_loadgen({**spec, "mode": "saturate", "duration": args.sat_duration, "seed": 7})
            rows = {
                "submit-and-next": summary(paced["latencies"].get("submit", []), args.duration),
                "GET next": summary(paced["latencies"].get("next", []), args.duration),
                "GET display image": summary(paced["latencies"].get("image", []), args.duration),
                "/healthz (trivial)": summary(paced["latencies"].get("healthz", []), args.duration),
            }
            sat_row = summary(sat["latencies"].get("submit", []), args.sat_duration)
            results.append((workers, threads, rows, sat_row, paced, sat, stored_ok, stored_note))
            print(f"\n== gunicorn -w {workers} -k gthread --threads {threads}")
            print_table(f"paced ({args.labelers} labelers, 1 image / {args.interval:g} s)", rows)
            print_cpu(paced["cpu"])
            print(
                f"    schedule slots {paced['slots']}, started >50 ms late {paced['late']}, "
                f"reconnects {paced['reconnects']}, image bytes {paced['image_bytes']:,}"
            )
            for line in problems(paced):
                print(f"    ! {line}")
            print_table("saturation (no think time)", {"submit-and-next": sat_row})
            print_cpu(sat["cpu"])
            for line in problems(sat):
                print(f"    ! {line}")
            print(f"    display image served as stored: {stored_note}")
    finally:
        with contextlib.suppress(Exception):
            from django.db import connections

            connections.close_all()
        if not args.keep_db:
            pg_admin(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        shutil.rmtree(media, ignore_errors=True)

    print("\n== Summary (goal: submit-and-next p95 <= 50 ms and <= 3x /healthz p95, 50 labelers, 1 image / 2 s)")
    print(
        f"  {'config':<8}{'submit p95':>11}{'healthz p95':>12}{'ratio':>7}{'image p95':>10}{'labels/s sat':>13}  verdict"
    )
    best = None
    for workers, threads, rows, sat_row, paced, sat, stored_ok, _ in results:
        sp, hp = rows["submit-and-next"].get("p95", float("nan")), rows["/healthz (trivial)"].get("p95", float("nan"))
        ratio = sp / hp if hp else float("inf")
        clean = not problems(paced) and not problems(sat)
        ok = sp <= GOAL_P95_MS and ratio <= GOAL_RATIO and stored_ok and clean
        verdict = "PASS" if ok else "FAIL"
        if not clean:
            verdict += " (errors)"
        print(
            f"  {workers}x{threads:<6}{sp:>11.1f}{hp:>12.1f}{ratio:>7.2f}{rows['GET display image'].get('p95', float('nan')):>10.1f}"
            f"{sat_row.get('rate', 0.0):>13.1f}  {verdict}"
        )
        if best is None or sat_row.get("rate", 0) > best[1]:
            best = (f"{workers}x{threads}", sat_row.get("rate", 0))
    if best:
        print(f"  saturation throughput: {best[1]:.0f} labels/s (best config {best[0]})")
    all_stored = all(r[6] for r in results)
    print(f"  display image served as stored (no per-request re-encode): {'PASS' if all_stored else 'FAIL'}")


if __name__ == "__main__":
    main()
