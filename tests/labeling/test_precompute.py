"""The lead's pages are precomputed in the background when labels or baselines change (issue 14).

The worker side runs end to end in ``tests/test_real_services.py``; here the pieces: what the
precompute fills, the stale-while-revalidate comparison, the debounce, and that with jobs run
in-process nothing is scheduled.
"""

import time

import pytest
from django.core.cache import cache

from labeling.models import ImageBaseline, PendingTask
from labeling.services import queue
from labeling.services.baselines.comparison import baseline_comparison_cached
from labeling.services.consensus.caching import phase_summary, phase_summary_is_cached, phase_versions
from labeling.services.precompute import project_precompute
from tests.labeling.helpers import add_images, eager, label_all, open_calibration_1, submit


@pytest.fixture
def labelled(project, labelers):
    add_images(project, 6)
    cal1 = open_calibration_1(project, size=6, cal1=6)
    for k, m in enumerate(labelers[:3]):
        label_all(cal1, m, tone=3 + k % 2)
    return cal1


def test_precompute_fills_every_phase_and_the_comparison(project, labelled):
    cache.clear()
    version = phase_versions(project)[labelled.id]
    assert not phase_summary_is_cached(labelled.id, version)
    timings = project_precompute(project)
    assert set(timings) == {
        "consensus_phases",
        "consensus_dashboard",
        "review_candidates",
        "release_readiness",
        "baseline_comparison",
    }
    assert phase_summary_is_cached(labelled.id, version)
    computed = {}
    for exclude_flagged in (True, False):
        result = baseline_comparison_cached(project, None, exclude_flagged)
        assert result["freshness"]["stale"] is False
        computed[exclude_flagged] = result["freshness"]["computed_at"]
    summary_at = phase_summary(labelled)["freshness"]["computed_at"]
    # A second precompute with nothing changed computes nothing again.
    project_precompute(project)
    assert phase_summary(labelled)["freshness"]["computed_at"] == summary_at
    for exclude_flagged in (True, False):
        assert (
            baseline_comparison_cached(project, None, exclude_flagged)["freshness"]["computed_at"]
            == computed[exclude_flagged]
        )


def test_with_jobs_in_process_nothing_is_scheduled(project, labelled, settings):
    settings.FAIRTONE = {**settings.FAIRTONE, "CONSENSUS_BACKGROUND_REFRESH": True}
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the embedded default (CI stage 2 has a worker)
    assert queue.background_precompute_enabled() is False
    assert queue.precompute_schedule(project.id) is False


@pytest.fixture
def worker_like(settings):
    """The settings a web process with a worker has (not eager), while Celery itself still runs the task
    in this process: the task sent with a countdown runs at once, as a worker would run it later."""
    settings.FAIRTONE = {**settings.FAIRTONE, "CONSENSUS_BACKGROUND_REFRESH": True, "PRECOMPUTE_DELAY": 60}
    settings.CELERY_TASK_ALWAYS_EAGER = False
    with eager(True):
        assert queue.background_precompute_enabled() is True
        yield


