"""Benchmark: an evaluation run from upload to finished report against the ``metrics`` calls alone.

Run ``python bench/bench_evaluation.py [n_subjects]`` (default 50,000; needs the PostgreSQL server on
127.0.0.1:5432, as CI's). Data: a published release's images table of n subjects (gender, body shape,
final tone = mean of 4 labels on MST 1-10, its min and max) written straight to the release's files (the
release build has its own benchmark, ``bench_release.py``), and a model's results (boundary error rising
at the deep end) as a CSV upload.

Reference, in the same run: ``metrics.report.write_report`` on the same two tables as files (what
``python -m metrics report`` runs). The app: ``evaluation_create`` (upload stored, read, validated,
joined, composition) + the job (``evaluation_run``: the same report, stored). Goal (issue 11): the app
at most 1.5x the reference. The permutation null's cost is measured by ``bench_intersectional.py``.
"""

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SERVER = "postgres://postgres@127.0.0.1:5432"
DB_NAME = "fairtone_bench_evaluation"


def _admin(sql: str) -> None:
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def tables(n: int, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    labels = np.clip(rng.integers(1, 11, n)[:, None] + rng.integers(-1, 2, (n, 4)), 1, 10)
    images = pd.DataFrame(
        {
            "image_id": np.arange(1, n + 1),
            "external_id": [f"img{i:06d}" for i in range(n)],
            "subject_id": [f"S{i:06d}" for i in range(n)],
            "sha256": "0" * 64,
            "gender": rng.choice(["woman", "man", "nonbinary"], n, p=[0.48, 0.48, 0.04]),
            "body_shape": rng.lognormal(-1.2, 0.25, n),
            "final_value": labels.mean(axis=1),
            "min": labels.min(axis=1).astype(float),
            "max": labels.max(axis=1).astype(float),
            "excluded": False,
            "excluded_reason": None,
        }
    )
    error = np.abs(rng.normal(1.0, 0.4, n)) + 1.5 * (images["final_value"].to_numpy() >= 8.5)
    results = pd.DataFrame({"external_id": images["external_id"], "error": error})
    return images, results


def main(n: int = 50_000) -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-evaluation-"))
    _admin(f"DROP DATABASE IF EXISTS {DB_NAME}")
    _admin(f"CREATE DATABASE {DB_NAME}")
    os.environ["DATABASE_URL"] = f"{SERVER}/{DB_NAME}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    os.environ["FAIRTONE_MEDIA_ROOT"] = str(work / "media")
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.core.management import call_command

    from labeling.models import Release, Scale
    from labeling.services import evaluations as svc
    from labeling.services.projects import project_create
    from labeling.services.releases import release_dir
    from labeling.services.scales import scales_ensure_builtin
    from metrics.report import ReportOptions, write_report

    settings.MEDIA_ROOT = str(work / "media")
    try:
        call_command("migrate", verbosity=0)
        scales_ensure_builtin()
        lead = get_user_model().objects.create_user("lead", password="bench-pass-123")
        project = project_create(
            name="bench", scale=Scale.objects.get(kind=Scale.Kind.MONK, is_builtin=True), created_by=lead
        )
        images, results = tables(n)
        release = Release.objects.create(
            project=project,
            version=1,
            status=Release.Status.PUBLISHED,
            manifest={"files": {"images.parquet": {}}},
        )
        release_dir(release).mkdir(parents=True)
        images.to_parquet(release_dir(release) / "images.parquet", index=False)
        attributes = work / "images.parquet"
        images.to_parquet(attributes, index=False)
        upload = work / "results.csv"
        results.to_csv(upload, index=False)
        payload = upload.read_bytes()
        print(f"{n:,} subjects; results file {len(payload) / 1e6:.1f} MB (CSV)")

        options = {"permutations": 199}
        timings = {"metrics": [], "app": []}
        for repeat in range(2):
            start = time.perf_counter()
            write_report(
                ReportOptions(
                    attributes=attributes,
                    predictions=upload,
                    out=work / f"cli-{repeat}",
                    on="external_id",
                    skin_tone="final_value",
                    gender="gender",
                    body_shape="body_shape",
                    tone_min="min",
                    tone_max="max",
                    groups=["gender"],
                    progress=False,
                    tone_levels=10,
                    permutations=options["permutations"],
                )
            )
            timings["metrics"].append(time.perf_counter() - start)
            start = time.perf_counter()
            run = svc.evaluation_create(
                project=project,
                user=lead,
                release=release,
                upload=SimpleUploadedFile("results.csv", payload, content_type="text/csv"),
                name=f"bench {repeat}",
                options=options,
            )
            # The job runs in this process once the upload is stored (no broker here), as on the embedded default.
            run = svc.evaluation_run(run)
            timings["app"].append(time.perf_counter() - start)
            assert run.status == "done", run.error
            print(
                f"repeat {repeat + 1}: metrics alone {timings['metrics'][-1]:.1f} s; "
                f"app (upload to finished report) {timings['app'][-1]:.1f} s"
            )
        cli = json.loads((work / "cli-1" / "report.json").read_text())
        same = all(
            abs(cli[k]["seed_000"]["score"] - run.report[k]["seed_000"]["score"]) < 1e-9
            and cli[k]["verdict"]["gap_ci"] == run.report[k]["verdict"]["gap_ci"]
            for k in ("gender", "skin_tone", "body_shape")
        )
        best = {k: min(v) for k, v in timings.items()}
        ratio = best["app"] / best["metrics"]
        grid = run.report["intersectional"]["verdict"] or {}
        print(f"same scores and verdicts as the CLI: {same}; intersectional grid {grid.get('level')}")
        print(
            f"best of 2: metrics alone {best['metrics']:.1f} s, app {best['app']:.1f} s: "
            f"ratio {ratio:.2f}x (goal <= 1.5x: {'met' if ratio <= 1.5 else 'NOT met'})"
        )
    finally:
        from django.db import connections

        connections.close_all()
        _admin(f"DROP DATABASE IF EXISTS {DB_NAME}")
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50_000)
