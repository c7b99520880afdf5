"""Issue 23's minor items that the server decides (the pages' side is in tests/e2e/test_day_two_browser.py):
labels per image above the active labelers refused, bulk actions on more than a page confirmed by their number,
semicolon-separated label imports, case-insensitive attribute filters, open phases named by the releases'
readiness, the phase order named by its earliest unfinished phase, no label import on post-calibration, the
evaluation pages' words."""

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile

from labeling.models import ImageExclusion, Label, Membership, Phase, Subject
from labeling.services import data_manager as dm
from labeling.services.label_imports import labels_import
from labeling.services.phases import calibration_configure, phase_close, phase_get, phase_open
from labeling.services.phases import phase_set_labels_per_image as set_labels_per_image
from labeling.services.releases import release_readiness_cached
from tests.labeling.helpers import add_images, open_calibration_1
from tests.labeling.test_evaluations import eager, media, synthetic  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db


# --------------------------------------------------------------------------- labels per image


def test_labels_per_image_above_the_active_labelers_is_refused(project, labelers, lead, client_for, client):
    add_images(project, 6)
    Membership.objects.filter(pk=labelers[3].pk).update(is_active=False)  # 3 active labelers
    calibration_configure(project=project, size=6, calibration_1_size=6, n_repeated=0, seed=1)
    cal1 = phase_get(project, Phase.Kind.CALIBRATION_1)
    with pytest.raises(ValidationError) as refused:
        phase_open(phase=cal1, labels_per_image=4)
    assert "Labels per image is 4 but only 3 active labelers take part in Calibration 1" in str(refused.value)
    assert "at most 3 labels" in str(refused.value)
    cal1.refresh_from_db()
    assert cal1.status == Phase.Status.DRAFT and not cal1.assignments.exists()
    # A phase's own number (the project's default, 4 unless said otherwise) is refused the same way.
    Phase.objects.filter(pk=cal1.pk).update(labels_per_image=4)
    with pytest.raises(ValidationError, match="Labels per image is 4"):
        phase_open(phase=cal1)
    # Through the API: a 400 naming the numbers. Through the page: the message, the phase left closed.
    r = client_for(lead).post(f"/api/phases/{cal1.id}/open/", {"labels_per_image": 5}, format="json")
    assert r.status_code == 400 and "only 3 active labelers" in r.content.decode()
    client.force_login(lead)
    page = client.get(f"/phases/{cal1.id}/").content.decode()
    assert 'id="labels-per-image-warning"' in page and 'max="3"' in page
    answer = client.post(f"/phases/{cal1.id}/", {"action": "open", "labels_per_image": "4"}, follow=True)
    assert "only 3 active labelers take part" in answer.content.decode()
    # Three is accepted; raising it above the phase's active labelers later is refused too.
    phase_open(phase=cal1, labels_per_image=3)
    with pytest.raises(ValidationError, match="Labels per image is 4 but only 3 active labelers"):
        set_labels_per_image(phase=cal1, labels_per_image=4)
    assert Phase.objects.get(pk=cal1.pk).labels_per_image == 3


def test_every_labeler_phases_and_post_calibration_are_not_refused(project, labelers):
    add_images(project, 4)
    calibration_configure(project=project, size=4, calibration_1_size=4, n_repeated=0, seed=1, every_labeler=True)
    cal1 = phase_open(phase=phase_get(project, Phase.Kind.CALIBRATION_1), labels_per_image=9)
    assert cal1.labels_per_image == 4  # every labeler: the team's size


# --------------------------------------------------------------------------- bulk actions


@pytest.fixture
def many(project, labelers):
    images = add_images(project, dm.BULK_CONFIRM_ABOVE + 11)
    for i, image in enumerate(images):
        image.external_id = f"face_{i:03d}"
        image.save()
    return images


