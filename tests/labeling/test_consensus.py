"""The lead's consensus dashboard: numbers cross-checked against reference libraries."""

import re
import xml.etree.ElementTree as ET

import krippendorff
import numpy as np
import pytest
from django.core.cache import cache
from sklearn.metrics import cohen_kappa_score

from labeling.models import Label, Membership, Phase
from labeling.services.phases import phase_close, phase_get, phase_open
from tests.factories import MembershipFactory, ProjectFactory, UserFactory, make_labelers, make_lead
from tests.labeling.helpers import add_images, open_calibration_1, shared_world, submit


def shows_nan(html):
    """Whether the page shows a reader "nan" (or "NaN") as a word in its text.

    Tags and scripts are dropped first: a random CSRF token or CSP nonce holds
    "nan" about once in a few hundred pages, and that is not a number shown.
    """
    text = re.sub(r"<script\b.*?</script>|<style\b.*?</style>", " ", html, flags=re.S | re.I)
    text = re.sub(r"<[^>]*>", " ", text)
    return re.search(r"(?<![A-Za-z0-9])nan(?![A-Za-z0-9])", text, flags=re.I) is not None


def test_shows_nan_reads_the_text_not_the_tokens():
    assert shows_nan("<td>nan</td>") and shows_nan("<p>alpha NaN [0.1, 0.2]</p>")
    assert not shows_nan('<input name="csrfmiddlewaretoken" value="xNaNq"><script nonce="a/nan+">x = NaN</script>')
    assert not shows_nan("<p>nanometres, banana</p>")


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


def _build_cal1(project, labelers):
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


def assert_coefficient(s: dict, expected: float, abs_: float = 1e-6) -> None:
    """A coefficient equals ``expected`` when shown; hidden only when its interval is too wide; its
    interval holds ``expected`` (the estimate) either way."""
    from labeling.services.consensus import MAX_COEFFICIENT_WIDTH

    assert s["low"] - abs_ <= expected <= s["high"] + abs_
    if s["value"] is None:
        assert s["too_wide"] and s["high"] - s["low"] > MAX_COEFFICIENT_WIDTH
    else:
        assert s["value"] == pytest.approx(expected, abs=abs_)
        assert s["high"] - s["low"] <= MAX_COEFFICIENT_WIDTH


@pytest.mark.usefixtures("coefficients_from_few_images")
def test_alpha_and_kappa_match_reference_libraries(client, cal1):
    lead, project = cal1.project.created_by, cal1.project
    data = _reliability(cal1)
    summary = _api(client, lead, project, cal1)["selected"]
    alpha = summary["agreement"]["alpha"]
    # 8 images: a coefficient is shown when its BCa interval is at most 0.5 wide, else its interval alone
    # (issue 12); either way the reference value is the estimate, which the interval always holds.
    for level in ("ordinal", "interval"):
        expected = krippendorff.alpha(data, level_of_measurement=level)
        assert_coefficient(alpha[level], expected)
    # Quadratic-weighted kappa of L1 vs L2 over the full half-step range 1..10.
    categories = np.arange(2, 21) / 2
    expected = cohen_kappa_score(
        (data[0] * 2).astype(int), (data[1] * 2).astype(int), labels=(categories * 2).astype(int), weights="quadratic"
    )
    names = summary["kappa"]["labelers"]
    first, second = names.index("L1"), names.index("L2")
    kappa = summary["kappa"]
    cell = {
        "value": kappa["matrix"][first][second],
        "low": kappa["low"][first][second],
        "high": kappa["high"][first][second],
        "too_wide": kappa["too_wide"][first][second],
    }
    assert_coefficient(cell, expected, abs_=1e-4)
    # Near consensus straight from the definition: all values within one tone.
    near = np.mean(np.nanmax(data, axis=0) - np.nanmin(data, axis=0) <= 1)
    rate = summary["agreement"]["near_consensus"]
    assert rate["k"] / rate["n"] == pytest.approx(near, abs=1e-6)
    # 6 of 8 images: the Wilson interval (41-93%) is wider than 50 points, so the share is not shown.
    assert rate["value"] is None and rate["reason"].startswith("too little data: n=8 images with 2+ labels")
    # Every image has 4 valid labels, so Fleiss' kappa is computed (shown, or its interval alone).
    fleiss = summary["agreement"]["fleiss_kappa"]
    assert fleiss["low"] is not None and (fleiss["value"] is not None or fleiss["too_wide"])
    assert [row["n_labels"] for row in summary["per_labeler"]] == [8, 8, 8, 8]