@pytest.mark.django_db(transaction=True)
def test_a_changed_comparison_is_served_stale_while_the_worker_recomputes(project, labelers, worker_like):
    add_images(project, 6)
    cal1 = open_calibration_1(project, size=6, cal1=6)
    for m in labelers[:2]:
        label_all(cal1, m, tone=4)
    cache.clear()
    first = baseline_comparison_cached(project, None, False)  # never computed: computed in the request
    assert first["freshness"]["stale"] is False
    assert first["n_labelled_images"] == 6
    # A label changes; the debounce window opened by the labels above is closed (new window).
    cache.delete(f"debounce:precompute:{project.id}")
    queue.debounce_forget()
    m = labelers[2]
    a = cal1.assignments.filter(labeler=m, done_at__isnull=True).order_by("position").first()
    submit(cal1, m, a.image_id, tones=[9])
    # The label's commit scheduled the precompute (run here at once, as the worker would later).
    assert cache.get(f"debounce:precompute:{project.id}") is not None
    fresh = baseline_comparison_cached(project, None, False)
    assert fresh["freshness"]["stale"] is False
    assert fresh["freshness"]["version"] != first["freshness"]["version"]
    assert not PendingTask.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_stale_latest_is_served_and_a_refresh_asked_once_per_window(project, labelers, worker_like):
    add_images(project, 4)
    cal1 = open_calibration_1(project, size=4, cal1=4)
    for m in labelers[:2]:
        label_all(cal1, m, tone=4)
    cache.clear()
    first = baseline_comparison_cached(project, None, True)
    # A new current baseline result (a worker finished an image) changes the version; the debounce
    # window is open, so the request serves the last numbers marked stale and sends nothing more.
    cache.add(f"debounce:precompute:{project.id}", True, 60)
    image = project.images.order_by("id").first()
    ImageBaseline.objects.filter(image=image).update(ita_median=12.0)
    row = ImageBaseline.objects.filter(image=image).first()
    row.save()  # computed_at moves
    served = baseline_comparison_cached(project, None, True)
    assert served["freshness"]["stale"] is True
    assert served["freshness"]["version"] == first["freshness"]["version"]
    assert queue.precompute_schedule(project.id) is False  # still the same window


def test_debounce_sends_once_per_window(project, worker_like):
    sent = [queue.precompute_schedule(project.id) for _ in range(5)]
    assert sent == [True, False, False, False, False]
    cache.delete(f"debounce:precompute:{project.id}")
    queue.debounce_forget()
    assert queue.precompute_schedule(project.id) is True


@pytest.mark.django_db(transaction=True)
def test_release_readiness_is_cached_until_labels_or_exclusions_change(project, labelers, lead):
    from labeling.services.baselines import baselines_current
    from labeling.services.data_manager import data_bulk
    from labeling.services.releases.readiness import release_readiness, release_readiness_cached

    add_images(project, 4)
    # With a real worker (CI stage 2) the new images' baselines arrive in the background: wait for them,
    # since a new baseline result rightly changes the readiness.
    deadline = time.monotonic() + 60
    while baselines_current(project).count() < 4 and time.monotonic() < deadline:
        time.sleep(0.2)
    cal1 = open_calibration_1(project, size=4, cal1=4)
    label_all(cal1, labelers[0], tone=4)
    first = release_readiness_cached(project, {})
    assert first["freshness"]["stale"] is False
    again = release_readiness_cached(project, {})
    assert again["freshness"]["computed_at"] == first["freshness"]["computed_at"]  # from the cache
    label_all(cal1, labelers[1], tone=4)  # labels change: recomputed
    changed = release_readiness_cached(project, {})
    assert changed["freshness"]["version"] != first["freshness"]["version"]
    image = project.images.order_by("id").first()
    data_bulk(project=project, action="exclude", user=lead, image_ids=[image.id], reason="consent withdrawn")
    excluded = release_readiness_cached(project, {})
    assert excluded["freshness"]["version"] != changed["freshness"]["version"]
    fresh = release_readiness(project, {})
    assert {k: v for k, v in excluded.items() if k != "freshness"} == fresh
    assert excluded["categories"]["excluded_by_lead"]["count"] == 1


@pytest.mark.django_db(transaction=True)
def test_review_candidates_are_served_from_the_last_list_until_the_worker_recomputes(project, labelers, worker_like):
    from labeling.services.review import review_candidate_ids

    add_images(project, 4)
    cal1 = open_calibration_1(project, size=4, cal1=4)
    for m in labelers[:2]:
        label_all(cal1, m, tone=4)
    cache.clear()
    before = review_candidate_ids(cal1)
    assert before == []  # everyone agrees
    cache.add(f"debounce:precompute:{project.id}", True, 60)  # a precompute is already on its way
    m = labelers[2]
    a = cal1.assignments.filter(labeler=m, done_at__isnull=True).order_by("position").first()
    submit(cal1, m, a.image_id, tones=[9])  # far from 4 and 4: an outlier
    assert review_candidate_ids(cal1) == before  # the last list, while the worker recomputes
    assert review_candidate_ids(cal1, compute=True) == [(a.image_id, 1)]
    assert review_candidate_ids(cal1) == [(a.image_id, 1)]
