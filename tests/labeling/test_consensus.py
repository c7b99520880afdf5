"""The lead's consensus dashboard: numbers cross-checked against reference libraries."""

import xml.etree.ElementTree as ET

import krippendorff
import numpy as np
import pytest
from django.core.cache import cache
from sklearn.metrics import cohen_kappa_score

from labeling.models import Label, Membership, Phase
from labeling.services.phases import phase_close, phase_get, phase_open
from tests.factories import MembershipFactory, UserFactory
from tests.labeling.helpers import add_images, open_calibration_1, submit

# Tones each labeler gives to images 0..7 (rows: labelers L1..L4); (a, b) = adjacent pair.
TONES = [
    [1, 2, 3, (3, 4), 5, 6, 7, 9],
    [1, 3, 3, 4, 5, 7, 7, 8],
    [2, 2, 4, 4, (5, 6), 6, 8, 9],
    [1, 2, 3, 5, 5, 2, 7, 9],
]


@pytest.fixture(autouse=True)
def _clear_cache():
    cache.clear()
    yield
    cache.clear()


def _client(client, user):
    client.force_login(user)
    return client


def _label(phase, labeler, image_id, tones):
    submit(phase, labeler, image_id, tones=tones if isinstance(tones, tuple) else (tones,))


@pytest.fixture
def cal1(project, labelers):
    images = add_images(project, 8)
    phase = open_calibration_1(project, size=8, cal1=8, labels_per_image=4)
    order = {image.id: i for i, image in enumerate(images)}
    for labeler, row in zip(labelers, TONES, strict=True):
        for a in phase.assignments.filter(labeler=labeler):
            _label(phase, labeler, a.image_id, row[order[a.image_id]])
    return phase


def _reliability(phase):
    """Labelers x images values straight from the Label rows (repeats excluded)."""
    rows = list(Label.objects.filter(phase=phase, is_repeat=False).values_list("labeler_id", "image_id", "value"))
    labelers = sorted({r[0] for r in rows})
    images = sorted({r[1] for r in rows})
    data = np.full((len(labelers), len(images)), np.nan)
    for labeler, image, value in rows:
        data[labelers.index(labeler), images.index(image)] = np.nan if value is None else value
    return data


def _api(client, lead, project, phase):
    response = _client(client, lead).get(f"/api/projects/{project.pk}/consensus/?phase={phase.pk}")
    assert response.status_code == 200
    return response.json()


def test_alpha_and_kappa_match_reference_libraries(client, lead, project, cal1):
    data = _reliability(cal1)
    summary = _api(client, lead, project, cal1)["selected"]
    alpha = summary["agreement"]["alpha"]
    assert alpha["ordinal"]["value"] == pytest.approx(
        krippendorff.alpha(data, level_of_measurement="ordinal"), abs=1e-6
    )
    assert alpha["interval"]["value"] == pytest.approx(
        krippendorff.alpha(data, level_of_measurement="interval"), abs=1e-6
    )
    assert alpha["ordinal"]["low"] <= alpha["ordinal"]["value"] <= alpha["ordinal"]["high"]
    # Quadratic-weighted kappa of L1 vs L2 over the full half-step range 1..10.
    categories = np.arange(2, 21) / 2
    expected = cohen_kappa_score(
        (data[0] * 2).astype(int), (data[1] * 2).astype(int), labels=(categories * 2).astype(int), weights="quadratic"
    )
    names = summary["kappa"]["labelers"]
    assert summary["kappa"]["matrix"][names.index("L1")][names.index("L2")] == pytest.approx(expected, abs=1e-4)
    # Near consensus straight from the definition: all values within one tone.
    near = np.mean(np.nanmax(data, axis=0) - np.nanmin(data, axis=0) <= 1)
    assert summary["agreement"]["near_consensus"]["value"] == pytest.approx(near, abs=1e-6)
    # Every image has 4 valid labels, so Fleiss' kappa is computed.
    assert summary["agreement"]["fleiss_kappa"]["value"] is not None
    assert [row["n_labels"] for row in summary["per_labeler"]] == [8, 8, 8, 8]