def test_a_bulk_action_on_more_than_a_page_needs_its_number(project, lead, many, client_for, client):
    n = len(many)
    api = client_for(lead)
    url = f"/api/projects/{project.id}/data/bulk/"
    body = {"action": "exclude", "filters": {"search": "face_"}, "reason": "blurred"}
    r = api.post(url, body, format="json")
    assert r.status_code == 400
    assert f"would change {n:,} images, more than a page ({dm.BULK_CONFIRM_ABOVE})" in r.json()["confirm"][0]
    assert not ImageExclusion.objects.exists()
    assert api.post(url, {**body, "confirm": n - 1}, format="json").status_code == 400
    r = api.post(url, {**body, "confirm": n}, format="json")
    assert r.status_code == 200 and r.json()["n_changed"] == n
    # A page or less needs no confirmation.
    r = api.post(url, {"action": "include", "image_ids": [i.id for i in many[: dm.BULK_CONFIRM_ABOVE]]}, format="json")
    assert r.status_code == 200 and r.json()["n_changed"] == dm.BULK_CONFIRM_ABOVE
    # The page's form: refused with the number without "confirm"; done with it.
    client.force_login(lead)
    form = {"action": "include", "scope": "all", "back": "search=face_", "reason": ""}
    answer = client.post(f"/projects/{project.id}/data/", form, follow=True).content.decode()
    assert f"would change {n:,} images" in answer
    assert ImageExclusion.objects.filter(included_at__isnull=True).count() == n - dm.BULK_CONFIRM_ABOVE
    answer = client.post(f"/projects/{project.id}/data/", {**form, "confirm": str(n)}, follow=True).content.decode()
    assert "included again" in answer
    assert not ImageExclusion.objects.filter(included_at__isnull=True).exists()
    page = client.get(f"/projects/{project.id}/data/?search=face_").content.decode()
    assert f'data-confirm-above="{dm.BULK_CONFIRM_ABOVE}"' in page and f'data-count-all="{n}"' in page


# --------------------------------------------------------------------------- label imports


def test_labels_made_elsewhere_may_come_semicolon_separated(project, labelers, lead, client_for):
    images = add_images(project, 2)
    phase = open_calibration_1(project, size=2, cal1=2)
    a, b = (i.external_id for i in images)
    data = f"image_id;labeler;tones;uncertain;skip_reason;time_spent_s\r\n{a};L1;3+4;yes;;4,5\r\n{b};L2;7;;;12\r\n"
    r = client_for(lead).post(
        f"/api/phases/{phase.id}/labels-import/",
        {"file": SimpleUploadedFile("excel.csv", data.encode("utf-8-sig"))},
        format="multipart",
    )
    assert r.status_code == 200 and r.json()["imported"] == 2, r.content
    first = Label.objects.get(image=images[0], labeler=labelers[0])
    assert (first.tone_low, first.tone_high, first.uncertain, first.time_spent_ms) == (3, 4, True, 4500)
    # Tabs too; a header without any separator it knows is read as comma-separated and says what is missing.
    tabbed = f"image_id\tlabeler\ttones\n{b}\tL3\t6\n".encode()
    assert labels_import(phase=phase, data=tabbed, user=lead)["imported"] == 1
    with pytest.raises(ValidationError, match="Missing column"):
        labels_import(phase=phase, data=b"image_id|labeler|tones\nx|L1|4\n", user=lead)


# --------------------------------------------------------------------------- attribute filters


def test_attribute_filters_ignore_the_case_of_the_text(project, lead, client_for):
    images = add_images(project, 3)
    for image, (gender, age) in zip(images, (("Woman", 31), ("woman", 40), ("man", 31)), strict=True):
        image.subject = Subject.objects.create(
            project=project, external_id=f"S{image.pk}", attributes={"gender": gender}
        )
        image.attributes = {"age": age}
        image.save()
    api = client_for(lead)
    data = api.get(f"/api/projects/{project.id}/data/?attr=gender:WOMAN").json()
    assert {r["id"] for r in data["results"]} == {images[0].id, images[1].id}
    listed = api.get(f"/api/projects/{project.id}/images/?attr=gender:wOmAn").json()
    assert {r["id"] for r in listed["results"]} == {images[0].id, images[1].id}
    # Numbers still match as numbers, text still whole (no substring match).
    data = api.get(f"/api/projects/{project.id}/data/?attr=age:31").json()
    assert {r["id"] for r in data["results"]} == {images[0].id, images[2].id}
    assert api.get(f"/api/projects/{project.id}/data/?attr=gender:wom").json()["count"] == 0


# --------------------------------------------------------------------------- readiness, phase order, label import box


