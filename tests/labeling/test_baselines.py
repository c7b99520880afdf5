"""Colorimetric baselines in jobs (labeling.services.baselines, tasks, pages and API).

Expected colour values are the published Monk Skin Tone swatch values (L*, b*,
ITA at D65/2 degrees, DOMAIN.md section 3); correlations are cross-checked with
scipy.stats.spearmanr on data rebuilt in the test from the labels it submitted.
"""

import io
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from PIL import Image as PILImage
from rest_framework.test import APIClient
from scipy import stats as scipy_stats

from labeling import colorimetry
from labeling.models import ImageBaseline, Job, Phase
from labeling.services import baselines as svc
from labeling.services.baselines import measure as baseline_measure
from labeling.services.baselines.parameters import stats_options
from labeling.services.images import image_create_from_bytes
from tests.factories import MembershipFactory, UserFactory, make_image, png_bytes
from tests.labeling.helpers import open_calibration_1, shared_world, submit

# Monk Skin Tone swatches: hex, published L*, b*, ITA (degrees).
MONK = {
    1: ("#f6ede4", 94.21, 5.43, 82.99),
    2: ("#f3e7db", 92.27, 7.29, 80.21),
    3: ("#f7ead0", 93.09, 14.22, 71.74),
    4: ("#eadaba", 87.57, 17.76, 64.70),
    5: ("#d7bd96", 77.90, 23.14, 50.32),
    6: ("#a07e56", 55.14, 26.75, 10.88),
    7: ("#825c43", 42.47, 20.54, -20.14),
    8: ("#604134", 30.68, 13.34, -55.38),
    9: ("#3a312a", 21.07, 5.97, -78.34),
    10: ("#292420", 14.61, 3.53, -84.31),
}
SIZE = (40, 30)


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return Path(settings.MEDIA_ROOT)


@pytest.fixture(autouse=True)
def eager(monkeypatch):
    """Run tasks in this process even when a broker is configured (CI's real-worker run):
    these tests never commit, so a worker could not see their rows; tests/test_real_services.py
    covers the worker."""
    from tests.labeling.helpers import run_tasks_here

    run_tasks_here(monkeypatch)


@pytest.fixture(autouse=True)
def commit_hooks(django_capture_on_commit_callbacks):
    """Run the jobs enqueued on commit (each test runs in a transaction that never commits)."""
    global _hooks
    _hooks = django_capture_on_commit_callbacks
    yield
    _hooks = None


_hooks = None


def committed(function, *args, **kwargs):
    """Call ``function`` and run what it enqueued on commit (eagerly, as in the embedded default)."""
    with _hooks(execute=True):
        return function(*args, **kwargs)


def rgb(tone: int) -> tuple[int, int, int]:
    hex_colour = MONK[tone][0]
    return tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))


