"""Memory of each step of the release's data card facts, each step in a fresh process (issue 25).

Run: ``python bench/probe_release_memory.py [--db NAME] [--steps a,b] [--trace N]``. Uses the bench release's
database (``fairtone_bench_release``, made by ``bench/bench_release.py``; read only here). Each step runs
in a child process set up as the release job's (Django, ``labeling.services.releases.build`` imported,
inside ``build_memory()``) and prints its RSS after imports, its peak RSS (VmHWM) and the RSS when it is
done, so the steps of ``card_project_facts`` can be seen apart without the whole release. ``ita_audit`` and
``ita_correlations`` are the two parts of ``labels_vs_ita``; ``card_project_facts`` is every step in one
process (as the release runs them). The step ``imports`` does nothing: its peak is the floor every step starts from. ``--trace N`` also runs the step
under ``tracemalloc`` (slower) and prints the N source lines holding the most memory at the step's peak
(Python and NumPy allocations; not the C library's or Arrow's own).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SERVER = "postgres://postgres@127.0.0.1:5432"
PROJECT_NAME = "bench-release"


def _status_mb(key: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
    return 0.0


def _steps():
    """The steps of ``card_project_facts`` by name: each a function of (project, phases, pseudonyms)."""
    from labeling.services.baselines import baseline_audit, baseline_correlations
    from labeling.services.releases import card_facts as cf
    from labeling.services.releases.card_bands import agreement_by_band_facts
    from labeling.services.releases.card_protocol import protocol_facts

    return {
        "imports": lambda project, phases, pseudonyms: None,
        "ita_audit": lambda project, phases, pseudonyms: baseline_audit(project),
        "ita_correlations": lambda project, phases, pseudonyms: baseline_correlations(project=project),
        "team": lambda project, phases, pseudonyms: cf._team(project),
        "process": lambda project, phases, pseudonyms: cf._process(project, phases, pseudonyms),
        "composition": lambda project, phases, pseudonyms: cf._composition(project),
        "labels_vs_ita": lambda project, phases, pseudonyms: cf._labels_vs_ita(project),
        "agreement": lambda project, phases, pseudonyms: cf._agreement(project, phases),
        "agreement_by_band": lambda project, phases, pseudonyms: agreement_by_band_facts(project, phases, pseudonyms),
        "test_retest": lambda project, phases, pseudonyms: cf._test_retest(project, pseudonyms),
        "protocol": lambda project, phases, pseudonyms: protocol_facts(project, phases),
        "card_project_facts": lambda project, phases, pseudonyms: cf.card_project_facts(project, phases),
    }


STEP_NAMES = (
    "imports",
    "team",
    "process",
    "composition",
    "labels_vs_ita",
    "agreement",
    "agreement_by_band",
    "test_retest",
    "protocol",
    "card_project_facts",
    "ita_audit",
    "ita_correlations",
)


def child(db: str, step: str, trace: int) -> None:
    os.environ["DATABASE_URL"] = f"{SERVER}/{db}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    os.environ["DATABASE_CONN_MAX_AGE"] = "0"
    import django

    django.setup()
    from labeling.models import Membership, Project
    from labeling.services.releases import build  # noqa: F401  (the release job's imports)
    from labeling.services.releases.memory import build_memory

    project = Project.objects.filter(name=PROJECT_NAME).select_related("scale").get()
    phases = sorted(project.phases.order_by("id"), key=lambda p: (p.index, p.id))
    pseudonyms = dict(Membership.objects.filter(project=project).values_list("id", "pseudonym"))
    function = _steps()[step]
    peak = {"rss": 0.0, "stop": False, "traced": 0, "snapshot": None}

    def sample() -> None:
        while not peak["stop"]:
            peak["rss"] = max(peak["rss"], _status_mb("VmRSS:"))
            if trace:
                import tracemalloc

                current = tracemalloc.get_traced_memory()[0]
                if current > 1.05 * peak["traced"] + 2**20:  # a new peak: what holds it
                    peak["traced"], peak["snapshot"] = current, tracemalloc.take_snapshot()
            time.sleep(0.01)

    with build_memory():
        base = _status_mb("VmRSS:")
        if trace:
            import tracemalloc

            tracemalloc.start(1)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        start = time.perf_counter()
        result = function(project, phases, pseudonyms)
        seconds = time.perf_counter() - start
        peak["stop"] = True
        sampler.join()
        top = []
        if trace:
            import tracemalloc

            traced_peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            snapshot = peak["snapshot"]
            if snapshot is not None:
                top = [f"{s.traceback}: {s.size / 2**20:.1f} MB" for s in snapshot.statistics("lineno")[:trace]]
            top.insert(0, f"(sampled at {peak['traced'] / 2**20:.0f} MB traced)")
        digest = json.dumps(result, sort_keys=True, default=str) if result is not None else ""
        del result
    out = {
        "step": step,
        "seconds": seconds,
        "rss_after_imports_mb": base,
        "peak_rss_mb": _status_mb("VmHWM:"),
        "sampled_peak_mb": peak["rss"],
        "rss_done_mb": _status_mb("VmRSS:"),
        "result_sha": __import__("hashlib").sha256(digest.encode()).hexdigest()[:16],
        # Imported by the step and kept for the rest of the job: scipy.stats alone is 45 MB of RSS.
        "imported": sorted(name for name in ("scipy.stats", "scipy.special", "matplotlib") if name in sys.modules),
    }
    if trace:
        out["traced_peak_mb"] = traced_peak
        out["top_at_end"] = top
    print(json.dumps(out))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--db", default=os.environ.get("BENCH_DB", "fairtone_bench_release"))
    p.add_argument("--steps", default=",".join(STEP_NAMES[:-3]), help="comma-separated, of: " + ", ".join(STEP_NAMES))
    p.add_argument("--trace", type=int, default=0, help="also trace the step's Python/NumPy allocations (top N)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.db, args.child, args.trace)
        return
    print(f"database {args.db}; each step in a fresh process (the release job's imports, inside build_memory())")
    print(
        f"  {'step':<20} {'after imports':>14} {'peak (VmHWM)':>13} {'peak - imports':>15} {'done':>8} {'time':>8}  result"
    )
    floor = None
    for step in args.steps.split(","):
        command = [sys.executable, __file__, "--child", step, "--db", args.db, "--trace", str(args.trace)]
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            raise SystemExit(f"step {step} failed (exit {done.returncode})")
        r = json.loads(done.stdout.strip().splitlines()[-1])
        if step == "imports":
            floor = r["peak_rss_mb"]
        print(
            f"  {step:<20} {r['rss_after_imports_mb']:11.0f} MB {r['peak_rss_mb']:10.0f} MB "
            f"{r['peak_rss_mb'] - r['rss_after_imports_mb']:12.0f} MB {r['rss_done_mb']:5.0f} MB "
            f"{r['seconds']:6.1f} s  {r['result_sha']}  {', '.join(r['imported'])}"
        )
        if args.trace:
            print(f"      traced peak (Python + NumPy): {r['traced_peak_mb']:.0f} MB; held near the peak:")
            for line in r["top_at_end"]:
                print(f"        {line}")
    if floor is not None:
        print(f"  (the floor: {floor:.0f} MB peak with the imports alone)")


if __name__ == "__main__":
    main()