def test_images_api_filters_and_sorts(client, lead, project, cal1):
    data = _reliability(cal1)
    spread = np.nanmax(data, axis=0) - np.nanmin(data, axis=0)
    url = f"/api/projects/{project.pk}/consensus/images/?phase={cal1.pk}"
    body = _client(client, lead).get(url + "&flag=wide_range&ordering=-range").json()
    assert body["count"] == int((spread >= 3).sum()) > 0
    assert all(r["range"] >= 3 and "wide_range" in r["flags"] for r in body["results"])
    everything = client.get(url + "&ordering=-range").json()["results"]
    ranges = [r["range"] for r in everything]
    assert ranges == sorted(ranges, reverse=True) and len(ranges) == 8
    assert {lab["labeler"] for lab in everything[0]["labels"]} == {"L1", "L2", "L3", "L4"}
    near = client.get(url + "&near_consensus=false").json()
    assert near["count"] == int((spread > 1).sum())
    page = client.get(f"/projects/{project.pk}/consensus/images/?phase={cal1.pk}&flag=wide_range")
    assert page.status_code == 200 and f"/images/{everything[0]['image_id']}/".encode() in page.content


def test_new_label_invalidates_cached_summary(client, lead, project, labelers):
    add_images(project, 6)
    phase = open_calibration_1(project, size=6, cal1=6, labels_per_image=4)
    first = phase.assignments.filter(labeler=labelers[0]).first()
    _label(phase, labelers[0], first.image_id, 4)
    assert _api(client, lead, project, phase)["selected"]["n_labels"] == 1
    _label(phase, labelers[1], first.image_id, 6)
    assert _api(client, lead, project, phase)["selected"]["n_labels"] == 2


def test_too_little_data_is_said_not_shown(client, lead, project, labelers):
    add_images(project, 6)
    phase = open_calibration_1(project, size=6, cal1=6, labels_per_image=4)
    image_ids = list(phase.assignments.filter(labeler=labelers[0]).values_list("image_id", flat=True))
    for image_id in image_ids:
        _label(phase, labelers[0], image_id, 3)
    _label(phase, labelers[1], image_ids[0], 5)
    summary = _api(client, lead, project, phase)["selected"]
    agreement = summary["agreement"]
    assert summary["n_images_2plus"] == 1
    for stat in (agreement["near_consensus"], agreement["percent_exact"], agreement["alpha"]["ordinal"]):
        assert stat["value"] is None
        assert stat["reason"].startswith("too little data: 1 image with 2+ labels")
    page = client.get(f"/projects/{project.pk}/consensus/?phase={phase.pk}")
    assert b"too little data: 1 image with 2+ labels" in page.content
    assert b"nan" not in page.content.lower().replace(b"nanp", b"")


def test_repeats_stay_out_of_agreement_and_feed_test_retest(client, lead, project, labelers):
    add_images(project, 8)
    cal1 = open_calibration_1(project, size=8, cal1=6, repeated=5, labels_per_image=4)
    cal1_tones = {}
    for k, image_id in enumerate(sorted(cal1.phase_images.values_list("image_id", flat=True))):
        cal1_tones[image_id] = 3 + k  # 3..8
        for labeler in labelers:
            _label(cal1, labeler, image_id, cal1_tones[image_id])
    phase_close(phase=cal1)
    cal2 = phase_open(phase=phase_get(project, Phase.Kind.CALIBRATION_2), labels_per_image=4)
    shift = {labelers[0].id: 0, labelers[1].id: 1}  # L1 consistent; L2 one tone deeper
    for a in cal2.assignments.select_related("labeler"):
        if a.is_repeat:
            tone = cal1_tones[a.image_id] + shift.get(a.labeler_id, -2)
        else:
            tone = 5 + labelers.index(a.labeler) % 2 * 4  # wild disagreement on new images
        _label(cal2, a.labeler, a.image_id, tone)
    assert Label.objects.filter(phase=cal2, is_repeat=True).count() == 20

    body = _api(client, lead, project, cal2)
    selected = body["selected"]
    assert selected["n_repeats"] == 20
    assert selected["n_images"] == 2  # the repeats are not between-labeler images
    assert selected["agreement"]["alpha"]["ordinal"]["reason"] == "too little data: 2 images with 2+ labels (needs 5)"
    retest = {row["labeler"]: row for row in body["test_retest"]["per_labeler"]}
    assert retest["L1"]["n"] == 5
    assert retest["L1"]["exact"]["value"] == 1.0 and retest["L1"]["mean_shift"]["value"] == 0.0
    assert retest["L2"]["exact"]["value"] == 0.0 and retest["L2"]["within_one"]["value"] == 1.0
    assert retest["L2"]["mean_shift"]["value"] == 1.0
    assert retest["L3"]["within_one"]["value"] == 0.0 and retest["L3"]["mean_shift"]["value"] == -2.0
    rounds = sorted(cal1_tones[i] for i in cal2.phase_images.filter(is_repeat=True).values_list("image_id", flat=True))
    categories = list(range(2, 21))  # half-steps x 2
    expected = cohen_kappa_score(
        [2 * t for t in rounds], [2 * t + 2 for t in rounds], labels=categories, weights="quadratic"
    )
    assert retest["L2"]["weighted_kappa"]["value"] == pytest.approx(expected, abs=1e-6)
    drift = {row["labeler"]: row["baseline"] for row in body["labelers"]}
    assert [b["phase"] for b in drift["L1"]] == ["Calibration 1", "Calibration 2"]
    # Issue 12: calibration 2 over all its images too (the data card's figures cover them all).
    everything = selected["agreement_all_images"]
    assert (everything["n_images"], everything["n_images_2plus"], everything["n_new_images"]) == (7, 7, 2)
    rows = list(Label.objects.filter(phase=cal2).values_list("labeler_id", "image_id", "value"))
    ids, images = sorted({r[0] for r in rows}), sorted({r[1] for r in rows})
    reliability = np.full((len(ids), len(images)), np.nan)
    for labeler, image, value in rows:
        reliability[ids.index(labeler), images.index(image)] = value
    expected_alpha = krippendorff.alpha(reliability_data=reliability, level_of_measurement="ordinal")
    assert everything["agreement"]["alpha"]["ordinal"]["value"] == pytest.approx(expected_alpha, abs=1e-6)
    assert everything["agreement"]["near_consensus"]["value"] == 0.0
    page = _client(client, lead).get(f"/projects/{project.pk}/consensus/?phase={cal2.pk}").content.decode()
    assert 'id="calibration-2-all-images"' in page and "All images (7 with 2+ labels)" in page