def two_tone_png(left: tuple, right: tuple, size=SIZE) -> bytes:
    img = PILImage.new("RGB", size, right)
    img.paste(left, (0, 0, size[0] // 2, size[1]))
    buffer = io.BytesIO()
    img.save(buffer, format="PNG")
    return buffer.getvalue()


def mask_png(box=None, size=SIZE) -> bytes:
    """White inside ``box`` (all of the image by default), black elsewhere."""
    img = PILImage.new("L", size, 0)
    img.paste(255, box or (0, 0, *size))
    buffer = io.BytesIO()
    img.save(buffer, format="PNG")
    return buffer.getvalue()


def swatch_image(project, tone: int, *, name=None):
    """A solid Monk swatch with a skin mask covering it all (the detector misses MST 1-3, 9-10)."""
    return committed(
        image_create_from_bytes,
        project=project,
        filename=name or f"mst{tone}.png",
        data=png_bytes(colour=rgb(tone), size=SIZE),
        mask_data=mask_png(),
        mask_kind="skin",
    )


def current(image) -> ImageBaseline:
    return svc.baselines_current(image.project).get(image=image)


def run(project, **kwargs) -> Job:
    job = committed(svc.baseline_run_start, project=project, **kwargs)
    job.refresh_from_db()
    return job


# --- computation and storage ------------------------------------------------------


def portrait_png(tone: int) -> tuple[bytes, float]:
    """The astronaut portrait with its face recoloured to Monk ``tone``, and the face's true ITA."""
    from tests.colorimetry import skin_evaluation_set as evaluation

    portrait = evaluation.astronaut()
    rgb = evaluation.recoloured(portrait, tone)
    buffer = io.BytesIO()
    PILImage.fromarray(rgb).save(buffer, format="PNG")
    return buffer.getvalue(), evaluation.truth_ita(rgb, portrait.truth)


def test_new_image_gets_its_baseline_after_import_measured_on_the_face(project, tmp_path):
    data, truth = portrait_png(9)
    image = committed(image_create_from_bytes, project=project, filename="mst9.png", data=data)
    row = current(image)
    assert row.status == ImageBaseline.Status.OK
    assert row.code_version == svc.BASELINE_CODE_VERSION
    assert row.parameters_hash == svc.baseline_parameters_hash(svc.baseline_parameters_effective(project))
    assert row.ita_median == pytest.approx(truth, abs=5.0)  # MST 9: the colour rules found nothing here
    assert row.ita_class == "dark"
    assert row.flags == []
    assert row.stats["skin_source"] == "face" and row.stats["n_faces"] >= 1
    assert row.stats["fitzpatrick"] == colorimetry.fitzpatrick_from_ita(row.ita_median)
    assert row.parameters["skin_detector"].startswith("mediapipe_blazeface")  # the landmark model (issue 21)
    # The overlay: a PNG at the image's size; the measured skin (transparent or outlined) is on the face.
    with row.overlay.open("rb") as handle:
        overlay = PILImage.open(handle)
        overlay.load()
    assert overlay.format == "PNG" and overlay.size == (512, 512)
    indices = np.asarray(overlay)
    skin_y, skin_x = np.nonzero(indices != 1)
    assert 200 < skin_x.size < 20_000
    assert 170 <= skin_x.min() and skin_x.max() <= 285 and 60 <= skin_y.min() and skin_y.max() <= 185
    # It shows the pixels the statistics measured (not a second detection): the measurement's own selection.
    measured: list[np.ndarray] = []
    (tmp_path / "mst9.png").write_bytes(data)
    parameters = svc.baseline_parameters_effective(project)
    stats = colorimetry.measure_image(
        tmp_path / "mst9.png", max_pixels=parameters["max_pixels"], _mask_out=measured, **stats_options(parameters)
    )
    assert stats["n_skin_pixels"] == row.stats["n_skin_pixels"] and measured[0].shape == (512, 512)
    assert np.array_equal(indices != 1, measured[0])
    client = Client()
    client.force_login(project.created_by)
    page = client.get(f"/projects/{project.pk}/baselines/images/{image.pk}/").content.decode()
    assert "1 face found" in page


def test_a_swatch_without_a_mask_has_no_face_and_no_number(project):
    image = committed(make_image, project, colour=rgb(5), size=SIZE)
    row = current(image)
    assert row.status == ImageBaseline.Status.OK and row.ita_median is None and row.ita_class == ""
    assert {"no_face", "too_little_skin"} <= set(row.flags)
    # The labelled fallback, when chosen, measures the swatch with the colour rules and says so.
    job = run(project, parameters={"skin_detector": "face_or_rules"})
    assert job.status == Job.Status.DONE
    row = current(image)
    assert row.ita_median == pytest.approx(MONK[5][3], abs=0.02)
    assert {"no_face", "rule_based_skin"} <= set(row.flags)
    assert row.stats["skin_source"] == "rules"


def test_skin_mask_is_measured_exactly_and_silhouette_limits_the_detector(project):
    data, truth = portrait_png(2)
    everything = committed(
        image_create_from_bytes,
        project=project,
        filename="a.png",
        data=data,
        mask_data=mask_png(size=(512, 512)),
        mask_kind="silhouette",
    )
    row = current(everything)
    assert row.ita_median == pytest.approx(truth, abs=5.0)
    assert "silhouette" in row.parameters["skin_detector"]
    left_only = committed(
        image_create_from_bytes,
        project=project,
        filename="b.png",
        data=portrait_png(3)[0],
        mask_data=mask_png((0, 0, 150, 512), size=(512, 512)),
        mask_kind="silhouette",
    )
    row = current(left_only)  # the face is outside the silhouette: nothing measured
    assert row.status == "ok" and row.ita_median is None and "too_little_skin" in row.flags
    skin_right = committed(
        image_create_from_bytes,
        project=project,
        filename="c.png",
        data=two_tone_png(rgb(5), rgb(9)),
        mask_data=mask_png((20, 0, 40, 30)),
        mask_kind="skin",
    )
    row = current(skin_right)  # a skin mask is trusted, whatever the detectors would say
    assert row.ita_median == pytest.approx(MONK[9][3], abs=0.05)
    assert row.parameters["skin_detector"] == "mask"


def test_a_run_twice_keeps_one_result_per_image_and_parameter_set(project):
    images = [swatch_image(project, t) for t in (4, 6, 8)]
    assert ImageBaseline.objects.filter(image__project=project).count() == 3  # computed after import
    first = run(project)
    second = run(project)
    for job in (first, second):
        assert job.status == Job.Status.DONE
        assert (job.total, job.done, job.failed) == (3, 3, 0)
        assert job.parameters["code_version"] == svc.BASELINE_CODE_VERSION
        assert job.finished_at is not None
    rows = ImageBaseline.objects.filter(image__project=project)
    assert rows.count() == 3
    assert set(rows.values_list("job_id", flat=True)) == {second.id}
    assert {r.image_id for r in rows} == {i.id for i in images}


def test_a_retried_batch_counts_no_image_twice(project):
    images = [swatch_image(project, t) for t in (5, 7)]
    job = run(project)
    ids = [i.id for i in images]
    svc.baseline_run_batch(job=job, image_ids=ids)  # as if the worker died and the batch ran again
    job.refresh_from_db()
    assert (job.done, job.failed, job.total) == (2, 0, 2)
    assert ImageBaseline.objects.filter(image__project=project).count() == 2


def test_changed_parameters_give_new_results_and_keep_the_old_ones(project):
    image = swatch_image(project, 6)
    old = current(image)
    job = run(project, parameters={"fitzpatrick_mapping": "chardon_classes", "min_skin_fraction": 0.5})
    assert job.status == Job.Status.DONE
    project.refresh_from_db()
    assert project.baseline_parameters == {"fitzpatrick_mapping": "chardon_classes", "min_skin_fraction": 0.5}
    new = current(image)
    assert new.pk != old.pk and new.parameters_hash != old.parameters_hash
    assert ImageBaseline.objects.filter(image=image).count() == 2
    # ITA 10.88: Kinyanjui 2020 type V (10-19), Chardon classes read one-to-one: tan -> IV.
    assert old.stats["fitzpatrick"] == 5
    assert new.stats["fitzpatrick"] == 4
    assert new.parameters["min_skin_fraction"] == 0.5


def test_a_failed_image_is_recorded_with_its_reason_and_the_run_finishes(project):
    good = swatch_image(project, 5)
    corrupt = swatch_image(project, 6)
    Path(corrupt.original.path).write_bytes(b"\x89PNG\r\n\x1a\n" + b"not really a png" * 10)
    wrong_mask = swatch_image(project, 7)
    Path(wrong_mask.mask.path).write_bytes(mask_png(size=(12, 9)))
    job = run(project)
    assert job.status == Job.Status.DONE
    assert (job.total, job.done, job.failed) == (3, 1, 2)
    reasons = {f["image_id"]: f["reason"] for f in job.failures}
    assert set(reasons) == {corrupt.id, wrong_mask.id}
    assert reasons[corrupt.id].startswith("corrupt or unreadable file")
    assert corrupt.original.path not in reasons[corrupt.id]  # no server paths shown to leads
    assert reasons[wrong_mask.id].startswith("mask size mismatch")
    assert "12x9" in reasons[wrong_mask.id] and "40x30" in reasons[wrong_mask.id]
    failed = current(wrong_mask)
    assert failed.status == "failed" and failed.ita_median is None and failed.error == reasons[wrong_mask.id]
    assert current(good).status == "ok"
    # Retrying the failures: a new run over those two images only, same parameters.
    retry = committed(svc.baseline_retry_failed, job=job)
    retry.refresh_from_db()
    assert retry.parameters["retry_of"] == job.id
    assert sorted(retry.parameters["image_ids"]) == sorted([corrupt.id, wrong_mask.id])
    assert (retry.total, retry.failed, retry.status) == (2, 2, Job.Status.DONE)


def test_storage_errors_are_raised_for_a_retry_and_recorded_on_the_last_attempt(project, monkeypatch):
    image = swatch_image(project, 5)
    parameters = svc.baseline_parameters_effective(project)

    def flaky(*args, **kwargs):
        raise OSError("NFS server not responding")

    # Patched where it is called: the package only re-exports the service names. A skin-masked image
    # (this swatch) is decoded once for its masked and automatic readings (issue 21): decode_image.
    monkeypatch.setattr(baseline_measure, "measure_image", flaky)
    monkeypatch.setattr(baseline_measure, "decode_image", flaky)
    ImageBaseline.objects.all().delete()
    with pytest.raises(OSError):
        svc.baseline_compute(image=image, parameters=parameters, final_attempt=False)
    assert not ImageBaseline.objects.exists()
    row = svc.baseline_compute(image=image, parameters=parameters, final_attempt=True)
    assert row.status == "failed" and "NFS server not responding" in row.error


def test_a_deleted_image_is_counted_so_the_run_still_ends(project):
    images = [swatch_image(project, t) for t in (5, 6)]
    job = Job.objects.create(
        project=project,
        kind=Job.Kind.BASELINE,
        total=2,
        parameters={
            "options": svc.baseline_parameters_effective(project),
            "parameters_hash": svc.baseline_parameters_hash(svc.baseline_parameters_effective(project)),
        },
    )
    batches = svc.baseline_run_prepare(job=job)
    images[1].delete()
    for batch in batches:
        svc.baseline_run_batch(job=job, image_ids=batch)
    job.refresh_from_db()
    assert (job.done, job.failed, job.status) == (1, 1, Job.Status.DONE)
    assert job.failures[0]["reason"] == "image deleted during the run"


@pytest.mark.parametrize(
    "parameters, key",
    [
        ({"min_skin_fraction": 2}, "min_skin_fraction"),
        ({"clip_level": 250.5}, "clip_level"),
        ({"fitzpatrick_mapping": "made-up"}, "fitzpatrick_mapping"),
        ({"white_point": "D50"}, "white_point"),
        ({"max_cast_ratio": "abc"}, "max_cast_ratio"),
        ({"min_abs_b": True}, "min_abs_b"),
    ],
)
def test_bad_parameters_are_refused_with_the_key(parameters, key):
    with pytest.raises(ValidationError) as info:
        svc.baseline_parameters_validate(parameters)
    assert key in info.value.message_dict


@pytest.mark.parametrize("value", [{"name": "kinyanjui"}, ["kinyanjui"], 3])
@pytest.mark.parametrize("key", ["fitzpatrick_mapping", "skin_detector"])
def test_a_choice_sent_as_an_object_or_a_list_is_a_400_not_a_500(project, client_for, key, value):
    """Issue 13 (7): an object as ``fitzpatrick_mapping`` was looked up in a dict (unhashable: a 500)."""
    with pytest.raises(ValidationError) as info:
        svc.baseline_parameters_validate({key: value})
    assert "Choose one of" in info.value.message_dict[key][0]
    api = client_for(project.created_by)
    response = api.post(f"/api/projects/{project.pk}/baselines/run/", {"parameters": {key: value}}, format="json")
    assert response.status_code == 400
    assert "Choose one of" in response.json()[key][0]


def test_defaults_are_the_colorimetry_defaults():
    import inspect

    signature = inspect.signature(colorimetry.skin_tone_stats).parameters
    for name, value in svc.DEFAULT_PARAMETERS.items():
        if name == "max_pixels":
            assert value == colorimetry.DEFAULT_MAX_PIXELS
        elif name == "fitzpatrick_mapping":
            assert value == signature[name].default.name
        else:
            assert value == signature[name].default


# --- comparison with labels -------------------------------------------------------

# Swatch tone of each image -> the tones four labelers give it. The MST 9 swatch is
# labelled as tone 2: the one disagreement between humans and ITA.
LABELS = {
    4: [4, 4, 5, 4],
    5: [5, 6, 5, 5],
    6: [6, 6, 7, 6],
    7: [7, 8, 7, 7],
    8: [8, 8, 9, 8],
    9: [2, 2, 3, 2],
    10: [10, 9, 10, 10],
}


def _build_labelled():
    """A swatch of each tone with its skin mask, measured, and labelled by four labelers (``LABELS``)."""
    from django.test import TestCase

    from tests.factories import ProjectFactory, make_labelers, make_lead

    global _hooks
    _hooks = TestCase.captureOnCommitCallbacks
    try:
        # Names of their own: a test of this module outside the world (the ``lead`` fixture) may run beside it.
        project = ProjectFactory(created_by=make_lead("labelled-lead"))
        labelers = make_labelers(project, prefix="labelled-")
        images = {tone: swatch_image(project, tone) for tone in LABELS}
    finally:
        _hooks = None
    phase = open_calibration_1(project, size=len(images), cal1=len(images), labels_per_image=4)
    for tone, image in images.items():
        for labeler, given in zip(labelers, LABELS[tone], strict=True):
            submit(phase, labeler, image.id, tones=(given,))
    return project, phase, images


# Built once for the module: ten swatches measured and labelled were most of these tests' set-up.
_shared_world, labelled = shared_world("labelled", _build_labelled)


def test_comparison_matches_scipy_spearman_on_the_same_data(labelled):
    project, phase, images = labelled
    result = svc.baseline_comparison(project=project, phase=phase, n_resamples=300, seed=7)
    means = [float(np.mean(LABELS[t])) for t in sorted(images)]
    itas = [current(images[t]).ita_median for t in sorted(images)]
    expected = scipy_stats.spearmanr(means, itas)
    ita = result["correlations"]["ita"]
    assert ita["n"] == len(images)
    assert ita["rho"] == pytest.approx(expected.statistic, abs=1e-12)
    assert ita["p_value"] == pytest.approx(expected.pvalue, rel=1e-9)
    albedos = [current(images[t]).albedo for t in sorted(images)]
    assert result["correlations"]["apparent_albedo"]["rho"] == pytest.approx(
        scipy_stats.spearmanr(means, albedos).statistic, abs=1e-12
    )
    # The seeded bootstrap is reproducible and brackets rho.
    again = svc.baseline_comparison(project=project, phase=phase, n_resamples=300, seed=7)
    assert (again["correlations"]["ita"]["ci_low"], again["correlations"]["ita"]["ci_high"]) == (
        ita["ci_low"],
        ita["ci_high"],
    )
    assert -1 <= ita["ci_low"] <= ita["rho"] <= ita["ci_high"] <= 1
    # The image humans and ITA disagree on most is the MST 9 swatch labelled as tone 2.
    assert result["disagreements"][0]["image_id"] == images[9].id
    # Box plot groups: the rounded median label.
    assert result["by_tone"]["2"] == [pytest.approx(MONK[9][3], abs=0.05)]
    assert len(result["by_tone"]["10"]) == 1
    # Another phase without labels: nothing to compare.
    main = project.phases.get(kind=Phase.Kind.MAIN)
    assert svc.baseline_comparison(project=project, phase=main)["points"] == []


# --- pages, API, permissions --------------------------------------------------------


def page_urls(project, image, row, job):
    return [
        f"/projects/{project.pk}/baselines/",
        f"/projects/{project.pk}/baselines/compare/",
        f"/projects/{project.pk}/baselines/plots/scatter.png",
        f"/projects/{project.pk}/baselines/plots/box.svg",
        f"/projects/{project.pk}/baselines/images/{image.pk}/",
        f"/projects/{project.pk}/baselines/jobs/",
        f"/projects/{project.pk}/baselines/jobs/{job.pk}/",
        f"/baselines/{row.pk}/overlay.png",
        f"/api/projects/{project.pk}/baselines/",
        f"/api/projects/{project.pk}/baselines/comparison/",
    ]


def test_leads_see_everything_and_labelers_and_strangers_get_404(labelled):
    project, phase, images = labelled
    image = images[5]
    job = run(project)
    row = current(image)
    labeler = project.memberships.get(pseudonym="L1").user
    reviewer = MembershipFactory(project=project, user=UserFactory(username="rev"), role="reviewer").user
    stranger = UserFactory(username="stranger")
    lead = Client()
    lead.force_login(project.created_by)
    for url in page_urls(project, image, row, job):
        if "/plots/" not in url:  # drawn in test_plots_are_valid_png_and_svg
            assert lead.get(url).status_code == 200, url
    for user in (labeler, reviewer, stranger):
        client = Client()
        client.force_login(user)
        for url in page_urls(project, image, row, job):
            assert client.get(url).status_code == 404, (user.username, url)
        api = APIClient()
        api.force_authenticate(user)
        assert api.post(f"/api/projects/{project.pk}/baselines/run/", {}, format="json").status_code == 404
        assert client.post(f"/projects/{project.pk}/baselines/run/").status_code == 404
    # The labeler's own screens carry nothing of the baseline.
    api = APIClient()
    api.force_authenticate(labeler)
    payload = api.get(f"/api/phases/{phase.pk}/labels/").content.decode().lower()
    for word in ("ita", "albedo", "baseline", "overlay"):
        assert f'"{word}' not in payload
    assert Client().get(f"/projects/{project.pk}/baselines/").status_code == 302  # anonymous: to login


def test_plots_are_valid_png_and_svg(labelled):
    project, phase, _images = labelled
    client = Client()
    client.force_login(project.created_by)
    for plot in ("scatter", "box"):
        response = client.get(f"/projects/{project.pk}/baselines/plots/{plot}.png?phase={phase.pk}")
        assert response["Content-Type"] == "image/png"
        img = PILImage.open(io.BytesIO(response.content))
        img.verify()
        assert img.format == "PNG"
        response = client.get(f"/projects/{project.pk}/baselines/plots/{plot}.svg?phase={phase.pk}&download=1")
        assert response["Content-Type"] == "image/svg+xml"
        assert response["Content-Disposition"].startswith("attachment")
        root = ET.fromstring(response.content)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert client.get(f"/projects/{project.pk}/baselines/plots/pie.png").status_code == 404


def test_api_lists_filters_and_starts_runs(project):
    swatch_image(project, 5)  # light
    swatch_image(project, 8)  # dark
    committed(make_image, project, colour=(40, 60, 200), size=SIZE)  # no skin at all
    api = APIClient()
    api.force_authenticate(project.created_by)
    url = f"/api/projects/{project.pk}/baselines/"
    body = api.get(url).json()
    assert body["count"] == 3 and body["code_version"] == svc.BASELINE_CODE_VERSION
    assert "Kinyanjui" in body["fitzpatrick_mapping_source"]
    first = body["results"][0]
    assert {"apparent_albedo", "apparent_albedo_normalized", "ita_iqr", "hue_angle", "overlay_url"} <= set(first)
    assert [r["ita_class"] for r in api.get(url, {"ita_class": "dark"}).json()["results"]] == ["dark"]
    flagged = api.get(url, {"flag": "too_little_skin"}).json()["results"]
    assert len(flagged) == 1 and flagged[0]["ita_median"] is None
    # The dark swatch is flagged too: a solid MST 8 frame has no white above Y = 0.10.
    unflagged = [r["image_id"] for r in body["results"] if r["status"] == "ok" and not r["flags"]]
    assert len(unflagged) == 1
    assert [r["image_id"] for r in api.get(url, {"flag": "none"}).json()["results"]] == unflagged
    dark = [r["image_id"] for r in body["results"] if r["ita_class"] == "dark"]
    assert dark[0] in [r["image_id"] for r in api.get(url, {"flag": "underexposed"}).json()["results"]]
    assert api.get(url, {"flag": "bogus"}).status_code == 400

    run_url = f"/api/projects/{project.pk}/baselines/run/"
    bad = api.post(run_url, {"parameters": {"min_skin_fraction": -1, "nope": 1}}, format="json")
    assert bad.status_code == 400
    assert {"min_skin_fraction", "nope"} <= set(bad.json())
    assert api.post(run_url, {"image_ids": "all"}, format="json").status_code == 400
    assert api.post(run_url, {"image_ids": [999999]}, format="json").status_code == 400
    started = committed(api.post, run_url, {"parameters": {"min_skin_fraction": 0.1}}, format="json")
    assert started.status_code == 202
    job = api.get(started.json()["url"]).json()
    assert (job["kind"], job["status"], job["done"], job["total"]) == ("baseline", "done", 3, 3)
    assert api.get(url).json()["parameters"]["min_skin_fraction"] == 0.1


def test_retry_page_action_starts_a_new_run(project):
    broken = swatch_image(project, 6)
    Path(broken.original.path).write_bytes(b"garbage")
    job = run(project)
    client = Client()
    client.force_login(project.created_by)
    response = committed(client.post, f"/projects/{project.pk}/baselines/jobs/{job.pk}/retry/")
    new = Job.objects.exclude(pk=job.pk).get(kind=Job.Kind.BASELINE)
    assert response.status_code == 302 and response["Location"].endswith(f"/jobs/{new.pk}/")
    assert new.parameters["retry_of"] == job.pk


# --- issue 12: the detector's figures, flagged images, coverage per tone, recompute ----------


def test_baselines_page_shows_the_detector_figures_per_tone(project):
    client = Client()
    client.force_login(project.created_by)
    html = client.get(f"/projects/{project.pk}/baselines/").content.decode()
    assert 'id="detector-evaluation"' in html
    figures = colorimetry.skin_detector_evaluation()
    assert figures["algorithm_version"] == colorimetry.ALGORITHM_VERSION
    section = html.split('id="detector-evaluation"')[1].split("</section>")[0]
    # The lead is told that an edited small copy (sharpened, compressed) moves a small face's reading.
    assert 'id="import-originals"' in section and "Import the originals." in section
    # The cascades were the default until colorimetry-3.0.0, whatever the current version is.
    assert "the default before colorimetry-3.0.0" in section
    assert f"the default before {figures['algorithm_version']}" not in section
    rows = section.split("<tbody>")[1].split("</tbody>")[0].split("</tr>")[:-1]
    assert len(rows) == 10
    for tone, row in enumerate(rows, start=1):
        (development,) = [
            r for r in figures["sets"]["development"][colorimetry.DEFAULT_SKIN_DETECTOR] if r["tone"] == tone
        ]
        assert f"<td>{tone}</td>" in row
        assert f"{development['within']}/{development['cases']}" in row


def test_comparison_page_leaves_out_flagged_images_by_default_and_shows_both(labelled):
    project, _phase, images = labelled
    flagged = current(images[5])
    flagged.flags = ["wide_ita_spread"]
    flagged.save(update_fields=["flags"])
    unflagged = [t for t, image in images.items() if not current(image).flags]
    assert 0 < len(unflagged) < len(images)  # the dark swatches are flagged underexposed too
    client = Client()
    client.force_login(project.created_by)
    default = client.get(f"/projects/{project.pk}/baselines/compare/")
    assert default.context["exclude_flagged"] is True
    assert default.context["comparison"]["n_points"] == len(unflagged)
    assert default.context["other"]["n_points"] == len(images)
    # The API leaves flagged images out by default too, and gives the points.
    api = client.get(f"/api/projects/{project.pk}/baselines/comparison/").json()
    assert api["exclude_flagged"] is True
    assert {p["image_id"] for p in api["points"]} == {images[t].id for t in unflagged}
    api_all = client.get(f"/api/projects/{project.pk}/baselines/comparison/?exclude_flagged=0").json()
    assert len(api_all["points"]) == len(images)
    bad = client.get(f"/api/projects/{project.pk}/baselines/comparison/?exclude_flagged=maybe")
    assert bad.status_code == 400 and "exclude_flagged" in bad.json()
    ita_row = default.context["measures"][0]
    assert (ita_row[1]["n"], ita_row[2]["n"]) == (len(unflagged), len(images))
    included = client.get(f"/projects/{project.pk}/baselines/compare/?exclude_flagged=0")
    assert included.context["exclude_flagged"] is False
    assert included.context["comparison"]["n_points"] == len(images)
    # Per consensus tone: labelled images, with an ITA, without a flag (the MST 5 swatch, tone 5, is flagged).
    coverage = {c["tone"]: c for c in default.context["comparison"]["coverage_by_tone"]}
    assert coverage[5] == {"tone": 5, "n_labelled": 1, "n_with_ita": 1, "n_unflagged": 0}
    assert sum(c["n_labelled"] for c in coverage.values()) == len(images)
    assert sum(c["n_unflagged"] for c in coverage.values()) == len(unflagged)
    assert 'id="coverage-by-tone"' in default.content.decode()


def test_a_method_change_leaves_old_results_and_recompute_starts_a_run_over_the_rest(project, monkeypatch):
    from django.core.management import call_command

    images = [swatch_image(project, t) for t in (4, 6)]
    old_rows = {i.id: current(i).pk for i in images}
    assert svc.baseline_images_without_current(project) == []
    assert svc.baseline_run_outdated(project=project) is None
    # A new version of the method: nothing is current any more, the old rows stay.
    new_version = svc.BASELINE_CODE_VERSION + "+test"
    for module in (svc, svc.parameters, svc.runs, svc.storage, svc.comparison):
        monkeypatch.setattr(module, "BASELINE_CODE_VERSION", new_version, raising=False)
    assert svc.baseline_images_without_current(project) == sorted(i.id for i in images)
    summary = svc.baseline_summary(project)
    assert (summary["n_missing"], summary["n_outdated"]) == (2, 2)
    with _hooks(execute=True):
        call_command("baselines_recompute", stdout=io.StringIO())
    rows = ImageBaseline.objects.filter(image__project=project)
    assert rows.count() == 4  # the old results are kept
    assert set(rows.filter(code_version=new_version).values_list("image_id", flat=True)) == {i.id for i in images}
    assert all(ImageBaseline.objects.filter(pk=pk).exists() for pk in old_rows.values())
    assert svc.baseline_images_without_current(project) == []