def test_images_api_filters_and_sorts(client, cal1):
    lead, project = cal1.project.created_by, cal1.project
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
    assert not shows_nan(page.content.decode())


@pytest.mark.usefixtures("coefficients_from_few_images")
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
    assert_coefficient(everything["agreement"]["alpha"]["ordinal"], expected_alpha)
    assert everything["agreement"]["near_consensus"]["value"] == 0.0
    page = _client(client, lead).get(f"/projects/{project.pk}/consensus/?phase={cal2.pk}").content.decode()
    assert 'id="calibration-2-all-images"' in page and "All images (7 with 2+ labels)" in page


def test_plots_are_valid_images(client, cal1):
    lead, project = cal1.project.created_by, cal1.project
    _client(client, lead)
    for name in ["label_distribution", "range_histogram", "kappa_heatmap", "test_retest", "labeler_bias"]:
        png = client.get(f"/projects/{project.pk}/consensus/plots/{name}.png?phase={cal1.pk}")
        assert png.status_code == 200 and png["Content-Type"] == "image/png"
        assert png.content.startswith(b"\x89PNG\r\n\x1a\n")
        svg = client.get(f"/projects/{project.pk}/consensus/plots/{name}.svg?phase={cal1.pk}&download=1")
        assert svg.status_code == 200 and svg["Content-Type"] == "image/svg+xml"
        assert "attachment" in svg["Content-Disposition"]
        assert ET.fromstring(svg.content).tag == "{http://www.w3.org/2000/svg}svg"


def test_labelers_and_reviewers_never_see_it(client, cal1):
    project = cal1.project
    labelers = list(Membership.objects.filter(project=project, role=Membership.Role.LABELER).order_by("pseudonym"))
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


def test_lead_page_and_openapi_schema(client, cal1):
    lead, project = cal1.project.created_by, cal1.project
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


def test_rates_carry_their_wilson_interval(client, cal1):
    lead, project = cal1.project.created_by, cal1.project
    from metrics.intervals import wilson_interval

    selected = _api(client, lead, project, cal1)["selected"]
    near = selected["agreement"]["near_consensus"]
    interval = selected["agreement_intervals"]["near_consensus"]
    n = selected["n_images_2plus"]
    assert interval["n"] == near["n"] == n == 8
    low, high = wilson_interval(near["k"], n)
    assert (interval["low"], interval["high"]) == (pytest.approx(low, abs=1e-6), pytest.approx(high, abs=1e-6))
    assert (near["low"], near["high"]) == (interval["low"], interval["high"])
    assert interval["low"] <= near["k"] / n <= interval["high"]
    page = _client(client, lead).get(f"/projects/{project.pk}/consensus/?phase={cal1.pk}").content.decode()
    # Too wide to read at 8 images: the page says so, with the interval.
    assert f"95% interval {round(interval['low'] * 100)}–{round(interval['high'] * 100)}%" in page


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


# --------------------------------------------------------------------------- issue 12: every rate has its interval

#: Statistics of the dashboard that are not rates or shares (their own intervals or reasons).
NOT_RATES = {
    "ordinal",
    "interval",
    "fleiss_kappa",
    "mean_diff",
    "mean_abs_diff",
    "alpha_without",
    "alpha_change",
    "weighted_kappa",
    "mean_shift",
    "bias",  # a baseline's copy of the phase's mean_diff
    "bias_change",
}


def stats_in(obj, path="dashboard"):
    """Every ``{"value", "reason"}`` dict of a dashboard answer, with its path and key."""
    if isinstance(obj, dict):
        if "value" in obj and "reason" in obj:
            yield path, obj
        for key, value in obj.items():
            yield from stats_in(value, f"{path}.{key}")
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from stats_in(value, f"{path}[{i}]")


def fractions_in(obj, path="dashboard"):
    """Every dict with a bare ``fraction`` (a share as a plain number)."""
    if isinstance(obj, dict):
        if "fraction" in obj:
            yield path, obj
        for key, value in obj.items():
            yield from fractions_in(value, f"{path}.{key}")
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from fractions_in(value, f"{path}[{i}]")


