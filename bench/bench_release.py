"""Benchmark a dataset release on 250,000 images x 4 labels (1,000,000 labels) in PostgreSQL.

Run: ``python bench/bench_release.py [--small] [--images N] [--fresh] [--no-baselines]``. Uses the
database ``fairtone_bench_release`` (``..._<N>`` for another size) on ``postgres@127.0.0.1:5432``,
kept between runs: the data is generated once (``--fresh`` drops and makes it again). The data is a
finished study made by SQL (``INSERT ... SELECT generate_series``, no Python loop per row): subjects
with attributes, images pointing to one placeholder file (the release is built without images),
four labelers with pseudonyms, the four phases closed with their participants, calibration 2 with
repeats, one revision per label (some labels changed, relabelled in post-calibration or corrected by
the lead, each a revision more), open relabel requests, and a colorimetric baseline per image.

Measured in the same run:

(a) the whole release job (``labeling.services.releases.release_build``: tables in CSV, JSON Lines
    and Parquet, labelers, data card, manifest, zip, publishing) in a CHILD process: its peak RSS
    (``getrusage(RUSAGE_CHILDREN).ru_maxrss``, and per stage from /proc/self/status sampled in the
    child) and its time per stage. Goal: peak RSS <= 300 MB.
(b) writing the ``labels`` table as Parquet alone through the release's own code (``release_chunks``
    + ``label_table`` + ``TableWriter(formats=("parquet",))``; the file is checked byte for byte
    against the release's ``labels.parquet``), against ``COPY (SELECT <the same columns and rows>)
    TO STDOUT`` through psycopg into a null sink, ``--repeat`` times: the ratio of each run to the COPY
    measured right after it is printed, and the worst of them. Goal: ratio <= 3 in every run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SERVER = "postgres://postgres@127.0.0.1:5432"
DB_NAME = os.environ.get("BENCH_DB", "fairtone_bench_release")  # another name when benches run side by side
PROJECT_NAME = "bench-release"
N_LABELERS = 4
N_CALIBRATION = 300  # images of each calibration phase
N_REPEATS = 60  # calibration-1 images repeated in calibration 2
N_OPEN_RELABELS = 100
RSS_GOAL_MB = 300
RATIO_GOAL = 3.0


def _admin(sql: str) -> None:
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def _db_exists(name: str) -> bool:
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is not None


def _django(db_name: str, media_root: str) -> None:
    os.environ["DATABASE_URL"] = f"{SERVER}/{db_name}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    os.environ["FAIRTONE_MEDIA_ROOT"] = media_root
    os.environ["DATABASE_CONN_MAX_AGE"] = "0"
    import django

    django.setup()


def _mb(kb: float) -> float:
    return kb / 1024


# --------------------------------------------------------------------------- data


def _project():
    from labeling.models import Project

    return Project.objects.filter(name=PROJECT_NAME).select_related("scale").first()


def _has_data(n_images: int) -> bool:
    from labeling.models import Label

    project = _project()
    return (
        project is not None
        and project.images.count() == n_images
        and Label.objects.filter(phase__project=project).count() >= n_images * N_LABELERS
    )


def generate(n_images: int, with_baselines: bool) -> None:
    """The finished study, made by SQL in PostgreSQL (a few statements, no Python loop per row)."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.utils import timezone

    from colorimetry import ITA_CLASSES
    from labeling.models import Membership, Phase, Scale
    from labeling.services.baselines import (
        BASELINE_CODE_VERSION,
        baseline_parameters_effective,
        baseline_parameters_hash,
    )
    from labeling.services.projects import project_create
    from labeling.services.scales import scales_ensure_builtin

    call_command("migrate", verbosity=0)
    scales_ensure_builtin()
    user_model = get_user_model()
    with transaction.atomic():
        lead = user_model.objects.create_user("lead", password="bench-pass-123")
        project = project_create(
            name=PROJECT_NAME, scale=Scale.objects.get(kind=Scale.Kind.MONK, is_builtin=True), created_by=lead
        )
        labelers = [
            Membership.objects.create(
                project=project,
                user=user_model.objects.create_user(f"labeler{i}"),
                role=Membership.Role.LABELER,
                pseudonym=f"L{i}",
                gender=("female", "male")[i % 2],
                region_of_upbringing=("Europe", "Africa", "Asia", "Americas")[i % 4],
            )
            for i in range(1, N_LABELERS + 1)
        ]
        phases = {p.kind: p for p in project.phases.all()}
        now = timezone.now()
        for k, kind in enumerate(Phase.ORDER):
            phase = phases[kind]
            phase.status = Phase.Status.CLOSED
            phase.opened_at = now - timezone.timedelta(days=40 - 10 * k)
            phase.closed_at = now - timezone.timedelta(days=31 - 10 * k)
            if kind == Phase.Kind.CALIBRATION_1:
                phase.selection_method, phase.selection_seed = "random", 1234
            if kind == Phase.Kind.CALIBRATION_2:
                phase.n_repeated = N_REPEATS
            phase.save()
        c1, c2, main, post = (phases[kind].id for kind in Phase.ORDER)
        ids = [m.id for m in labelers]
        parameters = baseline_parameters_effective(project)
        ita_case = "CASE " + " ".join(
            f"WHEN ita > {bound} THEN '{name}'" for bound, name in ITA_CLASSES if bound != float("-inf")
        )
        ita_case += f" ELSE '{ITA_CLASSES[-1][1]}' END"
        n_subjects = max(1, n_images // 5)
        statements = [
            "SELECT setseed(0.42)",
            f"""INSERT INTO labeling_subject (project_id, external_id, attributes)
                SELECT {project.id}, 'S' || lpad(g::text, 7, '0'), jsonb_build_object(
                    'gender', (ARRAY['female', 'male', 'non-binary'])[1 + g % 3],
                    'age', 18 + (g * 7) % 60,
                    'body_shape', (ARRAY['slim', 'average', 'broad'])[1 + (g / 3) % 3])
                FROM generate_series(1, {n_subjects}) g""",
            f"""INSERT INTO labeling_image (project_id, subject_id, external_id, original, original_filename, sha256,
                    file_size, format, source_mode, exif_orientation, width, height, attributes, mask, mask_kind,
                    display, thumbnail, derivative_status, derivative_error, is_synthetic, created_at)
                SELECT {project.id}, s0.id + (g - 1) % {n_subjects}, 'img' || lpad(g::text, 7, '0'),
                    'bench/placeholder.jpg', 'img' || g || '.jpg', md5(g::text) || md5('x' || g), 1000, 'JPEG', 'RGB',
                    1, 640, 480, '{{}}', '', '', '', '', 'ready', '', true, now()
                FROM generate_series(1, {n_images}) g,
                     (SELECT min(id) AS id FROM labeling_subject WHERE project_id = {project.id}) s0""",
            # Phases: calibration 1 = the first N images, calibration 2 = the next N plus repeats of
            # calibration-1 images, main = every other image.
            f"""CREATE TEMP TABLE bench_images AS
                SELECT id, row_number() OVER (ORDER BY id) AS k FROM labeling_image WHERE project_id = {project.id}""",
            f"""INSERT INTO labeling_phaseimage (phase_id, image_id, is_repeat)
                SELECT CASE WHEN k <= {N_CALIBRATION} THEN {c1} WHEN k <= {2 * N_CALIBRATION} THEN {c2}
                            ELSE {main} END, id, false FROM bench_images
                UNION ALL SELECT {c2}, id, true FROM bench_images WHERE k <= {N_REPEATS}""",
            f"""INSERT INTO labeling_phaseparticipant (phase_id, labeler_id, shuffle_seed, joined_at)
                SELECT p, m, p * 1000 + m, now() FROM unnest(ARRAY[{c1}, {c2}, {main}]) p,
                    unnest(ARRAY{ids}) m""",
            # One label per (phase image, labeler), inserted in a shuffled order (labelers work through
            # shuffled queues): truth per image, noise, pairs, skips, uncertain flags, a few changes.
            f"""CREATE TEMP TABLE bench_draws AS
                SELECT pi.phase_id, pi.image_id, pi.is_repeat, m AS labeler_id,
                    1 + (hashint8(pi.image_id) & 2147483647) % 10 AS truth, random() AS r_noise, random() AS r_pair,
                    random() AS r_skip, random() AS r_unc, random() AS r_change, random() AS r_order,
                    2000 + floor(random() * 10000)::int AS ms, floor(random() * 12)::int AS display
                FROM labeling_phaseimage pi, unnest(ARRAY{ids}) m
                WHERE pi.phase_id IN ({c1}, {c2}, {main})""",
            """CREATE TEMP TABLE bench_labels AS
                SELECT d.*, CASE WHEN r_skip < 0.02 THEN NULL ELSE least(10, greatest(1, truth +
                    CASE WHEN r_noise < 0.1 THEN -1 WHEN r_noise < 0.2 THEN 1 WHEN r_noise < 0.22 THEN -2
                         WHEN r_noise < 0.24 THEN 2 ELSE 0 END)) END AS low
                FROM bench_draws d""",
            """INSERT INTO labeling_label (phase_id, image_id, labeler_id, is_repeat, tone_low, tone_high, value,
                    uncertain, skip_reason, is_valid, n_revisions, time_spent_ms, created_at, updated_at)
                SELECT phase_id, image_id, labeler_id, is_repeat, low,
                    CASE WHEN low < 10 AND r_pair < 0.08 THEN low + 1 END,
                    CASE WHEN low IS NULL THEN NULL WHEN low < 10 AND r_pair < 0.08 THEN low + 0.5 ELSE low END,
                    r_unc < 0.1, CASE WHEN low IS NULL THEN 'no skin visible' ELSE '' END, true,
                    CASE WHEN r_change < 0.03 THEN 2 ELSE 1 END, ms, now(), now()
                FROM bench_labels ORDER BY random()""",
            # Revisions: the first answer (a different tone for the 3% that were changed), then the change.
            f"""CREATE TEMP TABLE bench_rev AS
                SELECT l.id AS label_id, l.tone_low, l.tone_high, l.value, l.uncertain, l.skip_reason,
                    l.time_spent_ms, l.n_revisions, (hashint8(l.id) & 3) = 0 AS reversed,
                    ((hashint8(l.id * 7) & 2147483647) % 13) AS display
                FROM labeling_label l JOIN labeling_phase p ON p.id = l.phase_id WHERE p.project_id = {project.id}""",
            """INSERT INTO labeling_labelrevision (label_id, number, client_id, source, tone_low, tone_high, value,
                    uncertain, skip_reason, time_spent_ms, tone_order, client_info, reason, created_at)
                SELECT label_id, 1, gen_random_uuid(), 'labeler',
                    CASE WHEN n_revisions = 2 AND tone_low IS NOT NULL THEN 1 + tone_low % 10 ELSE tone_low END,
                    CASE WHEN n_revisions = 2 THEN NULL ELSE tone_high END,
                    CASE WHEN n_revisions = 2 AND tone_low IS NOT NULL THEN 1 + tone_low % 10 ELSE value END,
                    uncertain, skip_reason, time_spent_ms,
                    CASE WHEN reversed THEN '[10,9,8,7,6,5,4,3,2,1]'::jsonb ELSE '[1,2,3,4,5,6,7,8,9,10]'::jsonb END,
                    CASE WHEN display = 12 THEN '{}'::jsonb ELSE jsonb_build_object(
                        'viewport', (ARRAY['1920x1080', '1440x900', '2560x1440', '1366x768'])[1 + display % 4],
                        'dpr', 1 + display % 3, 'colour_gamut', (ARRAY['srgb', 'p3'])[1 + display % 2]) END,
                    '', now() - interval '30 days'
                FROM bench_rev ORDER BY label_id""",
            """INSERT INTO labeling_labelrevision (label_id, number, client_id, source, tone_low, tone_high, value,
                    uncertain, skip_reason, time_spent_ms, tone_order, client_info, reason, created_at)
                SELECT label_id, 2, gen_random_uuid(), 'change', tone_low, tone_high, value, uncertain, skip_reason,
                    time_spent_ms, '[1,2,3,4,5,6,7,8,9,10]'::jsonb, '{"viewport":"1920x1080","dpr":1}'::jsonb, '',
                    now() - interval '29 days'
                FROM bench_rev WHERE n_revisions = 2 ORDER BY label_id""",
            # Post-calibration: relabels (done) and corrections by the lead, each a new revision of an
            # earlier label, and open relabel requests.
            f"""CREATE TEMP TABLE bench_post AS
                SELECT l.id AS label_id, l.image_id, l.labeler_id, l.n_revisions + 1 AS number,
                    CASE WHEN l.id % 2 = 0 THEN 'relabel' ELSE 'correction' END AS source,
                    least(10, coalesce(l.tone_low, 5) + 1) AS low,
                    row_number() OVER (PARTITION BY l.labeler_id ORDER BY l.id) AS position
                FROM labeling_label l WHERE l.phase_id = {main} AND (hashint8(l.id * 3) & 2147483647) % 200 = 0""",
            f"""INSERT INTO labeling_labelrevision (label_id, number, client_id, source, tone_low, tone_high, value,
                    uncertain, skip_reason, time_spent_ms, tone_order, client_info, author_id, reason, created_at)
                SELECT label_id, number, gen_random_uuid(), source, low, NULL, low, false, '', 3000,
                    '[1,2,3,4,5,6,7,8,9,10]'::jsonb, '{{}}'::jsonb,
                    CASE WHEN source = 'correction' THEN {lead.id} END,
                    CASE WHEN source = 'correction' THEN 'Lead correction: the photo is overexposed, "deeper".'
                         ELSE 'Outlier in the main phase' END, now() - interval '5 days'
                FROM bench_post ORDER BY label_id""",
            """UPDATE labeling_label l SET tone_low = b.low, tone_high = NULL, value = b.low, uncertain = false,
                    skip_reason = '', n_revisions = b.number, time_spent_ms = 3000
                FROM bench_post b WHERE b.label_id = l.id""",
            f"""INSERT INTO labeling_phaseparticipant (phase_id, labeler_id, shuffle_seed, joined_at)
                SELECT {post}, m, 0, now() FROM unnest(ARRAY{ids}) m""",
            f"""INSERT INTO labeling_assignment (phase_id, labeler_id, image_id, position, is_repeat, kind,
                    relabel_of_id, request_reason, requested_by_id, done_at, created_at)
                SELECT {post}, labeler_id, image_id, position, false, 'relabel', label_id,
                    'Outlier in the main phase', {lead.id}, now() - interval '5 days', now() - interval '6 days'
                FROM bench_post WHERE source = 'relabel'""",
            f"""INSERT INTO labeling_assignment (phase_id, labeler_id, image_id, position, is_repeat, kind,
                    relabel_of_id, request_reason, requested_by_id, done_at, created_at)
                SELECT {post}, l.labeler_id, l.image_id, 1000000 + row_number() OVER (ORDER BY l.id), false,
                    'relabel', l.id, 'Please look again', {lead.id}, NULL, now()
                FROM labeling_label l WHERE l.phase_id = {main}
                    AND NOT EXISTS (SELECT 1 FROM bench_post b WHERE b.image_id = l.image_id
                                    AND b.labeler_id = l.labeler_id)
                ORDER BY l.id DESC LIMIT {N_OPEN_RELABELS}""",
        ]
        if with_baselines:
            statements.append(
                f"""INSERT INTO labeling_imagebaseline (image_id, parameters_hash, parameters, code_version, status,
                        error, ita_median, lightness_median, b_median, skin_fraction, albedo, albedo_normalized,
                        ita_class, flags, stats, overlay, computed_at)
                    SELECT id, '{baseline_parameters_hash(parameters)}', $json${json.dumps(parameters)}$json$::jsonb, '{BASELINE_CODE_VERSION}',
                        CASE WHEN f < 0.01 THEN 'failed' ELSE 'ok' END,
                        CASE WHEN f < 0.01 THEN 'no skin pixels' ELSE '' END,
                        CASE WHEN f >= 0.01 THEN ita END, CASE WHEN f >= 0.01 THEN 40 + ita / 3 END,
                        CASE WHEN f >= 0.01 THEN 15 END, CASE WHEN f >= 0.01 THEN 0.3 END,
                        CASE WHEN f >= 0.01 THEN 0.5 - ita_n / 400 END, CASE WHEN f >= 0.01 THEN 0.6 - ita_n / 400 END,
                        CASE WHEN f < 0.01 THEN '' ELSE {ita_case} END,
                        CASE WHEN f >= 0.01 AND f < 0.03 THEN '["underexposed"]'::jsonb ELSE '[]'::jsonb END,
                        '{{}}'::jsonb, '', now()
                    FROM (SELECT i.id, random() AS f, 75 - 12 * (1 + (hashint8(i.id) & 2147483647) % 10) + 10 * random() AS ita,
                                 12 * (1 + (hashint8(i.id) & 2147483647) % 10) AS ita_n
                          FROM labeling_image i WHERE i.project_id = {project.id}) t"""
            )
        with connection.cursor() as cursor:
            for sql in statements:
                cursor.execute(sql)
            for table in ("bench_images", "bench_draws", "bench_labels", "bench_rev", "bench_post"):
                cursor.execute(f"DROP TABLE {table}")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


# --------------------------------------------------------------------------- (a) the job, in a child


def _status_kb(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    return 0


def child(release_id: int) -> None:
    """Run ``release_build`` here (a child of the benchmark); print stage times and peak RSS as JSON."""
    from labeling.models import Release
    from labeling.services.releases import build as build_module
    from labeling.services.releases import tables as tables_module

    stages: dict[str, dict] = {}
    state = {"stage": "start", "stop": False}

    def sample() -> None:
        while not state["stop"]:
            rss = _status_kb("VmRSS:")
            block = stages.setdefault(state["stage"], {"seconds": 0.0, "peak_rss_mb": 0.0})
            block["peak_rss_mb"] = max(block["peak_rss_mb"], _mb(rss))
            time.sleep(0.02)

    def stage(name: str, function):
        def wrapped(*args, **kwargs):
            previous, state["stage"] = state["stage"], name
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                block = stages.setdefault(name, {"seconds": 0.0, "peak_rss_mb": 0.0})
                block["seconds"] += time.perf_counter() - start
                state["stage"] = previous

        return wrapped

    # The stages of release_write / release_build (names looked up in the build module at call time).
    build_module.release_write = stage("tables (images, labels: csv, jsonl, parquet)", build_module.release_write)
    build_module.LabelerTally.table = stage("labelers table", tables_module.LabelerTally.table)
    build_module.card_project_facts = stage("data card facts (project)", build_module.card_project_facts)
    build_module.card_facts = stage("data card facts (release)", build_module.card_facts)
    build_module.card_render = stage("data card render", build_module.card_render)
    build_module.zip_write = stage("zip", build_module.zip_write)
    build_module._publish = stage("publish (ReleaseImage rows)", build_module._publish)
    sampler = threading.Thread(target=sample, daemon=True)
    base_rss = _mb(_status_kb("VmRSS:"))
    sampler.start()
    release = Release.objects.get(pk=release_id)
    start = time.perf_counter()
    release = build_module.release_build(release)
    total = time.perf_counter() - start
    state["stop"] = True
    sampler.join()
    # release_write includes the nested stages: report its own part apart.
    tables = stages.get("tables (images, labels: csv, jsonl, parquet)")
    if tables:
        nested = ("labelers table", "data card facts (project)", "data card facts (release)", "data card render")
        tables["seconds"] -= sum(stages.get(name, {}).get("seconds", 0.0) for name in nested)
    print(
        json.dumps(
            {
                "status": release.status,
                "error": release.error,
                "total_seconds": total,
                "rss_after_imports_mb": base_rss,
                "peak_rss_mb": _mb(_status_kb("VmHWM:")),
                "stages": stages,
                "summary": release.summary,
            }
        )
    )


def new_release(project, with_images: bool = False):
    """A queued release of the project (made directly: no task is sent), earlier bench releases removed."""
    from django.db import connection

    from labeling.models import Job, Release
    from labeling.services.releases import CATEGORIES, card_text_clean, code_version, rule_clean, storage
    from tests.card_texts import card_texts_for_tests

    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM labeling_releaseimage WHERE release_id IN (SELECT id FROM labeling_release"
            " WHERE project_id = %s)",
            [project.id],
        )
    Release.objects.filter(project=project).delete()
    shutil.rmtree(storage.project_releases_dir(project.id), ignore_errors=True)
    include = dict.fromkeys(CATEGORIES, True)
    include.update(no_labels=False, too_few_labels=False, open_relabels=False)
    rule = rule_clean({"include": include, "with_images": with_images}, explicit=True)
    job = Job.objects.create(project=project, kind=Job.Kind.EXPORT, parameters={"rule": rule})
    return Release.objects.create(
        project=project,
        version=1,
        rule=rule,
        card_text=card_text_clean(card_texts_for_tests()),
        code_version=code_version(),
        job=job,
    )


# --------------------------------------------------------------------------- (b) labels: Parquet vs COPY


def labels_parquet(project, rule: dict, out_dir: Path) -> dict:
    """The labels table written as Parquet only, through the release's own code; seconds per part."""
    from labeling.models import Membership
    from labeling.services.releases.bundle import TableWriter
    from labeling.services.releases.finalise import context_load, release_chunks
    from labeling.services.releases.tables import LABELS_SCHEMA, label_table

    start = time.perf_counter()
    context = context_load(project, rule)
    tone_names = {t.position: t.name for t in project.scale.tones.all()}
    project_order = [t.position for t in project.ordered_tones()]
    pseudonyms = dict(Membership.objects.filter(project=project).values_list("id", "pseudonym"))
    parts = {"read + final tones (release_chunks)": 0.0, "rows to Arrow (label_table)": 0.0, "Parquet write": 0.0}
    with TableWriter(out_dir, "labels", LABELS_SCHEMA, formats=("parquet",)) as writer:
        chunks = release_chunks(project, rule, context=context, details=True, baselines=False)
        while True:
            t0 = time.perf_counter()
            chunk = next(chunks, None)
            t1 = time.perf_counter()
            parts["read + final tones (release_chunks)"] += t1 - t0
            if chunk is None:
                break
            table = label_table(chunk, context, pseudonyms, tone_names, project_order)
            t2 = time.perf_counter()
            parts["rows to Arrow (label_table)"] += t2 - t1
            writer.write(table)
            parts["Parquet write"] += time.perf_counter() - t2
        t3 = time.perf_counter()
        info = writer.close()
        parts["Parquet write"] += time.perf_counter() - t3
    return {"seconds": time.perf_counter() - start, "parts": parts, "info": info["labels.parquet"]}


LABELS_COPY_SQL = """
COPY (
    SELECT l.id, r.id, l.image_id, m.pseudonym, p.kind,
        CASE WHEN l.tone_low IS NULL THEN ARRAY[]::int[] WHEN l.tone_high IS NULL THEN ARRAY[l.tone_low::int]
             ELSE ARRAY[l.tone_low::int, l.tone_high::int] END,
        CASE WHEN l.tone_low IS NULL THEN ARRAY[]::text[] WHEN l.tone_high IS NULL THEN ARRAY[tl.name]
             ELSE ARRAY[tl.name, th.name] END,
        l.value, l.value IS NOT NULL, l.uncertain, l.skip_reason <> '', NULLIF(l.skip_reason, ''),
        l.time_spent_ms / 1000.0, l.n_revisions, c.label_id IS NOT NULL, c.reason, l.is_repeat,
        r.tone_order, NULLIF(r.client_info, '{{}}'::jsonb)
    FROM labeling_label l
    JOIN labeling_phase p ON p.id = l.phase_id
    JOIN labeling_membership m ON m.id = l.labeler_id
    LEFT JOIN labeling_tone tl ON tl.scale_id = {scale} AND tl.position = l.tone_low
    LEFT JOIN labeling_tone th ON th.scale_id = {scale} AND th.position = l.tone_high
    LEFT JOIN (SELECT DISTINCT ON (label_id) label_id, id, tone_order, client_info FROM labeling_labelrevision
               ORDER BY label_id, number DESC) r ON r.label_id = l.id
    LEFT JOIN (SELECT DISTINCT ON (label_id) label_id, reason FROM labeling_labelrevision
               WHERE source = 'correction' ORDER BY label_id, number DESC) c ON c.label_id = l.id
    WHERE p.project_id = {project}
    ORDER BY l.image_id, l.id
) TO STDOUT
"""
PLAIN_COPY_SQL = """
COPY (SELECT l.* FROM labeling_label l JOIN labeling_phase p ON p.id = l.phase_id
      WHERE p.project_id = {project} ORDER BY l.image_id, l.id) TO STDOUT
"""


def copy_seconds(sql: str) -> tuple[float, int, int]:
    """Seconds to stream ``sql`` (a COPY ... TO STDOUT) through psycopg into a null sink; rows (counted apart), bytes."""
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn, conn.cursor() as cursor:
        start = time.perf_counter()
        n_bytes = 0
        with cursor.copy(sql) as copy:
            for data in copy:
                n_bytes += len(data)
        seconds = time.perf_counter() - start
        n_rows = cursor.execute(f"SELECT count(*) FROM ({sql.split('COPY (', 1)[1].rsplit(') TO STDOUT', 1)[0]}) q")
        return seconds, n_rows.fetchone()[0], n_bytes


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


# --------------------------------------------------------------------------- main


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=250_000, help="images (4 labels each); default 250,000")
    p.add_argument("--small", action="store_true", help="20,000 images, a quick run")
    p.add_argument("--fresh", action="store_true", help="drop the bench database and generate the data again")
    p.add_argument("--no-baselines", action="store_true", help="generate no colorimetric baselines")
    p.add_argument("--repeat", type=int, default=3, help="runs of (b), the median is used (default 3)")
    p.add_argument("--keep-files", action="store_true", help="keep the release's files (printed path)")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    p.add_argument("--db", help=argparse.SUPPRESS)
    p.add_argument("--media", help=argparse.SUPPRESS)
    return p.parse_args()


def main() -> None:
    args = parse_args()
    if args.child:
        _django(args.db, args.media)
        child(args.child)
        return
    n_images = 20_000 if args.small else args.images
    db_name = DB_NAME if n_images == 250_000 else f"{DB_NAME}_{n_images}"
    if args.no_baselines:
        db_name += "_nobl"
    media = tempfile.mkdtemp(prefix="fairtone-bench-release-")
    try:
        if args.fresh or not _db_exists(db_name):
            _admin(f"DROP DATABASE IF EXISTS {db_name}")
            _admin(f"CREATE DATABASE {db_name}")
        _django(db_name, media)
        from django.core.management import call_command
        from django.db import connections

        call_command("migrate", verbosity=0)
        if _has_data(n_images):
            print(f"data: {db_name} already holds {n_images:,} images (use --fresh to make them again)")
        else:
            if _project() is not None:
                connections.close_all()
                _admin(f"DROP DATABASE IF EXISTS {db_name}")
                _admin(f"CREATE DATABASE {db_name}")
            start = time.perf_counter()
            generate(n_images, with_baselines=not args.no_baselines)
            print(f"data: generated in {time.perf_counter() - start:.1f} s (SQL INSERT ... SELECT generate_series)")
        from labeling.models import ImageBaseline, Label, LabelRevision

        project = _project()
        n_labels = Label.objects.filter(phase__project=project).count()
        n_revisions = LabelRevision.objects.filter(label__phase__project=project).count()
        n_baselines = ImageBaseline.objects.filter(image__project=project).count()
        print(
            f"      {project.images.count():,} images, {n_labels:,} labels, {n_revisions:,} revisions, "
            f"{n_baselines:,} baselines, {project.subjects.count():,} subjects"
        )

        # (a) the whole job in a child process.
        release = new_release(project)
        connections.close_all()
        command = [sys.executable, __file__, "--child", str(release.id), "--db", db_name, "--media", media]
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            raise SystemExit(f"the release job failed (exit {done.returncode})")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        peak_children = _mb(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
        if result["status"] != "published":
            raise SystemExit(f"the release was not published: {result['status']} {result['error']}")
        print(
            f"(a) release job (child process): {result['total_seconds']:.1f} s "
            f"({wall:.1f} s with Python start-up), {result['summary']['labels']:,} labels"
        )
        print(
            f"    peak RSS {peak_children:.0f} MB (ru_maxrss of the child; VmHWM {result['peak_rss_mb']:.0f} MB), "
            f"{result['rss_after_imports_mb']:.0f} MB after imports; "
            f"goal <= {RSS_GOAL_MB} MB: {'met' if peak_children <= RSS_GOAL_MB else 'NOT met'}"
        )
        for name, block in result["stages"].items():
            if name == "start":
                continue
            print(f"      {name:<45} {block['seconds']:7.1f} s   peak RSS {block['peak_rss_mb']:5.0f} MB")

        # (b) the labels table as Parquet vs COPY of the same rows.
        from labeling.models import Release
        from labeling.services.releases import release_dir

        release = Release.objects.get(pk=release.pk)
        published = release_dir(release) / "labels.parquet"
        runs, copies, plains = [], [], []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory(prefix="fairtone-bench-labels-") as tmp:
                run = labels_parquet(project, release.rule, Path(tmp))
                same = sha256(Path(tmp) / "labels.parquet") == sha256(published)
            runs.append(run)
            copies.append(copy_seconds(LABELS_COPY_SQL.format(project=project.id, scale=project.scale_id)))
            plains.append(copy_seconds(PLAIN_COPY_SQL.format(project=project.id)))
        run = sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]
        copy_s, copy_rows, copy_bytes = sorted(copies)[len(copies) // 2]
        plain_s = sorted(plains)[len(plains) // 2][0]
        ratio = run["seconds"] / copy_s
        print(
            f"(b) labels table as Parquet : {run['seconds']:6.2f} s  ({run['info']['rows']:,} rows, "
            f"{run['info']['bytes'] / 1e6:.1f} MB; same bytes as the release's labels.parquet: {same})"
        )
        for name, seconds in run["parts"].items():
            print(f"      {name:<40} {seconds:6.2f} s")
        print(
            f"    COPY (SELECT the same columns) TO STDOUT: {copy_s:6.2f} s  ({copy_rows:,} rows, "
            f"{copy_bytes / 1e6:.1f} MB of text)"
        )
        print(f"    (plain COPY of the label rows alone, no joins: {plain_s:.2f} s)")
        print(
            f"    ratio Parquet / COPY: {ratio:.2f}x (median of {args.repeat}); "
            f"goal <= {RATIO_GOAL:g}x: {'met' if ratio <= RATIO_GOAL else 'NOT met'}"
        )
        # Each run against the COPY measured right after it (the machine's load changes between runs):
        # the goal holds only if it holds in every run.
        per_run = [r["seconds"] / c[0] for r, c in zip(runs, copies, strict=True)]
        print(
            "    ratio per run: " + ", ".join(f"{x:.2f}x" for x in per_run) + f"; worst {max(per_run):.2f}x, "
            f"goal <= {RATIO_GOAL:g}x in every run: {'met' if max(per_run) <= RATIO_GOAL else 'NOT met'}"
        )
        if args.keep_files:
            print(f"release files kept in {release_dir(release)}")
        connections.close_all()
    finally:
        if not args.keep_files:
            shutil.rmtree(media, ignore_errors=True)


if __name__ == "__main__":
    main()