def test_plots_are_valid_images(client, lead, project, cal1):
    _client(client, lead)
    for name in ["label_distribution", "range_histogram", "kappa_heatmap", "test_retest", "labeler_bias"]:
        png = client.get(f"/projects/{project.pk}/consensus/plots/{name}.png?phase={cal1.pk}")
        assert png.status_code == 200 and png["Content-Type"] == "image/png"
        assert png.content.startswith(b"\x89PNG\r\n\x1a\n")
        svg = client.get(f"/projects/{project.pk}/consensus/plots/{name}.svg?phase={cal1.pk}&download=1")
        assert svg.status_code == 200 and svg["Content-Type"] == "image/svg+xml"
        assert "attachment" in svg["Content-Disposition"]
        assert ET.fromstring(svg.content).tag == "{http://www.w3.org/2000/svg}svg"


def test_labelers_and_reviewers_never_see_it(client, project, labelers, cal1):
    reviewer = UserFactory(username="reviewer")
    MembershipFactory(project=project, user=reviewer, role=Membership.Role.REVIEWER, pseudonym="R1")
    urls = [
        f"/projects/{project.pk}/consensus/",
        f"/projects/{project.pk}/consensus/images/?phase={cal1.pk}",
        f"/projects/{project.pk}/consensus/plots/kappa_heatmap.png",
        f"/api/projects/{project.pk}/consensus/",
        f"/api/projects/{project.pk}/consensus/images/?phase={cal1.pk}",
    ]
    for user in (labelers[0].user, reviewer):
        _client(client, user)
        assert [client.get(url).status_code for url in urls] == [404] * len(urls)
    client.logout()
    assert client.get(urls[0]).status_code == 302
    assert client.get(urls[3]).status_code in (401, 403)


