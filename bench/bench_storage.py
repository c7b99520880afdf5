"""Benchmark media in an S3 bucket (issue 25) against moto's standalone S3 server on a free local port.

Run: ``python bench/bench_storage.py [--n 5000] [--images 250000] [--skip-release] [--skip-import]``.
Needs PostgreSQL on ``postgres@127.0.0.1:5432`` (databases ``fairtone_bench_storage`` and, for the release,
``fairtone_bench_storage_release[_<N>]``, the latter kept between runs: bench/bench_release.py makes its data).

(a) Importing ``--n`` photos (one zip archive, as a lead uploads it: ``services.imports.import_zip``) into the
    bucket, against boto3 putting the same files alone (one ``put_object`` each, one after the other, the same
    client settings); beside it, boto3 with the import's concurrency (``FAIRTONE["IMPORT_UPLOAD_THREADS"]``
    threads sharing one client), a second reference. The import's own work (decoding, hashing, rows) is in its figure; the derivatives and
    baselines it sends to the worker are not (no worker runs: the tasks are counted, not sent). Goal: ratio
    <= 1.5.
(b) A release of ``--images`` images x 4 labels (bench/bench_release.py's data) built in a child process
    with the bucket as storage, beside the same build on the local disk: time and peak RSS of each. Goal: peak
    RSS <= 300 MB with S3 too.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SERVER = "postgres://postgres@127.0.0.1:5432"
IMPORT_DB = os.environ.get("FAIRTONE_BENCH_STORAGE_DB", "fairtone_bench_storage")  # a helper may name its own
RATIO_GOAL = 1.5
RSS_GOAL_MB = 300


def _bench_release():
    spec = importlib.util.spec_from_file_location("bench_release", ROOT / "bench" / "bench_release.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def photos(n: int, folder: Path) -> list[Path]:
    """``n`` distinct JPEG photos (640 x 480, noise over a gradient: about 100 kB each, like compressed photos)."""
    from PIL import Image as PILImage

    rng = np.random.default_rng(25)
    base = np.linspace(60, 200, 640, dtype=np.float32)[None, :, None] * np.ones((480, 1, 3), np.float32)
    paths = []
    for i in range(n):
        pixels = np.clip(base + rng.normal(0, 18, (480, 640, 3)), 0, 255).astype(np.uint8)
        pixels[0, 0] = (i % 256, (i // 256) % 256, 7)  # distinct bytes, so no two are duplicates
        path = folder / f"photo-{i:06d}.jpg"
        PILImage.fromarray(pixels).save(path, format="JPEG", quality=85)
        paths.append(path)
    return paths


def sent_to(sent: list[str]):
    def send(name, args, countdown=None) -> None:
        sent.append(name)

    return send


def bench_import(server, n: int) -> dict:
    from django.test.utils import override_settings

    from labeling.services import queue
    from tests.factories import ProjectFactory, UserFactory
    from tests.s3 import REGION

    work = Path(tempfile.mkdtemp(prefix="fairtone-bench-storage-"))
    try:
        start = time.perf_counter()
        files = photos(n, work)
        total_bytes = sum(p.stat().st_size for p in files)
        archive = work / "photos.zip"
        with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_STORED) as zf:
            for path in files:
                zf.write(path, path.name)
        print(f"(a) {n:,} photos, {total_bytes / 1e6:.0f} MB, made in {time.perf_counter() - start:.1f} s")

        results: dict = {}
        # The same import onto the local disk first (it also warms the process up): the app's own work per photo
        # (decoding, hashing, rows, audit).
        media = Path(tempfile.mkdtemp(prefix="fairtone-bench-storage-local-"))
        original_send = queue._send
        queue._send = sent_to([])
        try:
            with override_settings(MEDIA_ROOT=str(media)):
                from labeling.services.imports import import_zip

                lead = UserFactory(username=f"bench-lead-local-{time.time_ns()}")
                project = ProjectFactory(created_by=lead)
                start = time.perf_counter()
                with open(archive, "rb") as handle:
                    import_zip(project=project, fileobj=handle, user=lead)
                results["import_local"] = time.perf_counter() - start
        finally:
            queue._send = original_send
            shutil.rmtree(media, ignore_errors=True)
        client = server.client()
        from concurrent.futures import ThreadPoolExecutor

        from labeling.services.imports.bulk import upload_threads

        threads = upload_threads()
        results["threads"] = threads
        # boto3 alone, then the import, then boto3 again: the faster boto3 run kept (errs against the import).
        for attempt in range(2):
            bucket = f"bench-boto3-{attempt}"
            client.create_bucket(Bucket=bucket)
            start = time.perf_counter()
            for path in files:
                client.put_object(Bucket=bucket, Key=f"photos/{path.name}", Body=path.read_bytes())
            results[f"boto3_{attempt}"] = time.perf_counter() - start
            # The second reference: boto3 with the import's concurrency (one client shared by as many threads).
            bucket = f"bench-boto3-threads-{attempt}"
            client.create_bucket(Bucket=bucket)
            start = time.perf_counter()
            with ThreadPoolExecutor(threads) as pool:
                list(
                    pool.map(
                        lambda p, b=bucket: client.put_object(Bucket=b, Key=f"photos/{p.name}", Body=p.read_bytes()),
                        files,
                    )
                )
            results[f"boto3_threads_{attempt}"] = time.perf_counter() - start
            if attempt == 0:
                client.create_bucket(Bucket="bench-import")
                sent: list[str] = []
                original_send = queue._send
                queue._send = sent_to(sent)  # no worker: counted only
                try:
                    with override_settings(
                        STORAGES={
                            "default": server.storage_settings("bench-import"),
                            "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
                        }
                    ):
                        from labeling.models import ImportBatch
                        from labeling.services.imports import import_zip

                        lead = UserFactory(username=f"bench-lead-{time.time_ns()}")
                        project = ProjectFactory(created_by=lead)
                        start = time.perf_counter()
                        with open(archive, "rb") as handle:
                            batch = import_zip(project=project, fileobj=handle, user=lead)
                        results["import"] = time.perf_counter() - start
                        assert batch.status == ImportBatch.Status.DONE, batch.status
                        imported = project.images.count()
                finally:
                    queue._send = original_send
                stored = sum(
                    len(page.get("Contents", ()))
                    for page in client.get_paginator("list_objects_v2").paginate(Bucket="bench-import")
                )
                results.update(imported=imported, objects=stored, tasks=len(sent))
        boto3 = min(results["boto3_0"], results["boto3_1"])
        ratio = results["import"] / boto3
        print(
            f"    import_zip into the bucket : {results['import']:7.1f} s  ({results['imported']:,} images, "
            f"{results['objects']:,} objects, {results['tasks']:,} worker tasks sent, not run)"
        )
        print(
            f"    boto3 put_object alone     : {boto3:7.1f} s  (runs {results['boto3_0']:.1f} s and "
            f"{results['boto3_1']:.1f} s, the faster kept)"
        )
        print(f"    ratio {ratio:.2f}x, goal <= {RATIO_GOAL}x: {'met' if ratio <= RATIO_GOAL else 'NOT met'}")
        boto3_threads = min(results["boto3_threads_0"], results["boto3_threads_1"])
        print(
            f"    boto3 with the import's {results['threads']} upload threads: {boto3_threads:7.1f} s (runs "
            f"{results['boto3_threads_0']:.1f} s and {results['boto3_threads_1']:.1f} s, the faster kept); "
            f"ratio {results['import'] / boto3_threads:.2f}x"
        )
        extra = results["import"] - results["import_local"]
        print(
            f"    the same import onto the local disk: {results['import_local']:.1f} s; the bucket adds "
            f"{extra:.1f} s, {extra / boto3:.2f}x boto3's time for the same files"
        )
        print(f"    (moto server on 127.0.0.1, region {REGION}; per object: {boto3 / n * 1000:.1f} ms with boto3)")
        return {**results, "ratio": ratio, "ratio_threads": results["import"] / boto3_threads}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def bench_release(server, n_images: int, places=("local disk", "S3 bucket")) -> None:
    release_module = _bench_release()
    db_name = f"fairtone_bench_storage_release_{n_images}" if n_images != 250_000 else "fairtone_bench_storage_release"
    from django.db import connections

    connections.close_all()
    if not release_module._db_exists(db_name):
        release_module._admin(f"CREATE DATABASE {db_name}")
    # The release's data in a database of its own (bench_release's generator; kept between runs).
    os.environ["DATABASE_URL"] = f"{SERVER}/{db_name}"
    from django.conf import settings

    settings.DATABASES["default"]["NAME"] = db_name
    connections.close_all()
    del connections["default"]
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    if not release_module._has_data(n_images):
        start = time.perf_counter()
        release_module.generate(n_images, with_baselines=True)
        print(f"(b) data generated in {time.perf_counter() - start:.1f} s")
    project = release_module._project()
    media = tempfile.mkdtemp(prefix="fairtone-bench-storage-media-")
    rows = {}
    try:
        for where in places:
            env = dict(os.environ)
            if where == "S3 bucket":
                bucket = f"bench-release-{time.time_ns()}"
                server.client().create_bucket(Bucket=bucket)
                env.update(server.environment(bucket))
            release = release_module.new_release(project)
            connections.close_all()
            command = [sys.executable, str(ROOT / "bench" / "bench_release.py"), "--child", str(release.id)]
            command += ["--db", db_name, "--media", media]
            start = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env)
            wall = time.perf_counter() - start
            if done.returncode != 0:
                sys.stderr.write(done.stderr[-3000:])
                raise SystemExit(f"the release job failed on the {where} (exit {done.returncode})")
            result = json.loads(done.stdout.strip().splitlines()[-1])
            if result["status"] != "published":
                raise SystemExit(f"not published on the {where}: {result['status']} {result['error']}")
            rows[where] = (result, wall)
            if where == "S3 bucket":
                client = server.client()
                objects = [
                    entry
                    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
                    for entry in page.get("Contents", ())
                ]
                rows[where] += (len(objects), sum(e["Size"] for e in objects))
        labels = next(iter(rows.values()))[0]["summary"]["labels"]
        print(f"(b) release of {n_images:,} images x 4 labels ({labels:,} labels)")
        for where, row in rows.items():
            result, wall = row[0], row[1]
            extra = f", {row[2]} objects, {row[3] / 1e6:.0f} MB uploaded" if len(row) > 2 else ""
            peak = result["peak_rss_mb"]
            print(
                f"    {where:<11}: {result['total_seconds']:6.1f} s ({wall:.1f} s with start-up), peak RSS "
                f"{peak:4.0f} MB (goal <= {RSS_GOAL_MB}: {'met' if peak <= RSS_GOAL_MB else 'NOT met'}){extra}"
            )
            for name, block in result["stages"].items():
                print(f"      {name:<45} {block['seconds']:7.1f} s   peak RSS {block['peak_rss_mb']:5.0f} MB")
    finally:
        shutil.rmtree(media, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=5000, help="photos imported in (a); default 5,000")
    p.add_argument("--images", type=int, default=250_000, help="images of the release in (b), 4 labels each")
    p.add_argument("--skip-import", action="store_true")
    p.add_argument("--skip-release", action="store_true")
    p.add_argument("--s3-only", action="store_true", help="(b) with the bucket only, not the local disk beside it")
    args = p.parse_args()

    import psycopg

    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {IMPORT_DB}")
        conn.execute(f"CREATE DATABASE {IMPORT_DB}")
    os.environ.update(
        DATABASE_URL=f"{SERVER}/{IMPORT_DB}",
        DJANGO_SETTINGS_MODULE="config.settings.test",
        DATABASE_CONN_MAX_AGE="0",
    )
    os.environ.pop("CELERY_BROKER_URL", None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from tests.s3 import s3_server_start, s3_server_stop

    server = s3_server_start()
    try:
        if not args.skip_import:
            bench_import(server, args.n)
        if not args.skip_release:
            bench_release(server, args.images, ("S3 bucket",) if args.s3_only else ("local disk", "S3 bucket"))
    finally:
        s3_server_stop(server)


if __name__ == "__main__":
    main()
