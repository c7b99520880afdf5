"""Issue 25, beyond one machine: two web servers and one Celery worker that share nothing but PostgreSQL, Redis
and an S3 bucket (moto's standalone server, tests/s3.py), each with an empty ``MEDIA_ROOT`` of its own made
read-only and checked empty at the end.

The chain: a zip with a manifest imported through web server A; display images and baselines computed by the
worker (it reads the photos from the bucket); labels submitted through both web servers; a release built by
the worker and downloaded from web server B, byte for byte the bucket's object; a model's results uploaded to B
and scored by the worker, its report read from A; one subject erased through A, their objects gone from the
bucket. Needs PostgreSQL and Redis (CI stage 2 sets ``DATABASE_URL`` and ``CELERY_BROKER_URL``): skipped on
SQLite. The processes use Redis database 11 (broker) and 12 (cache) of the ``CELERY_BROKER_URL``'s server.
"""

# ruff: noqa: F811  (the fixtures of tests/s3.py are imported by name and then used as parameters)

from __future__ import annotations

import io
import os
import secrets
import stat
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import pandas as pd
import pytest
import requests
from django.db import connection
from PIL import Image as PILImage

from tests.s3 import files_under, free_port, s3_server  # noqa: F401  (fixture)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parent.parent
N_IMAGES = 24
GONE = "subject-gone"
MST5 = (0xD7, 0xBD, 0x96)
WAIT = 180


def redis_url(db: int) -> str:
    given = os.environ.get("CELERY_BROKER_URL") or "redis://127.0.0.1:6379/0"
    parts = urlsplit(given)
    return urlunsplit((parts.scheme, parts.netloc, f"/{db}", "", ""))


def _skip_reason() -> str | None:
    if connection.vendor != "postgresql":
        return "needs PostgreSQL shared by three processes (set DATABASE_URL; CI stage 2 runs it)"
    try:
        import redis

        redis.Redis.from_url(redis_url(11), socket_connect_timeout=2).ping()
    except Exception as exc:  # noqa: BLE001 - any failure means no Redis to share
        return f"needs Redis (CELERY_BROKER_URL's server, database 11): {type(exc).__name__}"
    return None