def build_study(project, labelers):
    """60 main images x 4 labelers (skips, adjacent pairs, uncertain flags), 12 calibration-1 images of
    which 10 are labelled again in calibration 2 by every labeler, and 3 new calibration-2 images."""
    rng = np.random.default_rng(12)
    images = add_images(project, 75)
    phases = {kind: phase_get(project, kind) for kind in (Phase.Kind.CALIBRATION_1, Phase.Kind.CALIBRATION_2)}
    main = phase_get(project, Phase.Kind.MAIN)
    rows, truth = [], {}

    def label(phase, image, labeler, tone, *, repeat=False):
        draw = rng.random()
        low, high = int(np.clip(tone, 1, 10)), None
        if draw < 0.04:
            low = None
        elif draw < 0.12 and low < 10:
            high = low + 1
        rows.append(
            Label(
                phase=phase,
                image=image,
                labeler=labeler,
                is_repeat=repeat,
                tone_low=low,
                tone_high=high,
                value=None if low is None else (low + (high or low)) / 2,
                uncertain=bool(rng.random() < 0.15),
                skip_reason="" if low is not None else "no skin visible",
            )
        )

    for k, image in enumerate(images):
        truth[image.id] = int(rng.integers(1, 11))
        hard = rng.random() < 0.3
        phase = main if k < 60 else phases[Phase.Kind.CALIBRATION_1] if k < 72 else phases[Phase.Kind.CALIBRATION_2]
        for labeler in labelers:
            label(phase, image, labeler, truth[image.id] + int(rng.integers(-2, 3) if hard else rng.integers(0, 2)))
            if 60 <= k < 70:
                label(
                    phases[Phase.Kind.CALIBRATION_2],
                    image,
                    labeler,
                    truth[image.id] + int(rng.integers(0, 2)),
                    repeat=True,
                )
    Label.objects.bulk_create(rows)
    return {"main": main, **phases}


def _build_worlds():
    """The calibration-1 phase and the study, each in its own project led by one lead, built once per module
    (``shared_world``); the usernames differ from the ``lead`` and ``labelers`` fixtures' of the other tests."""
    lead = make_lead("consensus-lead")
    first = ProjectFactory(created_by=lead)
    second = ProjectFactory(created_by=lead)
    return {
        "cal1": _build_cal1(first, make_labelers(first, prefix="c1-")),
        "study": build_study(second, make_labelers(second, prefix="c2-")),
    }


_shared_world, worlds = shared_world("worlds", _build_worlds)


@pytest.fixture
def cal1(worlds):
    """Calibration 1: 8 images labelled by four labelers as ``TONES`` says (its project: ``cal1.project``,
    led by ``cal1.project.created_by``)."""
    return worlds["cal1"]


@pytest.fixture
def study(worlds):
    return worlds["study"]


def test_every_rate_on_the_dashboard_carries_its_interval(client, study):
    project = study["main"].project
    lead = project.created_by
    from labeling.services.consensus import MAX_INTERVAL_WIDTH

    body = _api(client, lead, project, study["main"])
    found = [(path, s) for path, s in stats_in(body) if path.rsplit(".", 1)[-1] not in NOT_RATES]
    assert len(found) > 100
    paths = " ".join(path for path, _ in found)
    for name in (
        "near_consensus",
        "percent_exact",
        "percent_within_one",
        "uncertain_rate",
        "skip_rate",
        "skip_share",
        "flag_shares.wide_range",
        "flag_shares.invalid",
        "flag_shares.uncertain",
        "label_distribution.shares",
        "label_distribution.tone_share_intervals",
        "k_of_n[0].share",
        "unique_values[0].share",
        "test_retest.pooled.exact",
        "test_retest.per_labeler[0].within_one",
        "rate_comparisons[0].rates[0].calibration",
        "rate_comparisons[0].rates[0].main",
    ):
        assert name in paths, name
    shown = hidden = 0
    for path, s in found:
        assert {"low", "high", "n", "unit", "interval", "too_wide"} <= set(s), path
        if s["value"] is not None:
            shown += 1
            assert s["low"] <= s["value"] <= s["high"], path
            assert s["high"] - s["low"] <= MAX_INTERVAL_WIDTH, path
        else:
            hidden += 1
            assert s["reason"], path
            if s["too_wide"]:
                assert s["high"] - s["low"] > MAX_INTERVAL_WIDTH, path
                assert s["reason"].startswith(f"too little data: n={s['n']} "), path
    assert shown > 30 and hidden > 5
    # A bare share always sits beside its interval.
    for path, row in fractions_in(body):
        assert "share" in row and row["share"]["n"] >= row["n_items"], path
    distribution = body["selected"]["label_distribution"]
    assert len(distribution["tone_share_intervals"]) == len(distribution["tone_shares"])
    # Pairs of labels use the image-clustered interval: wider than Wilson over the pairs.
    from metrics.intervals import wilson_interval

    exact = body["selected"]["agreement"]["percent_exact"]
    assert exact["interval"] == "image-clustered" and exact["n"] == body["selected"]["n_images_2plus"]
    pairs = int(exact["n_units"])
    naive = wilson_interval(round(exact["value"] * pairs), pairs)
    assert exact["high"] - exact["low"] > naive[1] - naive[0]
    assert exact["value"] == pytest.approx(
        __import__("metrics").agreement.percent_exact(_reliability(study["main"])), abs=1e-6
    )


