"""The baseline audited on the project's own photos, and the mask sample (issue 21), through the API and pages.

Real components throughout: images imported through the service, the landmark detector measuring them,
labels submitted by labelers, masks rasterised from polygons and measured.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from django.test import Client
from PIL import Image as PILImage
from rest_framework.test import APIClient

from labeling.models import Image, MaskSample, MaskSampleItem, Membership
from labeling.services import baselines as svc
from labeling.services.images import image_create_from_bytes
from tests.factories import MembershipFactory, UserFactory, make_image
from tests.labeling.helpers import open_calibration_1, shared_world, submit

#: A small portrait is enough for the landmark model (its detector works on 128 px) and keeps this fast.
SIDE = 192


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")


@pytest.fixture(autouse=True)
def eager(monkeypatch):
    """Tasks in this process even with CI's broker: these tests never commit, a worker would not see the rows."""
    from tests.labeling.helpers import run_tasks_here

    run_tasks_here(monkeypatch)


def _portrait(tone: int, variant: int) -> bytes:
    from tests.colorimetry import skin_evaluation_set as evaluation

    rgb = evaluation.recoloured(evaluation.astronaut(), tone)
    image = PILImage.fromarray(rgb).resize((SIDE, SIDE), PILImage.Resampling.BOX)
    if variant % 2:
        image = image.transpose(PILImage.Transpose.FLIP_LEFT_RIGHT)
    image.putpixel((0, 0), (variant, variant, variant))  # one corner pixel: other bytes, another image
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _audited_world(project, labelers):
    """Light-labelled portraits (faces found) and deep-labelled images without a face: a planted gap."""
    from django.test import TestCase

    images = {}
    with TestCase.captureOnCommitCallbacks(execute=True):
        for i in range(6):
            images[f"light{i}"] = (
                image_create_from_bytes(project=project, filename=f"light{i}.png", data=_portrait(1 + i % 2, i)),
                1 + i % 2,
            )
        for i in range(6):
            # A plain deep swatch: no face for the detector, as a missed dark face would be.
            images[f"deep{i}"] = (make_image(project, colour=(0x3A - i, 0x31, 0x2A), size=(48, 40)), 9 + i % 2)
    phase = open_calibration_1(project, size=len(images), cal1=len(images), labels_per_image=4)
    for image, tone in images.values():
        for labeler in labelers:
            submit(phase, labeler, image.id, tones=(tone,))
    return project, images


def _build_audited():
    from tests.factories import ProjectFactory, make_labelers, make_lead

    # Names of their own: a test of this module outside the world (the ``lead`` fixture) may run beside it.
    project = ProjectFactory(created_by=make_lead("audit-lead"))
    return _audited_world(project, make_labelers(project, prefix="audit-"))


# Built once for the module (twelve images through the landmark detector were most of its tests' time).
_shared_world, audited = shared_world("audited", _build_audited)


@pytest.fixture
def world_labelers(audited):
    project, _images = audited
    return list(Membership.objects.filter(project=project, role=Membership.Role.LABELER).order_by("pseudonym"))


def current_automatic(project, image) -> dict:
    return svc.baselines_current(project).get(image=image).stats["automatic"]


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_audit_warns_of_a_planted_coverage_gap(audited):
    project, images = audited
    answer = _api(project.created_by).get(f"/api/projects/{project.pk}/baselines/audit/")
    assert answer.status_code == 200
    audit = answer.json()
    assert [row["tone"] for row in audit["by_tone"]] == [1, 2, 9, 10]
    light = audit["gap"]["light"]
    deep = audit["gap"]["deep"]
    assert (light["k"], light["n"], deep["k"], deep["n"]) == (6, 6, 0, 6)
    assert audit["warning"] is True and audit["gap"]["ci_low"] > 0
    assert audit["sentence"].startswith("the automatic baseline found a face in 0% [0, 39] of MST 9-10 images")
    tone_1 = audit["by_tone"][0]
    assert tone_1["coverage"]["ci_high"] == 1.0 and tone_1["ita"]["median"] > 55
    assert tone_1["lightness"]["median"] > 85 and tone_1["hue_angle"]["median"] is not None
    assert audit["code_version"] == svc.BASELINE_CODE_VERSION and audit["mask_validation"] is None
    # The pages say it: the audit page and the baselines results page.
    client = Client()
    client.force_login(project.created_by)
    page = client.get(f"/projects/{project.pk}/baselines/audit/").content.decode()
    assert 'id="audit-warning"' in page and "0% [0, 39] (0/6)" in page and "100% [61, 100] (6/6)" in page
    results = client.get(f"/projects/{project.pk}/baselines/").content.decode()
    assert 'id="audit-warning"' in results and "recoloured" in results


def test_no_warning_without_a_gap_and_none_without_images(project, labelers, django_capture_on_commit_callbacks):
    empty = _api(project.created_by).get(f"/api/projects/{project.pk}/baselines/audit/").json()
    assert empty["warning"] is None and empty["n_labelled"] == 0
    assert "no image of the light band" in empty["gap"]["reason"]


def test_who_sees_the_audit(audited, world_labelers):
    project, _images = audited
    reviewer = UserFactory(username="reviewer")
    MembershipFactory(project=project, user=reviewer, role=Membership.Role.REVIEWER, pseudonym="R1")
    url = f"/api/projects/{project.pk}/baselines/audit/"
    assert _api(reviewer).get(url).status_code == 200
    assert _api(world_labelers[0].user).get(url).status_code == 404  # labelers never learn it exists
    assert _api(UserFactory(username="stranger")).get(url).status_code == 404
    assert APIClient().get(url).status_code in (401, 403)
    # A reviewer reads, but draws no sample.
    assert (
        _api(reviewer).post(f"/api/projects/{project.pk}/baselines/mask-sample/", {}, format="json").status_code == 404
    )
    page = Client()
    page.force_login(world_labelers[0].user)
    assert page.get(f"/projects/{project.pk}/baselines/audit/").status_code == 404


