"""Hostile uploads are refused at once with flat memory (issue 26): the bounded checks a web request runs.

Each case runs in a fresh Python process (its peak RSS is its own): the check the web request makes before
anything is parsed (``joining.results_columns`` then ``read_results`` of the needed columns for an evaluation's results, as
a request does for a file under 1 MiB; ``parse_manifest`` for an import manifest), on a hostile file the bench writes, beside the same check on a small ordinary file as the
reference measured in the same run. Printed: time (ms), peak RSS (MB) above the process's baseline, the
answer, and ratios to the reference.

    python bench/bench_hostile_uploads.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, resource, sys, time
sys.path.insert(0, os.environ["ROOT"])
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
import django
django.setup()
from django.conf import settings
if os.environ.get("FAIRTONE_MAX_MANIFEST_COLUMNS"):
    settings.FAIRTONE = {
        **settings.FAIRTONE,
        "MAX_MANIFEST_COLUMNS": int(os.environ["FAIRTONE_MAX_MANIFEST_COLUMNS"]),
        "MAX_MANIFEST_LINE_CHARS": 10**8,
    }
from pathlib import Path
from labeling.services.evaluations import joining
from labeling.services.imports.manifest import parse_manifest
from labeling.services.imports.sources import ImportRefused
kind, path = sys.argv[1], Path(sys.argv[2])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
try:
    if kind == "results":  # the request's own steps: the file's shape, then only the needed columns read
        columns = joining.results_columns(path)
        table = joining.read_results(path, joining.needed_columns(columns, joining.JoinSpec()))
        answer = f"accepted: {len(table)} rows"
    else:
        answer = f"accepted: {len(parse_manifest(path.read_bytes(), path.name))} rows"
except (joining.ResultsError, ImportRefused) as exc:
    answer = "refused: " + str(getattr(exc, "problems", [exc])[0])[:90]
elapsed = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"ms": elapsed * 1000, "rss_mb": (peak - base) / 1024, "answer": answer}))
"""


def measure(kind: str, path: Path, env_extra: dict | None = None) -> dict:
    env = {**os.environ, "ROOT": str(ROOT), **(env_extra or {})}
    out = subprocess.run([sys.executable, "-c", CHILD, kind, str(path)], env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        small_csv = d / "results.csv"
        small_csv.write_text("external_id,error\n" + "".join(f"s{i},{i % 7}\n" for i in range(200)))
        wide_csv = d / "wide.csv"
        wide_csv.write_bytes(",".join(f"c{i}" for i in range(1_000_000)).encode() + b"\n" + b"1," * 10 + b"1\n")
        small_parquet = d / "results.parquet"
        pq.write_table(pa.table({"external_id": [f"s{i}" for i in range(200)], "error": np.ones(200)}), small_parquet)
        bomb = d / "bomb.parquet"
        rows = 300_000
        column = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, dtype=np.int32)), pa.array(["x" * 4000]))
        pq.write_table(pa.table({"external_id": column, "error": np.ones(rows)}), bomb, compression="zstd")
        manifest = d / "manifest.csv"
        manifest.write_text("file,gender\n" + "".join(f"p{i}.png,f\n" for i in range(200)))
        wide_manifest = d / "wide-manifest.csv"
        wide_manifest.write_text(",".join(["file", *(f"c{i}" for i in range(999_999))]) + "\na.png\n")

        cases = [
            ("evaluation results", "results", small_csv, "200-row CSV (reference)"),
            (
                "evaluation results",
                "results",
                wide_csv,
                f"1,000,000-column CSV ({wide_csv.stat().st_size / 1e6:.1f} MB)",
            ),
            ("evaluation results", "results", small_parquet, "200-row Parquet (reference)"),
            (
                "evaluation results",
                "results",
                bomb,
                f"Parquet bomb ({bomb.stat().st_size / 1e3:.0f} KB, 1.2 GB as text)",
            ),
            ("import manifest", "manifest", manifest, "200-row manifest (reference)"),
            (
                "import manifest",
                "manifest",
                wide_manifest,
                f"1,000,000-column manifest ({wide_manifest.stat().st_size / 1e6:.1f} MB)",
            ),
        ]
        reference = {}
        for what, kind, path, label in cases:
            r = measure(kind, path)
            key = (what, path.suffix)
            if "reference" in label:
                reference[key] = r
            ref = reference.get(key) or reference.get((what, ".csv"))
            ratio = (
                f"  {r['ms'] / ref['ms']:5.1f}x time, {r['rss_mb'] - ref['rss_mb']:+6.1f} MB vs reference"
                if ref and ref is not r
                else ""
            )
            print(f"{what:18} {label:48} {r['ms']:8.1f} ms {r['rss_mb']:7.1f} MB  {r['answer'][:70]}{ratio}")
        # Linear duplicate-column check: 5,001 and 50,001 columns under a raised cap; time ratio ~10x if linear.
        for n in (5_001, 50_001):
            path = d / f"dup-{n}.csv"
            path.write_text(",".join(["file", *(f"c{i}" for i in range(n - 2)), "C7"]) + "\na.png\n")
            r = measure("manifest", path, {"FAIRTONE_MAX_MANIFEST_COLUMNS": str(n + 10)})
            print(
                f"{'import manifest':18} {f'{n:,} columns, one repeated (cap raised)':48} {r['ms']:8.1f} ms {r['rss_mb']:7.1f} MB  {r['answer'][:70]}"
            )


if __name__ == "__main__":
    main()
