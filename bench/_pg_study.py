"""A big study in PostgreSQL for the lead-page benchmarks, loaded with ``COPY``.

``study_load(n_images, n_labelers)`` (after ``django.setup()`` on a fresh database) creates a lead,
a Monk project, its labelers, ``n_images`` images (dummy file names: no page opens the files) in the
main phase, one label per image and labeler (seeded noise around a true tone, some adjacent pairs,
skips and uncertain answers) and, for each image, a current colorimetric baseline whose ITA follows
the true tone (a few flagged). Returns ``(lead, project, main_phase)``.
"""

from __future__ import annotations

import json

import numpy as np
import psycopg

SERVER = "postgres://postgres@127.0.0.1:5432"


def admin(sql: str) -> None:
    """Run ``sql`` on the server's ``postgres`` database (CREATE / DROP DATABASE)."""
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def database_fresh(name: str) -> None:
    """Drop and create the database ``name``, point Django at it (test settings) and set Django up."""
    import os

    admin(f"DROP DATABASE IF EXISTS {name}")
    admin(f"CREATE DATABASE {name}")
    os.environ["DATABASE_URL"] = f"{SERVER}/{name}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    import django

    django.setup()


def study_load(n_images: int, n_labelers: int = 4, seed: int = 0):
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from labeling.models import Membership, Phase, PhaseImage, Scale
    from labeling.services.baselines.parameters import (
        BASELINE_CODE_VERSION,
        baseline_parameters_effective,
        baseline_parameters_hash,
    )
    from labeling.services.projects import project_create
    from labeling.services.scales import scales_ensure_builtin

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
    parameters = baseline_parameters_effective(project)
    parameters_hash = baseline_parameters_hash(parameters)
    now = timezone.now()
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, 11, size=n_images)
    with connection.cursor() as cursor:
        raw = cursor.cursor  # the psycopg cursor, for COPY
        with raw.copy(
            "COPY labeling_image (project_id, external_id, original, original_filename, sha256, file_size,"
            " format, source_mode, exif_orientation, width, height, attributes, mask, mask_kind, display,"
            " thumbnail, derivative_status, derivative_error, is_synthetic, created_at) FROM STDIN"
        ) as copy:
            for i in range(n_images):
                attributes = json.dumps({"gender": ["woman", "man"][i % 2]})
                copy.write_row(
                    (project.id, f"img{i:06d}", f"bench/dummy{i}.jpg", f"dummy{i}.jpg", f"{i:064x}", 1000, "JPEG",
                     "RGB", 1, 640, 480, attributes, "", "", "", "", "ready", "", True, now)
                )  # fmt: skip
        raw.execute("SELECT id FROM labeling_image WHERE project_id = %s ORDER BY id", [project.id])
        image_ids = [row[0] for row in raw.fetchall()]
        PhaseImage.objects.bulk_create([PhaseImage(phase=main_phase, image_id=i) for i in image_ids], batch_size=5000)
        noise = rng.choice([-2, -1, 0, 0, 0, 1, 2], size=(n_labelers, n_images))
        tones = np.clip(truth + noise, 1, 10)
        pair = (rng.random(tones.shape) < 0.1) & (tones < 10)
        skip = rng.random(tones.shape) < 0.02
        uncertain = rng.random(tones.shape) < 0.1
        ms = rng.integers(2000, 12000, size=tones.shape)
        with raw.copy(
            "COPY labeling_label (phase_id, image_id, labeler_id, is_repeat, tone_low, tone_high, value,"
            " uncertain, skip_reason, is_valid, n_revisions, time_spent_ms, created_at, updated_at) FROM STDIN"
        ) as copy:
            for k, labeler in enumerate(labelers):
                for i, image_id in enumerate(image_ids):
                    if skip[k, i]:
                        row = (None, None, None, "no skin visible")
                    else:
                        low = int(tones[k, i])
                        high = low + 1 if pair[k, i] else None
                        row = (low, high, low + 0.5 if high else float(low), "")
                    copy.write_row(
                        (main_phase.id, image_id, labeler.id, False, row[0], row[1], row[2], bool(uncertain[k, i]),
                         row[3], True, 1, int(ms[k, i]), now, now)
                    )  # fmt: skip
        ita = 60.0 - 10.0 * truth + rng.normal(0, 6, size=n_images)
        flagged = rng.random(n_images) < 0.05
        with raw.copy(
            "COPY labeling_imagebaseline (image_id, parameters_hash, parameters, code_version, status, error,"
            " ita_median, lightness_median, b_median, skin_fraction, albedo, albedo_normalized, ita_class, flags,"
            " stats, overlay, computed_at) FROM STDIN"
        ) as copy:
            params_json = json.dumps(parameters)
            for i, image_id in enumerate(image_ids):
                albedo = float(np.clip(0.6 - 0.05 * truth[i] + rng.normal(0, 0.03), 0.01, 1))
                flags = json.dumps(["too_little_skin"] if flagged[i] else [])
                copy.write_row(
                    (image_id, parameters_hash, params_json, BASELINE_CODE_VERSION, "ok", "", float(ita[i]), 60.0,
                     15.0, 0.3, albedo, albedo, "intermediate", flags, "{}", "", now)
                )  # fmt: skip
        raw.execute("ANALYZE")
    return lead, project, main_phase
