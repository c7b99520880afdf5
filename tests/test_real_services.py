"""Background jobs end to end: derivatives and colorimetric baselines.

These pass in both modes. In the embedded run (no broker) the tasks run eagerly
in this process when the transaction commits. With ``FAIRTONE_REAL_WORKER=1``
(CI, see ``.ci/run``) a separate Celery worker on Redis does the work against the
same PostgreSQL test database and media folder: the tests then check that they
are not eager and poll the database until the worker's results appear. Rows are
committed (``transaction=True``) because the worker is another process.
"""

import io
import os
import time

import pytest
from django.conf import settings
from django.db import connection
from PIL import Image as PILImage

from labeling.models import Image, ImageBaseline, Job
from labeling.services import baselines as svc
from labeling.services.images import image_create_from_bytes
from tests.factories import ProjectFactory, UserFactory

REAL_WORKER = os.environ.get("FAIRTONE_REAL_WORKER") == "1"
POLL_SECONDS = 60
# Monk Skin Tone 5 (#d7bd96): published ITA 50.32 degrees (D65, 2 degree observer).
MST5 = (0xD7, 0xBD, 0x96)
MST5_ITA = 50.32

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def mode():
    """With a real worker, prove it: not eager, and the database it shares is PostgreSQL."""
    if REAL_WORKER:
        assert settings.CELERY_TASK_ALWAYS_EAGER is False
        assert settings.CELERY_BROKER_URL
        assert connection.vendor == "postgresql"
    else:
        assert settings.CELERY_TASK_ALWAYS_EAGER is True


def png(colour, size=(48, 36)) -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def wait_for(condition, what: str):
    """Poll ``condition`` (a callable returning a truthy value) for up to POLL_SECONDS."""
    deadline = time.monotonic() + POLL_SECONDS
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {POLL_SECONDS} s waiting for {what}")
        time.sleep(0.25)


def make_project():
    return ProjectFactory(created_by=UserFactory(username="lead-services"))


def test_new_images_get_derivatives_and_baselines_from_the_worker():
    project = make_project()
    # Skin masks: a plain swatch has no face, and without a mask the baseline measures faces (issue 12).
    images = [
        image_create_from_bytes(
            project=project,
            filename=f"mst5-{i}.png",
            data=png(MST5, (48 + i, 36)),
            mask_data=png((255, 255, 255), (48 + i, 36)),
            mask_kind="skin",
        )
        for i in range(3)
    ]
    ids = [i.id for i in images]

    def derivatives_done():
        statuses = list(Image.objects.filter(id__in=ids).values_list("derivative_status", flat=True))
        return Image.DerivativeStatus.PENDING not in statuses and statuses

    wait_for(derivatives_done, "the display images")
    assert set(Image.objects.filter(id__in=ids).values_list("derivative_status", flat=True)) == {"ready"}
    rows = wait_for(
        lambda: (lambda r: r if len(r) == len(ids) else None)(list(svc.baselines_current(project))),
        "the baselines of the new images",
    )
    for row in rows:
        assert row.status == ImageBaseline.Status.OK
        assert row.ita_median == pytest.approx(MST5_ITA, abs=0.02)
        assert row.overlay and row.overlay.storage.exists(row.overlay.name)
    for image in Image.objects.filter(id__in=ids):
        assert image.display.storage.exists(image.display.name)


def test_a_baseline_run_reaches_its_total():
    project = make_project()
    for i in range(4):
        image_create_from_bytes(project=project, filename=f"p{i}.png", data=png(MST5, (40 + i, 30)))
    broken = image_create_from_bytes(project=project, filename="broken.png", data=png(MST5, (39, 30)))
    # Let the chained per-image baselines finish first, so nothing races the flush at the end.
    wait_for(lambda: svc.baselines_current(project).count() == 5, "the import baselines")
    with open(broken.original.path, "wb") as handle:
        handle.write(b"\x89PNG\r\n\x1a\n truncated")

    job = svc.baseline_run_start(project=project, parameters={"min_skin_fraction": 0.2})
    finished = wait_for(
        lambda: Job.objects.filter(pk=job.pk, status__in=[Job.Status.DONE, Job.Status.FAILED]).first(),
        "the baseline run",
    )
    assert finished.status == Job.Status.DONE
    assert (finished.total, finished.done, finished.failed) == (5, 4, 1)
    assert finished.done + finished.failed == finished.total
    assert finished.started_at is not None and finished.finished_at is not None
    assert finished.failures[0]["image_id"] == broken.id
    assert finished.failures[0]["reason"].startswith("corrupt or unreadable file")
    rows = ImageBaseline.objects.filter(
        image__project=project, parameters_hash=finished.parameters["parameters_hash"], job=finished
    )
    assert rows.count() == 5
    assert rows.filter(status=ImageBaseline.Status.OK).count() == 4