def test_the_readiness_names_the_phases_still_open(project, labelers, lead, client, client_for):
    add_images(project, 4)
    cal1 = open_calibration_1(project, size=4, cal1=4, labels_per_image=2)
    readiness = release_readiness_cached(project, {})
    [row] = readiness["open_phases"]
    assert row["kind"] == "calibration_1" and row["unfinished"] == 8
    assert row["message"].startswith("Calibration 1 is still open (8 assignments are unfinished)")
    api = client_for(lead).get(f"/api/projects/{project.id}/releases/readiness/").json()
    assert api["open_phases"] == readiness["open_phases"]
    client.force_login(lead)
    page = client.get(f"/projects/{project.id}/releases/").content.decode()
    assert 'id="open-phase-calibration_1"' in page and "Close it first for a final release" in page
    phase_close(phase=cal1)
    assert release_readiness_cached(project, {})["open_phases"] == []
    assert "open-phase-" not in client.get(f"/projects/{project.id}/releases/").content.decode()


def test_opening_out_of_order_names_the_earliest_phase_not_closed(project, labelers, lead, client):
    add_images(project, 6)
    calibration_configure(project=project, size=2, calibration_1_size=2, n_repeated=0, seed=1)
    main = phase_get(project, Phase.Kind.MAIN)
    with pytest.raises(ValidationError) as refused:
        phase_open(phase=main, labels_per_image=2)
    assert "Calibration 1 has not been opened yet" in str(refused.value)
    assert "Calibration 2" not in str(refused.value)
    client.force_login(lead)
    page = client.get(f"/phases/{main.id}/").content.decode()
    assert 'id="order-refusal"' in page and "Calibration 1 has not been opened yet" in page
    cal1 = phase_open(phase=phase_get(project, Phase.Kind.CALIBRATION_1), labels_per_image=2)
    with pytest.raises(ValidationError, match="Close Calibration 1 first"):
        phase_open(phase=main, labels_per_image=2)
    phase_close(phase=cal1)
    with pytest.raises(ValidationError, match="Calibration 2 has not been opened yet"):
        phase_open(phase=main, labels_per_image=2)
    assert "order-refusal" not in client.get(f"/phases/{cal1.id}/").content.decode()


def test_post_calibration_offers_no_label_import(project, labelers, lead, client):
    add_images(project, 2)
    post = phase_get(project, Phase.Kind.POST_CALIBRATION)
    cal1 = phase_get(project, Phase.Kind.CALIBRATION_1)
    Phase.objects.filter(project=project).update(status=Phase.Status.CLOSED)
    Phase.objects.filter(pk=post.pk).update(status=Phase.Status.OPEN)
    client.force_login(lead)
    assert 'id="labels-import"' not in client.get(f"/phases/{post.id}/").content.decode()
    assert 'id="labels-import"' in client.get(f"/phases/{cal1.id}/").content.decode()


def test_the_gate_form_speaks_of_images_not_customers(project, lead, client):
    client.force_login(lead)
    page = client.get(f"/projects/{project.id}/evaluations/").content.decode()
    assert "customer" not in page.lower()
    assert "images in seed 000's underperforming clusters" in page


# --------------------------------------------------------------------------- the evaluation report's words


def test_the_evaluation_page_reads_one_verdict_and_names_the_correction_once(
    synthetic,  # noqa: F811 - the fixture imported above
    lead,
    client_for,
    client,
    django_capture_on_commit_callbacks,
):
    import json
    import re
    from html import unescape

    from tests.labeling.test_evaluations import post, results_for

    project, table = synthetic["project"], synthetic["images"]
    api = client_for(lead)
    created = post(api, project, results_for(table), capture=django_capture_on_commit_callbacks)
    run = api.get(f"/api/projects/{project.pk}/evaluations/{created.json()['id']}/").json()
    assert run["status"] == "done", run
    report = json.loads(b"".join(api.get(run["report_url"]).streaming_content))
    client.force_login(lead)
    page = unescape(client.get(f"/projects/{project.pk}/evaluations/{run['id']}/").content.decode())
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))
    # One level per attribute, read from report.json's verdict, everywhere the page and the summary say one.
    for key, title in (("gender", "Gender"), ("skin_tone", "Skin tone")):
        level = report[key]["verdict"]["level"]
        row = re.search(rf"<tr><td>{title}.*?</tr>", page, re.S).group(0)
        assert f'class="verdict-{level}">{level}<' in row, (key, level)
        # The summary's sentence carries the verdict's own reading of that level (severity.level_reading).
        sentence = next(line for line in report["summary"] if line.startswith(f"{title} disparity is"))
        assert report[key]["verdict"]["reading"] in sentence and sentence in text
    # Three genders: the correction is named once, never "over 3 pairs over 3 pairs"; no "customers".
    assert report["gender"]["seed_000"]["n_pairs"] == 3
    assert "pairs over" not in text and "customer" not in text.lower()