def test_lead_page_and_openapi_schema(client, lead, project, cal1):
    page = _client(client, lead).get(f"/projects/{project.pk}/consensus/?phase={cal1.pk}")
    assert page.status_code == 200
    assert b"Krippendorff" in page.content and b"plots/kappa_heatmap.png" in page.content
    assert client.get(f"/projects/{project.pk}/consensus/plots/nothing.png").status_code == 404
    schema = client.get("/api/schema/?format=json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert "/api/projects/{id}/consensus/images/" in paths
    assert any(p["name"] == "phase" for p in paths["/api/projects/{id}/consensus/"]["get"]["parameters"])


@pytest.mark.django_db
def test_changed_phase_is_served_stale_while_a_task_recomputes(project, labelers, settings, monkeypatch):
    """With background refresh on, a changed phase answers from its last computation at once."""
    from labeling.services import consensus as svc
    from tests.labeling.helpers import add_images, open_calibration_1, submit

    settings.FAIRTONE = {**settings.FAIRTONE, "CONSENSUS_BACKGROUND_REFRESH": True}
    settings.CELERY_TASK_ALWAYS_EAGER = False  # as with a real worker: the request must not compute
    add_images(project, 6)
    phase = open_calibration_1(project, size=6, cal1=6)
    for a in phase.assignments.filter(labeler__in=labelers[:2]).order_by("id")[:6]:
        submit(phase, a.labeler, a.image_id, tones=[4])
    first = svc.phase_summary(phase)  # first view: computed in the request
    assert first["n_labels"] == 6 and first["freshness"]["stale"] is False
    a = phase.assignments.filter(done_at__isnull=True).first()
    submit(phase, a.labeler, a.image_id, tones=[5])
    sent = []
    from labeling import tasks
    from labeling.services import queue

    monkeypatch.setattr(queue, "enqueue", lambda name, *args: sent.append((name, *args)))  # not to a broker
    stale = svc.phase_summary(phase)
    again = svc.phase_summary(phase)
    assert stale["n_labels"] == 6 and stale["freshness"]["stale"] is True
    assert again["freshness"]["stale"] is True
    assert sent == [(queue.CONSENSUS_REFRESH, phase.id)]  # one refresh per phase at a time
    assert tasks.consensus_refresh_task.run(phase.id) == "refreshed"  # what the worker runs
    fresh = svc.phase_summary(phase)
    assert fresh["n_labels"] == 7 and fresh["freshness"]["stale"] is False
    b = phase.assignments.filter(done_at__isnull=True).first()
    submit(phase, b.labeler, b.image_id, tones=[3])
    svc.phase_summary(phase)
    assert len(sent) == 2  # the task released the phase: the next change enqueues a refresh again


@pytest.mark.django_db
def test_deleting_labels_changes_the_version(project, labelers):
    from labeling.models import Label
    from labeling.services import consensus as svc
    from tests.labeling.helpers import add_images, open_calibration_1, submit

    add_images(project, 2)
    phase = open_calibration_1(project, size=2, cal1=2)
    a = phase.assignments.first()
    submit(phase, a.labeler, a.image_id, tones=[4])
    before = svc.phase_versions(project)[phase.id]
    assert svc.phase_summary(phase)["n_labels"] == 1
    Label.objects.filter(phase=phase).delete()
    assert phase.id not in svc.phase_versions(project)  # no labels left: no version
    submit(phase, a.labeler, a.image_id, tones=[4])  # same second as before is possible: the counter differs
    assert svc.phase_versions(project)[phase.id] != before


def test_rates_carry_their_wilson_interval(client, lead, project, cal1):
    from metrics.intervals import wilson_interval

    selected = _api(client, lead, project, cal1)["selected"]
    near = selected["agreement"]["near_consensus"]
    interval = selected["agreement_intervals"]["near_consensus"]
    n = selected["n_images_2plus"]
    assert interval["n"] == n == 8
    low, high = wilson_interval(round(near["value"] * n), n)
    assert (interval["low"], interval["high"]) == (pytest.approx(low, abs=1e-6), pytest.approx(high, abs=1e-6))
    assert interval["low"] <= near["value"] <= interval["high"]
    page = _client(client, lead).get(f"/projects/{project.pk}/consensus/?phase={cal1.pk}").content.decode()
    assert f"[{round(interval['low'] * 100)}–{round(interval['high'] * 100)}%]" in page


def test_calibration_against_main_says_whether_rates_differ_beyond_chance():
    from labeling.services.consensus.dashboard import _rate_comparisons
    from metrics.intervals import proportion_difference

    def summary(kind, n, near, overlap):
        agreement = {
            "near_consensus": {"value": near / n, "reason": None},
            "overlap_consensus": {"value": overlap / n, "reason": None},
            "complete_consensus": {"value": None, "reason": "undefined"},
        }
        return {
            "phase": {"id": hash(kind) % 100, "kind": kind, "name": kind},
            "n_images_2plus": n,
            "agreement": agreement,
        }

    summaries = [summary("calibration_1", 29, 18, 9), summary("calibration_2", 4, 2, 2), summary("main", 400, 360, 120)]
    (row,) = _rate_comparisons(summaries)  # calibration 2 has too few images to compare
    assert row["phase"]["kind"] == "calibration_1" and row["against"]["kind"] == "main"
    near, overlap = row["rates"]  # complete consensus is undefined in calibration 1: not compared
    expected = proportion_difference(18, 29, 360, 400)
    assert (near["low"], near["high"]) == (
        pytest.approx(expected.low, abs=1e-6),
        pytest.approx(expected.high, abs=1e-6),
    )
    assert near["differs"] and near["difference"] == pytest.approx(18 / 29 - 0.9, abs=1e-6)
    assert not overlap["differs"] and overlap["low"] < 0 < overlap["high"]  # 31% vs 30%
    assert _rate_comparisons(summaries[:2]) == []  # no main phase yet
