"""Benchmark the data manager (issue 14) on 100,000 images x 4 labels in PostgreSQL.

Run: ``python bench/bench_data_manager.py [n_images]``. Creates the database
``fairtone_bench_data`` on ``postgres@127.0.0.1:5432`` (dropped first, dropped again at the
end), migrates it and loads, with PostgreSQL ``COPY``: the images (dummy file names: the table
never opens the files), their subjects' attributes, the main phase's images, one assignment and one
label per image and labeler (a few assignments left to do). Then it times, in the same run, pages
of ``/projects/<id>/data/`` and ``/api/projects/<id>/data/`` through the Django test Client, each
against the trivial view ``/healthz`` measured in the same run (the ratio is what to compare
between machines). Goal: every page at most 1 s.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SERVER = "postgres://postgres@127.0.0.1:5432"
DB_NAME = "fairtone_bench_data"


def _admin(sql: str) -> None:
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def _timed(function, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return times


def main(n_images: int = 100_000, n_labelers: int = 4) -> None:
    _admin(f"DROP DATABASE IF EXISTS {DB_NAME}")
    _admin(f"CREATE DATABASE {DB_NAME}")
    os.environ["DATABASE_URL"] = f"{SERVER}/{DB_NAME}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.utils import timezone

    from labeling.models import Membership, Phase, Scale
    from labeling.services.projects import project_create
    from labeling.services.scales import scales_ensure_builtin

    try:
        start = time.perf_counter()
        call_command("migrate", verbosity=0)
        scales_ensure_builtin()
        user_model = get_user_model()
        lead = user_model.objects.create_user("lead", password="bench-pass-123")
        project = project_create(
            name="bench", scale=Scale.objects.get(kind=Scale.Kind.MONK, is_builtin=True), created_by=lead
        )
        labelers = [
            Membership.objects.create(
                project=project,
                user=user_model.objects.create_user(f"labeler{i}"),
                role=Membership.Role.LABELER,
                pseudonym=f"L{i}",
            )
            for i in range(1, n_labelers + 1)
        ]
        main_phase = project.phases.get(kind=Phase.Kind.MAIN)
        now = timezone.now()
        rng = np.random.default_rng(0)
        n_subjects = n_images // 4
        with connection.cursor() as cursor:
            raw = cursor.cursor  # the psycopg cursor, for COPY
            with raw.copy("COPY labeling_subject (project_id, external_id, attributes) FROM STDIN") as copy:
                for s in range(n_subjects):
                    attributes = {"gender": ["woman", "man", "nonbinary"][s % 3], "age_band": f"{20 + 10 * (s % 5)}s"}
                    copy.write_row((project.id, f"S{s:06d}", json.dumps(attributes)))
            raw.execute("SELECT id FROM labeling_subject WHERE project_id = %s ORDER BY id", [project.id])
            subject_ids = [row[0] for row in raw.fetchall()]
            with raw.copy(
                "COPY labeling_image (project_id, subject_id, external_id, original, original_filename, sha256,"
                " file_size, format, source_mode, exif_orientation, width, height, attributes, mask, mask_kind,"
                " display, thumbnail, derivative_status, derivative_error, is_synthetic, created_at) FROM STDIN"
            ) as copy:
                for i in range(n_images):
                    copy.write_row(
                        (
                            project.id,
                            subject_ids[i % n_subjects],
                            f"P_{i:06d}",
                            f"bench/dummy{i}.jpg",
                            f"dummy{i}.jpg",
                            f"{i:064x}",
                            1000,
                            "JPEG",
                            "RGB",
                            1,
                            640,
                            480,
                            json.dumps({"camera": ["A", "B"][i % 2]}),
                            "",
                            "",
                            "",
                            "",
                            "ready",
                            "",
                            True,
                            now,
                        )
                    )
            raw.execute("SELECT id FROM labeling_image WHERE project_id = %s ORDER BY id", [project.id])
            image_ids = [row[0] for row in raw.fetchall()]
            with raw.copy("COPY labeling_phaseimage (phase_id, image_id, is_repeat) FROM STDIN") as copy:
                for image_id in image_ids:
                    copy.write_row((main_phase.id, image_id, False))
            truth = rng.integers(1, 11, size=n_images)
            noise = rng.choice([-2, -1, 0, 0, 0, 1, 2], size=(n_labelers, n_images))
            tones = np.clip(truth + noise, 1, 10)
            # 1% of assignments still to do: no label yet.
            todo = rng.random(tones.shape) < 0.01
            with raw.copy(
                "COPY labeling_assignment (phase_id, labeler_id, image_id, position, is_repeat, kind,"
                " request_reason, done_at, created_at) FROM STDIN"
            ) as copy:
                for k, labeler in enumerate(labelers):
                    for i, image_id in enumerate(image_ids):
                        copy.write_row(
                            (
                                main_phase.id,
                                labeler.id,
                                image_id,
                                i + 1,
                                False,
                                "label",
                                "",
                                None if todo[k, i] else now,
                                now,
                            )
                        )
            with raw.copy(
                "COPY labeling_label (phase_id, image_id, labeler_id, is_repeat, tone_low, tone_high, value,"
                " uncertain, skip_reason, is_valid, n_revisions, time_spent_ms, created_at, updated_at) FROM STDIN"
            ) as copy:
                for k, labeler in enumerate(labelers):
                    for i, image_id in enumerate(image_ids):
                        if todo[k, i]:
                            continue
                        low = int(tones[k, i])
                        copy.write_row(
                            (
                                main_phase.id,
                                image_id,
                                labeler.id,
                                False,
                                low,
                                None,
                                float(low),
                                False,
                                "",
                                True,
                                1,
                                5000,
                                now,
                                now,
                            )
                        )
            for table in ("labeling_image", "labeling_label", "labeling_assignment", "labeling_phaseimage"):
                raw.execute(f"ANALYZE {table}")
        main_phase.status = Phase.Status.OPEN
        main_phase.save()
        print(
            f"set-up: {n_images:,} images, {main_phase.labels.count():,} labels, "
            f"{main_phase.assignments.count():,} assignments in {time.perf_counter() - start:.1f} s (COPY)"
        )

        # A lead excluded 1 image in 100 (data manager, with a reason): the "excluded" filter both ways.
        from labeling.models import ImageExclusion

        excluded_ids = list(project.images.order_by("id").values_list("id", flat=True)[::100])
        ImageExclusion.objects.bulk_create(
            [ImageExclusion(image_id=i, reason="blurry", excluded_by=lead) for i in excluded_ids], batch_size=5000
        )
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE labeling_imageexclusion")

        client = Client()
        client.force_login(lead)
        base = f"/projects/{project.id}/data/"
        api = f"/api/projects/{project.id}/data/"
        middle = n_images // 50 // 2
        cases = [
            ("page 1, sorted by id (default)", base),
            (f"page {middle} (deep offset)", f"{base}?page={middle}"),
            ("search by id part", f"{base}?search=P_0421"),
            ("filter: phase + attribute", f"{base}?phase={main_phase.id}&attr=gender:woman"),
            ("filter: a labeler's to-do", f"{base}?labeler={labelers[0].id}&labeler_status=pending"),
            ("filter: no near consensus", f"{base}?near_consensus=false"),
            ("filter: 3 labels or fewer", f"{base}?max_labels=3"),
            ("filter: excluded by a lead", f"{base}?excluded=true"),
            ("filter: not excluded, by mean", f"{base}?excluded=false&ordering=-mean"),
            ("sort: most labels first", f"{base}?ordering=-n_labels"),
            ("sort: widest range first", f"{base}?ordering=-range"),
            ("sort: mean, descending", f"{base}?ordering=-mean"),
            ("API: page 1", api),
            ("API: no near consensus, by range", f"{api}?near_consensus=false&ordering=-range"),
        ]
        for _, url in cases + [("", "/healthz")]:
            answer = client.get(url)
            assert answer.status_code == 200, (url, answer.status_code, answer.content[:300])
        health = _timed(lambda: client.get("/healthz"), 50)
        reference = statistics.median(health)
        print(f"reference /healthz: median {reference * 1000:.1f} ms (n=50)")
        worst = 0.0
        for name, url in cases:
            times = _timed(lambda url=url: client.get(url), 7)
            median = statistics.median(times)
            worst = max(worst, median)
            print(
                f"{name:36s} median {median * 1000:8.1f} ms  (min {min(times) * 1000:7.1f})  ratio {median / reference:6.1f}x"
            )
        # Right after a label changes: the per-image label statistics are computed again (one GROUP BY).
        from labeling.models import Label

        label = main_phase.labels.first()

        def changed_then_get():
            Label.objects.filter(pk=label.pk).update(updated_at=timezone.now())
            return client.get(f"{base}?near_consensus=false")

        times = _timed(changed_then_get, 5)
        median = statistics.median(times)
        worst = max(worst, median)
        print(
            f"{'right after a label change':36s} median {median * 1000:8.1f} ms  (min {min(times) * 1000:7.1f})  "
            f"ratio {median / reference:6.1f}x"
        )
        print(
            f"goal (every data manager page <= 1 s at {n_images:,} images): {'met' if worst <= 1 else 'NOT met'} ({worst:.3f} s)"
        )
    finally:
        from django.db import connections

        connections.close_all()
        _admin(f"DROP DATABASE IF EXISTS {DB_NAME}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
