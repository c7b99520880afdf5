"""First visit of the lead's pages in a fresh web process, with and without the preload (issue 24).

Each case runs in a new Python process on the demo's database (``bin/demo`` makes ``var/fairtone.sqlite3``;
``--db`` another SQLite file): it loads the WSGI application as a server does (``config.wsgi``, which preloads
the heavy modules unless ``FAIRTONE_PRELOAD=0``), signs in as the demo's lead and times the first GET of each
page with the cache cleared. Printed: the process's start (application loaded), each page's first visit and
the slowest, in ms, and the slowest as a ratio to ``/healthz`` in the same process (noisy machines).

    python bench/bench_first_visit.py [--db var/fairtone.sqlite3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, sys, time
sys.path.insert(0, os.environ["ROOT"])
t0 = time.perf_counter()
import config.wsgi  # the application, as gunicorn loads it (preload included unless FAIRTONE_PRELOAD=0)
started = time.perf_counter() - t0
from django.core.cache import cache
from django.test import Client
from labeling.models import Project
from django.contrib.auth import get_user_model
project = Project.objects.filter(name__startswith="Demo").order_by("id").first()
lead = get_user_model().objects.get(username="lead")
client = Client()
client.force_login(lead)
p = project.id
pages = [f"/projects/{p}/", f"/projects/{p}/consensus/", f"/projects/{p}/baselines/", f"/projects/{p}/releases/",
         f"/projects/{p}/data/", f"/projects/{p}/baselines/audit/", f"/projects/{p}/evaluations/", "/healthz"]
times = {}
for path in pages:
    cache.clear()
    t = time.perf_counter()
    r = client.get(path)
    times[path] = (time.perf_counter() - t) * 1000
    assert r.status_code == 200, (path, r.status_code)
print(json.dumps({"start_ms": started * 1000, "times": times}))
"""


def run(db: Path, preload: bool) -> dict:
    env = {
        **os.environ,
        "ROOT": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "DATABASE_URL": f"sqlite:///{db}",
        "FAIRTONE_PRELOAD": "1" if preload else "0",
        "DJANGO_DEBUG": "0",
        "DJANGO_ALLOWED_HOSTS": "testserver,localhost",
    }
    env.pop("CELERY_BROKER_URL", None)
    env.pop("REDIS_CACHE_URL", None)
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", type=Path, default=ROOT / "var" / "fairtone.sqlite3")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    if not args.db.exists():
        sys.exit(f"{args.db} not found: run bin/demo once (or give --db)")
    for run_no in range(args.runs):
        for preload in (False, True):
            result = run(args.db, preload)
            times = {k: v for k, v in result["times"].items() if k != "/healthz"}
            slowest = max(times, key=times.get)
            health = result["times"]["/healthz"]
            print(
                f"run {run_no + 1} preload={'on ' if preload else 'off'}: start {result['start_ms']:6.0f} ms, "
                f"slowest first visit {times[slowest]:6.0f} ms ({slowest.split('/', 3)[-1] or 'overview'}), "
                f"{times[slowest] / health:5.0f}x /healthz; sum of first visits {sum(times.values()):6.0f} ms"
            )


if __name__ == "__main__":
    main()