def test_a_rate_with_a_too_wide_interval_says_too_little_data_everywhere(client, study):
    project = study["main"].project
    lead = project.created_by
    body = _api(client, lead, project, study["main"])
    retest = {row["labeler"]: row for row in body["test_retest"]["per_labeler"]}
    # Up to 10 repeated images per labeler (fewer with skips): a middling exact share of 10 has a Wilson
    # interval wider than 50 points (5 of 10: 24-76%), 9 of 10 does not.
    from metrics.intervals import wilson_interval

    for row in retest.values():
        exact = row["exact"]
        k, n = exact["k"], exact["n"]
        assert 5 <= n <= 10
        low, high = wilson_interval(k, n)
        assert exact["too_wide"] == (high - low > 0.5)
        assert (exact["value"] is None) == exact["too_wide"]
    page = _client(client, lead).get(f"/projects/{project.pk}/consensus/?phase={study['main'].pk}").content.decode()
    assert "wider than 50 percentage points" in page or "too little data: n=" in page
    assert not shows_nan(page)


@pytest.mark.parametrize(
    ("k", "n", "shown"),
    [
        (3, 5, False),
        (5, 5, True),
        (7, 14, True),
        (6, 12, True),
        (5, 10, False),
        (18, 29, True),
        (0, 4, True),
        (2, 4, False),
    ],
)
def test_the_floor_rule_is_on_the_interval_width(k, n, shown):
    from labeling.services.consensus import MAX_INTERVAL_WIDTH, wilson_share
    from metrics.intervals import wilson_interval

    share = wilson_share(k, n)
    low, high = wilson_interval(k, n)
    assert (share["low"], share["high"]) == (pytest.approx(low, abs=1e-6), pytest.approx(high, abs=1e-6))
    assert (share["value"] is not None) == shown == (high - low <= MAX_INTERVAL_WIDTH)
    if not shown:
        assert share["reason"] == (
            f"too little data: n={n} images, 95% interval {low * 100:.0f}–{high * 100:.0f}% "
            "(wider than 50 percentage points)"
        )
    # The "fewer than MIN_IMAGES images" reason wins and keeps its own words.
    assert wilson_share(k, n, reason="too little data: 1 image")["reason"] == "too little data: 1 image"


# --------------------------------------------------------------------------- issue 12: coefficients too


@pytest.mark.usefixtures("coefficients_from_few_images")
def test_every_coefficient_carries_its_interval_and_the_width_rule(client, study):
    """Alpha (both levels), Fleiss' kappa, alpha without each labeler and the test-retest kappas: a BCa
    interval holding the value, shown only when at most MAX_COEFFICIENT_WIDTH wide; the matrix likewise."""
    project = study["main"].project
    lead = project.created_by
    from labeling.services.consensus import MAX_COEFFICIENT_WIDTH

    body = _api(client, lead, project, study["main"])
    coefficients = [(path, s) for path, s in stats_in(body) if s.get("scale") == "coefficient"]
    paths = " ".join(path for path, _ in coefficients)
    for name in (
        "agreement.alpha.ordinal",
        "agreement.alpha.interval",
        "agreement.fleiss_kappa",
        "per_labeler[0].alpha_without",
        "test_retest.pooled.weighted_kappa",
        "test_retest.per_labeler[0].weighted_kappa",
    ):
        assert name in paths, name
    shown = hidden = 0
    for path, s in coefficients:
        assert {"low", "high", "n", "unit", "interval", "too_wide"} <= set(s), path
        if s["value"] is not None:
            shown += 1
            assert s["low"] <= s["value"] <= s["high"] and s["high"] - s["low"] <= MAX_COEFFICIENT_WIDTH, path
            assert "BCa" in s["interval"], path
        elif s["too_wide"]:
            hidden += 1
            assert s["high"] - s["low"] > MAX_COEFFICIENT_WIDTH, path
            assert s["reason"].startswith(f"too little data: n={s['n']} "), path
            assert f"95% interval {s['low']:.2f} to {s['high']:.2f}" in s["reason"], path
    # 60 main images: alpha shown; 10 repeated images per labeler: some retest kappas too wide.
    assert body["selected"]["agreement"]["alpha"]["ordinal"]["value"] is not None
    assert shown >= 3 and hidden >= 1
    kappa = body["selected"]["kappa"]
    n = len(kappa["labelers"])
    for i in range(n):
        for j in range(n):
            if i == j or kappa["low"][i][j] is None:
                continue
            wide = kappa["high"][i][j] - kappa["low"][i][j] > MAX_COEFFICIENT_WIDTH
            assert kappa["too_wide"][i][j] == wide
            assert (kappa["matrix"][i][j] is None) == wide