def test_a_mask_sample_is_stratified_seeded_and_refuses_bad_input(audited):
    project, _images = audited
    lead = _api(project.created_by)
    url = f"/api/projects/{project.pk}/baselines/mask-sample/"
    for bad in ({"per_tone": 0}, {"per_tone": "ten"}, {"per_tone": 10_000}, {"seed": -1}, {"colour": 1}):
        answer = lead.post(url, bad, format="json")
        assert answer.status_code == 400, bad
        assert answer.json()
    assert not MaskSample.objects.exists()
    first = lead.post(url, {"per_tone": 2, "seed": 5}, format="json").json()
    again = lead.post(url, {"per_tone": 2, "seed": 5}, format="json").json()
    assert [i["image_id"] for i in first["items"]] == [i["image_id"] for i in again["items"]]
    tones = [i["tone"] for i in first["items"]]
    assert sorted(set(tones)) == [1, 2, 9, 10] and all(tones.count(t) == 2 for t in set(tones))
    assert (first["seed"], first["per_tone"]) == (5, 2)
    latest = lead.get(f"/api/projects/{project.pk}/baselines/mask-sample/latest/").json()
    assert latest["sample_id"] == again["sample_id"]


def test_a_drawn_polygon_becomes_the_skin_mask_and_is_scored(audited, django_capture_on_commit_callbacks):
    project, _images = audited
    lead = _api(project.created_by)
    sample = lead.post(f"/api/projects/{project.pk}/baselines/mask-sample/", {"per_tone": 1, "seed": 1}, format="json")
    (item,) = [i for i in sample.json()["items"] if i["tone"] == 1]
    url = f"/api/projects/{project.pk}/baselines/mask-sample/items/{item['id']}/polygon/"
    image = Image.objects.get(pk=item["image_id"])
    for bad in ({"points": [[0.1, 0.1], [0.2, 0.2]]}, {"points": [[0, 0], [2, 0], [0, 1]]},
                {"points": [[0.1, 0.1], [0.2, 0.2], [0.3, 0.3]]}, {"points": "square"}, {}):  # fmt: skip
        answer = lead.post(url, bad, format="json")
        assert answer.status_code == 400, bad
    image.refresh_from_db()
    assert not image.mask  # nothing half-stored
    assert MaskSampleItem.objects.get(pk=item["id"]).mask_source == ""
    # The cheeks and nose of the astronaut (as fractions of the image).
    cheeks = [[0.39, 0.24], [0.50, 0.22], [0.50, 0.30], [0.39, 0.31]]
    if image.external_id.startswith("light") and int(image.external_id[-1]) % 2:  # a mirrored copy
        cheeks = [[1 - x, y] for x, y in cheeks]
    with django_capture_on_commit_callbacks(execute=True):
        answer = lead.post(url, {"points": cheeks}, format="json")
    assert answer.status_code == 200, answer.content
    row = answer.json()
    assert row["mask_source"] == "drawn" and row["masked_ita"] is not None
    assert row["automatic_face_found"] is True and abs(row["automatic_ita"] - row["masked_ita"]) < 10
    assert row["code_version"] == svc.BASELINE_CODE_VERSION
    image.refresh_from_db()
    assert image.mask_kind == "skin"
    with image.mask.open("rb") as handle:
        mask = PILImage.open(handle)
        assert mask.size == (image.width, image.height) and 0 < np.count_nonzero(np.asarray(mask)) < SIDE * SIDE / 4
    audit = lead.get(f"/api/projects/{project.pk}/baselines/audit/").json()
    # The masked image still counts for faces found, with the detector's own reading of it.
    assert (audit["gap"]["light"]["k"], audit["gap"]["light"]["n"], audit["n_masked"]) == (6, 6, 0)
    assert current_automatic(project, image)["face_found"] is True
    report = audit["mask_validation"]
    (tone_1,) = [r for r in report["by_tone"] if r["tone"] == 1]
    assert tone_1["n_scored"] == 1 and tone_1["coverage"]["k"] == 1 and tone_1["within"]["n"] == 1
    assert tone_1["mean_error_ci_low"] is None  # one image: no interval, and none is invented
    # The image's baseline is measured on the mask from now on.
    current = svc.baselines_current(project).get(image=image)
    assert current.stats["skin_source"] == "mask"
    # The drawing page serves its editor locally.
    client = Client()
    client.force_login(project.created_by)
    page = client.get(f"/projects/{project.pk}/baselines/mask-sample/items/{item['id']}/").content.decode()
    assert (
        'id="mask-canvas"' in page
        and "/static/labeling/mask_draw.js" in page
        and "http" not in page.split("mask_draw.js")[0].split('<script src="')[-1]
    )


def test_the_data_card_says_the_gap_in_one_sentence(audited):
    from labeling.services.releases.card import _labels_vs_ita
    from labeling.services.releases.card_facts import _labels_vs_ita as facts_labels_vs_ita

    project, _images = audited
    facts = {"labels_vs_ita": facts_labels_vs_ita(project)}
    assert facts["labels_vs_ita"]["coverage_audit"]["warning"] is True
    text = " ".join(str(block) for block in _labels_vs_ita(facts))
    assert "the automatic baseline found a face in 0 of 6, 0.0% (95% CI 0.0–39.0%) of MST 9-10 images" in text
    assert "6 of 6, 100.0% (95% CI 61.0–100.0%) of MST 1-2 images" in text
    assert "beyond chance" in text