def png(colour, size, mode="RGB") -> bytes:
    buffer = io.BytesIO()
    PILImage.new(mode, size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def archive() -> bytes:
    rows = ["file,image_id,subject_id,gender,mask,mask_kind"]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for i in range(N_IMAGES):
            subject = GONE if i < 2 else f"S{i:02d}"
            gender = "woman" if i < 2 or i % 2 else "man"
            rows.append(f"p/{i}.png,IMG{i:02d},{subject},{gender},m/{i}.png,skin")
            zf.writestr(f"p/{i}.png", png(MST5, (40 + i, 32)))
            zf.writestr(f"m/{i}.png", png(255, (40 + i, 32), mode="L"))
        zf.writestr("manifest.csv", "\n".join(rows) + "\n")
    return buffer.getvalue()


class Processes:
    """The two web servers and the worker, each with its own empty read-only MEDIA_ROOT."""

    def __init__(self, env: dict[str, str], work: Path) -> None:
        self.env, self.work = env, work
        self.procs: list[tuple[str, subprocess.Popen, Path]] = []
        self.roots: list[Path] = []

    def _root(self, name: str) -> Path:
        root = self.work / f"media-{name}"
        root.mkdir()
        root.chmod(stat.S_IRUSR | stat.S_IXUSR)
        self.roots.append(root)
        return root

    def start(self, name: str, args: list[str]) -> None:
        env = {**self.env, "FAIRTONE_MEDIA_ROOT": str(self._root(name))}
        env["FAIRTONE_UPLOAD_TEMP_DIR"] = str(self.work / f"uploads-{name}")  # per process scratch, not media
        log = self.work / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append((name, proc, log))

    def web(self, name: str) -> str:
        port = free_port()
        self.start(name, [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"])
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"{base}/healthz", timeout=2).status_code == 200:
                    return base
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline and self.procs[-1][1].poll() is None, self.logs()
            time.sleep(0.2)

    def logs(self) -> str:
        return "\n".join(f"--- {name}\n{log.read_text(errors='replace')[-3000:]}" for name, _, log in self.procs)

    def stop(self) -> None:
        for _, proc, _ in self.procs:
            proc.terminate()
        for _, proc, _ in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        for root in self.roots:
            root.chmod(stat.S_IRWXU)


def wait_for(condition, what: str, procs: Processes):
    deadline = time.monotonic() + WAIT
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {WAIT} s waiting for {what}\n{procs.logs()}")
        time.sleep(0.5)


def test_two_web_servers_and_a_worker_share_only_postgresql_redis_and_the_bucket(s3_server):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    from django.contrib.auth.models import Permission
    from rest_framework.authtoken.models import Token

    from labeling.models import EvaluationRun, Image, ImageBaseline, Label, Release
    from labeling.services.phases import calibration_configure, phase_get, phase_open
    from tests.factories import MembershipFactory, ProjectFactory, UserFactory

    bucket = f"fairtone-two-web-{secrets.token_hex(4)}"
    client = s3_server.client()
    client.create_bucket(Bucket=bucket)

    def objects(prefix: str = "") -> set[str]:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return {entry["Key"] for page in pages for entry in page.get("Contents", ())}

    lead = UserFactory(username="lead-two-web")
    lead.user_permissions.add(Permission.objects.get(codename="add_project", content_type__app_label="labeling"))
    project = ProjectFactory(created_by=lead)
    members = [
        MembershipFactory(project=project, user=UserFactory(username=f"two-web-{i}"), pseudonym=f"W{i}")
        for i in range(4)
    ]
    lead_auth = {"Authorization": f"Token {Token.objects.get_or_create(user=lead)[0].key}"}

    settings_db = connection.settings_dict
    database_url = (
        f"postgres://{settings_db['USER']}:{settings_db.get('PASSWORD') or ''}@{settings_db['HOST'] or '127.0.0.1'}:"
        f"{settings_db['PORT'] or 5432}/{settings_db['NAME']}"
    )
    work = Path(tempfile.mkdtemp(prefix="fairtone-two-web-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_", "CELERY_", "REDIS_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.test",
        DATABASE_URL=database_url,
        DATABASE_CONN_MAX_AGE="0",
        CELERY_BROKER_URL=redis_url(11),
        REDIS_CACHE_URL=redis_url(12),
        PYTHONPATH=str(ROOT),
        **s3_server.environment(bucket),
    )
    env.pop("FAIRTONE_REAL_WORKER", None)
    procs = Processes(env, work)
    try:
        procs.start(
            "worker",
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--loglevel=INFO", "--concurrency=2"]
            + ["--without-gossip", "--without-mingle", "--pool=prefork"],
        )
        web_a, web_b = procs.web("web-a"), procs.web("web-b")

        # Import through A: every photo, mask and derivative in the bucket; baselines from the worker.
        got = requests.post(
            f"{web_a}/api/projects/{project.pk}/imports/",
            headers=lead_auth,
            files=[("archive", ("study.zip", archive(), "application/zip"))],
            timeout=120,
        )
        assert got.status_code == 201, got.text[:500]
        assert Image.objects.filter(project=project).count() == N_IMAGES
        wait_for(
            lambda: ImageBaseline.objects.filter(image__project=project, status="ok").count() == N_IMAGES,
            "the worker's baselines",
            procs,
        )
        wait_for(
            lambda: not Image.objects.filter(project=project).exclude(derivative_status="ready").exists(),
            "the worker's display images",
            procs,
        )
        stored = objects()
        for image in Image.objects.filter(project=project):
            assert {image.original.name, image.mask.name, image.display.name, image.thumbnail.name} <= stored
        assert all(
            row.overlay.name in stored for row in ImageBaseline.objects.filter(image__project=project, status="ok")
        )

        # Labels: two labelers through A, two through B; tones by image, so the release has a spread.
        calibration_configure(project=project, size=N_IMAGES, calibration_1_size=N_IMAGES, n_repeated=0, seed=1)
        phase = phase_open(phase=phase_get(project, "calibration_1"), labels_per_image=4)
        for k, member in enumerate(members):
            base = web_a if k < 2 else web_b
            session = requests.Session()
            session.headers["Authorization"] = f"Token {Token.objects.get_or_create(user=member.user)[0].key}"
            for a in phase.assignments.filter(labeler=member).order_by("position"):
                r = session.post(
                    f"{base}/api/phases/{phase.pk}/labels/",
                    json={"client_id": str(uuid.uuid4()), "image": a.image_id, "tones": [1 + a.image_id % 10]},
                    timeout=60,
                )
                assert r.status_code == 201, r.text[:300]
        assert Label.objects.filter(phase=phase).count() == 4 * N_IMAGES

        # A release asked on A, built by the worker, downloaded from B.
        from labeling.services.releases import CARD_FIELDS, CATEGORIES

        body = {
            "include": dict.fromkeys(CATEGORIES, True),
            "card_text": {name: f"The {name}." for name in CARD_FIELDS},
        }
        asked = requests.post(f"{web_a}/api/projects/{project.pk}/releases/", json=body, headers=lead_auth, timeout=60)
        assert asked.status_code == 202, asked.text[:500]
        release = wait_for(
            lambda: Release.objects.filter(project=project, version=1, status__in=["published", "failed"]).first(),
            "the worker's release",
            procs,
        )
        assert release.status == "published", release.error
        zip_key = f"releases/{project.pk}/{release.manifest['zip']['name']}"
        downloaded = requests.get(
            f"{web_b}/api/projects/{project.pk}/releases/1/download/", headers=lead_auth, timeout=60
        )
        assert downloaded.status_code == 200
        assert downloaded.content == client.get_object(Bucket=bucket, Key=zip_key)["Body"].read()
        assert requests.get(f"{web_b}/api/projects/{project.pk}/releases/1/download/", timeout=30).status_code in (
            401,
            403,
        )

        # A model's results uploaded to B, scored by the worker, the report read from A.
        images = Image.objects.filter(project=project).order_by("id")
        rng = np.random.default_rng(11)
        results = pd.DataFrame(
            {"external_id": [i.external_id for i in images], "error": rng.normal(1.0, 0.1, N_IMAGES).round(4)}
        )
        created = requests.post(
            f"{web_b}/api/projects/{project.pk}/evaluations/",
            headers=lead_auth,
            data={"release": "1", "name": "two-web", "permutations": "9", "band_permutations": "99"},
            files={"file": ("results.csv", results.to_csv(index=False).encode(), "text/csv")},
            timeout=120,
        )
        assert created.status_code == 201, created.text[:500]
        run = wait_for(
            lambda: EvaluationRun.objects.filter(pk=created.json()["id"], status__in=["done", "failed"]).first(),
            "the worker's evaluation",
            procs,
        )
        assert run.status == "done", run.error
        report = requests.get(
            f"{web_a}/api/projects/{project.pk}/evaluations/{run.pk}/report/", headers=lead_auth, timeout=60
        )
        assert report.status_code == 200 and "skin_tone" in report.json()
        assert f"evaluations/{project.pk}/{run.pk}/report/report.json" in objects()

        # Erasure through A: exactly the subject's objects leave the bucket.
        gone = list(Image.objects.filter(project=project, subject__external_id=GONE))
        gone_names = {n for i in gone for n in (i.original.name, i.mask.name, i.display.name, i.thumbnail.name)}
        gone_names |= set(ImageBaseline.objects.filter(image__in=gone).values_list("overlay", flat=True))
        before = objects()
        erased = requests.post(
            f"{web_a}/api/projects/{project.pk}/subjects/{GONE}/erase/",
            json={"confirm": GONE, "reason": "asked"},
            headers=lead_auth,
            timeout=60,
        )
        assert erased.status_code in (200, 201), erased.text[:500]
        after = objects()
        assert gone_names and before - after == gone_names

        # Nothing of it was written under any process's MEDIA_ROOT.
        for root in procs.roots:
            assert files_under(root) == [], root
    finally:
        procs.stop()