@pytest.mark.usefixtures("coefficients_from_few_images")
def test_a_too_wide_coefficient_says_too_little_data_on_the_page(client, cal1):
    lead, project = cal1.project.created_by, cal1.project
    # 8 images: the calibration-1 alpha and kappas have wide intervals; each one hidden shows its interval.
    summary = _api(client, lead, project, cal1)["selected"]
    page = _client(client, lead).get(f"/projects/{project.pk}/consensus/?phase={cal1.pk}").content.decode()
    hidden = [s for _, s in stats_in(summary) if s.get("scale") == "coefficient" and s["too_wide"]]
    assert hidden
    for s in hidden:
        assert f"95% interval {s['low']:.2f} to {s['high']:.2f}" in page
    shown = [s for _, s in stats_in(summary["agreement"]) if s.get("scale") == "coefficient" and s["value"] is not None]
    for s in shown:
        assert f"[{s['low']:.3f}, {s['high']:.3f}]" in page or f"[{s['low']:.2f}, {s['high']:.2f}]" in page
    kappa = summary["kappa"]
    if any(any(row) for row in kappa["too_wide"]):
        assert "too little data</td>" in page


@pytest.mark.usefixtures("coefficients_from_few_images")
def test_a_coefficient_whose_every_resample_agrees_is_not_certain_on_few_images(client, lead, project, labelers):
    """Perfect agreement on 10 images: the bootstrap interval is [1, 1], which says nothing (issue 12)."""
    from labeling.services.consensus.numbers import (
        ZERO_WIDTH_MIN_IMAGES,
        coefficient_stat,
        unseen_disagreement_bound,
    )

    assert unseen_disagreement_bound(5) == pytest.approx(0.522, abs=1e-3)
    assert (
        unseen_disagreement_bound(ZERO_WIDTH_MIN_IMAGES) <= 0.10 < unseen_disagreement_bound(ZERO_WIDTH_MIN_IMAGES - 1)
    )
    assert coefficient_stat(1.0, 1.0, 1.0, ZERO_WIDTH_MIN_IMAGES)["value"] == 1.0
    assert coefficient_stat(0.8, 0.8, 0.8, 40)["value"] == 0.8
    assert coefficient_stat(0.9, 0.7, 1.0, 10)["value"] == 0.9  # a real interval: the width rule only

    add_images(project, 10)
    phase = open_calibration_1(project, size=10, cal1=10, labels_per_image=4)
    for m in labelers:
        for image_id in phase.assignments.filter(labeler=m).values_list("image_id", flat=True):
            _label(phase, m, image_id, 1 + image_id % 7)
    summary = _api(client, lead, project, phase)["selected"]
    ordinal = summary["agreement"]["alpha"]["ordinal"]
    assert (ordinal["low"], ordinal["high"]) == (1.0, 1.0)
    assert ordinal["value"] is None and "all agree" in ordinal["reason"] and "31%" in ordinal["reason"]
    kappa = summary["kappa"]
    off_diagonal = [kappa["too_wide"][i][j] for i in range(4) for j in range(4) if i != j]
    assert off_diagonal and all(off_diagonal)
    page = _client(client, lead).get(f"/projects/{project.pk}/consensus/?phase={phase.pk}").content.decode()
    assert "could disagree unseen" in page