def test_every_task_has_the_retry_policy_its_limits_and_reaches_the_worker():
    """One tasks module: each name the services send is registered, with the shared retry policy and its
    named time limits; with a real worker, the worker knows every name too (nothing is sent to a name
    no worker has)."""
    from config.celery import app
    from labeling import tasks
    from labeling.services import queue

    assert {name for name in app.tasks if name.startswith("labeling.")} == set(queue.TASK_NAMES)
    for name in queue.TASK_NAMES:
        task = app.tasks[name]
        assert task.acks_late and task.autoretry_for == (OSError,) and task.retry_backoff and task.max_retries == 3
        assert (task.time_limit, task.soft_time_limit) == tasks.TIME_LIMITS[name]
        assert task.soft_time_limit < task.time_limit
    assert tasks.TIME_LIMITS[queue.BASELINE_BATCH] == (svc.BASELINE_TASK_TIME_LIMIT, svc.BASELINE_TASK_SOFT_TIME_LIMIT)
    if REAL_WORKER:
        registered = app.control.inspect(timeout=5).registered() or {}
        assert registered, "no worker answered"
        for names in registered.values():
            assert set(queue.TASK_NAMES) <= set(names)


def test_an_evaluation_run_is_scored_by_the_worker():
    """A model's results against a published release: the report is computed by the worker, and is the same
    in both modes (the release's images table is written straight to its files here)."""
    import numpy as np
    import pandas as pd
    from django.core.files.uploadedfile import SimpleUploadedFile

    from labeling.models import EvaluationRun, Release
    from labeling.services import evaluations as evaluation_services
    from labeling.services.releases import release_dir

    project = make_project()
    release = Release.objects.create(
        project=project, version=1, status=Release.Status.PUBLISHED, manifest={"files": {"images.parquet": {}}}
    )
    rng = np.random.default_rng(0)
    n = 120
    tone = rng.integers(1, 11, n).astype(float)
    images = pd.DataFrame(
        {
            "image_id": np.arange(1, n + 1),
            "external_id": [f"img{i}" for i in range(n)],
            "subject_id": [f"S{i}" for i in range(n)],
            "gender": rng.choice(["woman", "man"], n),
            "body_shape": rng.normal(0.3, 0.05, n),
            "final_value": tone,
            "min": tone,
            "max": tone,
            "excluded": False,
        }
    )
    release_dir(release).mkdir(parents=True, exist_ok=True)
    images.to_parquet(release_dir(release) / "images.parquet", index=False)
    results = pd.DataFrame({"external_id": images["external_id"], "error": 1.0 + 1.5 * (tone >= 9)})
    upload = SimpleUploadedFile("results.csv", results.to_csv(index=False).encode(), content_type="text/csv")
    run = evaluation_services.evaluation_create(
        project=project,
        user=None,
        release=release,
        upload=upload,
        name="worker",
        options={"permutations": 9, "band_permutations": 99, "uncertainty_draws": 5},
    )
    done = wait_for(
        lambda: EvaluationRun.objects.filter(pk=run.pk, status__in=["done", "failed"]).first(), "the evaluation report"
    )
    assert done.status == "done", done.error
    assert done.report["skin_tone"]["verdict"]["worse_end"] == "high"
    # A 1.5 gap with threshold 2 is a moderate disparity; MST 9-10's mean error 2.5 is a performance finding.
    assert done.report["skin_tone"]["verdict"]["level"] == "moderate"
    # One band per tone: MST 9 and MST 10 are each above the threshold.
    assert {"skin tone band 9", "skin tone band 10"} <= set(done.report["performance"]["above"])
    assert Job.objects.get(pk=done.job_id).status == Job.Status.DONE
    assert evaluation_services.evaluation_file_path(done, "report.html") is not None


def test_changed_labels_have_the_worker_precompute_the_lead_pages(settings):
    """Labels stored in this (web) process have the worker compute the consensus and the baseline
    comparison into the shared cache, so the lead's first visit finds them (issue 14). Embedded: jobs
    run in-process, nothing is scheduled, and the first view computes."""
    from django.core.cache import cache

    from labeling.services import queue
    from labeling.services.consensus.caching import phase_summary_is_cached, phase_versions
    from tests.factories import MembershipFactory
    from tests.labeling.helpers import add_images, label_all, open_calibration_1

    settings.FAIRTONE = {**settings.FAIRTONE, "CONSENSUS_BACKGROUND_REFRESH": True, "PRECOMPUTE_DELAY": 0.5}
    project = make_project()
    labelers = [
        MembershipFactory(project=project, user=UserFactory(username=f"pre-labeler{i}"), pseudonym=f"P{i}")
        for i in range(2)
    ]
    add_images(project, 5)
    cal1 = open_calibration_1(project, size=5, cal1=5, labels_per_image=2)  # two labelers: two labels per image
    cache.clear()
    for m in labelers:
        label_all(cal1, m, tone=4)
    if not REAL_WORKER:
        assert queue.background_precompute_enabled() is False
        assert not phase_summary_is_cached(cal1.id, phase_versions(project)[cal1.id])
        return
    # The worker and this process share the Redis cache (REDIS_CACHE_URL in .ci/run).
    from django.core.cache import caches

    assert "Redis" in type(caches["default"]).__name__
    wait_for(
        lambda: phase_summary_is_cached(cal1.id, phase_versions(project)[cal1.id]),
        "the consensus precomputed by the worker",
    )
    comparison = wait_for(
        lambda: cache.get(f"baseline-comparison:v2:latest:{project.id}:all:1:slim"),
        "the baseline comparison precomputed by the worker",
    )
    assert comparison["n_labelled_images"] == 5
