"""Time every lead page, first visit (cold cache) and warm: on the demo, and on a 100,000-image study.

Run: ``python bench/bench_lead_pages.py [--precomputed]`` for the demo, ``python
bench/bench_lead_pages.py --images 100000 [--precomputed]`` for the big study. The demo run builds the demo (``manage.py demo_setup``: the same
projects, images and simulated labels as ``bin/demo``) in a temporary SQLite database with jobs run
in-process, as a user's first run does, then requests each lead page through the Django test Client
signed in as the demo's lead:

- *first*: the first request after the cache is cleared (what a lead meets after labels change when no
  worker precomputed anything; with ``--precomputed`` the background precompute a real worker runs
  after each label is run first, so this is what a lead meets with a worker);
- *warm*: the median of the next five requests.

Figures are printed in ms and as a ratio to ``/healthz`` measured in the same run (these machines are
noisy). Goal (issue 14): every lead page within 1 s on the demo, first visit included.

With ``--images N`` it loads, in the PostgreSQL database ``fairtone_bench_lead`` (dropped first and at
the end), N images x 4 labels in the main phase and a current baseline per image
(``bench/_pg_study.py``), and times the project's lead pages the same way. Goal: within 1 s once
warm, and no lead waiting for a first computation when a worker precomputes (``--precomputed``).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _timed(function, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return times


def demo_urls(project, Phase) -> list[str]:
    p = project.id
    phases = list(project.phases.order_by("id"))
    main_phase = next(ph for ph in phases if ph.kind == Phase.Kind.MAIN)
    post = next(ph for ph in phases if ph.kind == Phase.Kind.POST_CALIBRATION)
    image = project.images.order_by("id").first()
    return [
        f"/projects/{p}/",
        f"/projects/{p}/images/",
        f"/projects/{p}/data/",
        f"/projects/{p}/members/",
        f"/projects/{p}/examples/",
        f"/projects/{p}/calibration/",
        f"/projects/{p}/settings/",
        f"/projects/{p}/consensus/",
        f"/projects/{p}/consensus/?phase={main_phase.id}",
        f"/projects/{p}/consensus/images/",
        f"/projects/{p}/baselines/",
        f"/projects/{p}/baselines/compare/",
        f"/projects/{p}/jobs/",
        f"/projects/{p}/releases/",
        f"/projects/{p}/evaluations/",
        f"/phases/{main_phase.id}/",
        f"/phases/{post.id}/review/",
        f"/images/{image.id}/",
    ]


def time_pages(client, urls: list[str], precompute) -> None:
    from django.core.cache import cache

    health = statistics.median(_timed(lambda: client.get("/healthz"), 30))
    print(f"/healthz median {health * 1000:.1f} ms (the reference)\n")
    print(f"{'page':<48} {'status':>6} {'first ms':>9} {'x':>6} {'warm ms':>9} {'x':>6}")
    worst_first = worst_warm = 0.0
    for url in urls:
        cache.clear()
        precompute()
        start = time.perf_counter()
        status = client.get(url).status_code
        first = time.perf_counter() - start
        warm = statistics.median(_timed(lambda url=url: client.get(url), 5))
        worst_first, worst_warm = max(worst_first, first), max(worst_warm, warm)
        print(
            f"{url:<48} {status:>6} {first * 1000:9.0f} {first / health:6.0f} {warm * 1000:9.0f} {warm / health:6.0f}"
        )
    print(f"\nslowest first visit {worst_first * 1000:.0f} ms, slowest warm {worst_warm * 1000:.0f} ms (goal: 1000 ms)")


def _precompute_function(enabled: bool):
    def precompute():
        if enabled:
            from labeling.models import Project
            from labeling.services.precompute import project_precompute

            for project in Project.objects.all():
                project_precompute(project)

    return precompute


def main_demo(precomputed: bool = False) -> None:
    workdir = tempfile.mkdtemp(prefix="fairtone-bench-lead-")
    os.environ["DATABASE_URL"] = f"sqlite:///{workdir}/db.sqlite3"
    os.environ["FAIRTONE_MEDIA_ROOT"] = f"{workdir}/media"
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from labeling.models import Phase, Project

    start = time.perf_counter()
    call_command("migrate", verbosity=0)
    call_command("demo_setup", verbosity=0, stdout=open(os.devnull, "w"))
    print(f"demo set-up in {time.perf_counter() - start:.1f} s ({workdir})")
    lead = get_user_model().objects.get(username="lead")
    client = Client()
    client.force_login(lead)

    urls: list[str] = ["/"]
    for project in Project.objects.order_by("id"):
        urls += demo_urls(project, Phase)
    time_pages(client, urls, _precompute_function(precomputed))


def main_big(n_images: int, precomputed: bool = False) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from _pg_study import admin, database_fresh, study_load

    db_name = "fairtone_bench_lead"
    database_fresh(db_name)
    from django.core.management import call_command
    from django.test import Client

    try:
        start = time.perf_counter()
        call_command("migrate", verbosity=0)
        lead, project, main_phase = study_load(n_images)
        print(f"set-up: {n_images:,} images x 4 labels and baselines in {time.perf_counter() - start:.0f} s (COPY)")
        client = Client()
        client.force_login(lead)
        p = project.id
        post = project.phases.get(kind="post_calibration")
        image = project.images.order_by("id").first()
        urls = [
            "/",
            f"/projects/{p}/",
            f"/projects/{p}/images/",
            f"/projects/{p}/data/",
            f"/projects/{p}/members/",
            f"/projects/{p}/calibration/",
            f"/projects/{p}/consensus/",
            f"/projects/{p}/consensus/?phase={main_phase.id}",
            f"/projects/{p}/consensus/images/?phase={main_phase.id}",
            f"/projects/{p}/baselines/",
            f"/projects/{p}/baselines/compare/",
            f"/projects/{p}/jobs/",
            f"/projects/{p}/releases/",
            f"/phases/{main_phase.id}/",
            f"/phases/{post.id}/review/",
            f"/images/{image.id}/",
        ]
        time_pages(client, urls, _precompute_function(precomputed))
        # Deleting the whole project (rows in one transaction; no files here: the images are dummies).
        from labeling.services.project_lifecycle import project_delete

        start = time.perf_counter()
        counts = project_delete(project=project, user=lead, confirm=True)
        print(f"\nproject delete: {counts} in {time.perf_counter() - start:.1f} s")
    finally:
        from django.db import connections

        connections.close_all()
        admin(f"DROP DATABASE IF EXISTS {db_name}")


if __name__ == "__main__":
    precomputed = "--precomputed" in sys.argv
    if "--images" in sys.argv:
        main_big(int(sys.argv[sys.argv.index("--images") + 1]), precomputed)
    else:
        main_demo(precomputed)
