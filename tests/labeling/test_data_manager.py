"""Issue 14 (f): the data manager's table, its filters (page and API the same), sorts, paging and bulk actions."""

import pytest

from labeling.models import Assignment, Phase, PhaseImage, ReviewDecision, Subject
from labeling.services.phases import calibration_configure, phase_close, phase_get, phase_open
from tests.factories import MembershipFactory, UserFactory
from tests.labeling.helpers import add_images, submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(project, labelers):
    images = add_images(project, 12)
    subject = Subject.objects.create(project=project, external_id="S_anna", attributes={"gender": "woman"})
    images[0].subject = subject
    images[0].save()
    calibration_configure(project=project, size=6, calibration_1_size=6, n_repeated=0, seed=1)
    cal1 = phase_open(phase=phase_get(project, Phase.Kind.CALIBRATION_1), labels_per_image=2)
    cal1_ids = list(cal1.phase_images.values_list("image_id", flat=True))
    # Labelled: every assignment of the first four calibration images; tone 3 and 3, or 3 and 7 (far apart).
    far = cal1_ids[0]
    for a in cal1.assignments.filter(image_id__in=cal1_ids[:4]).order_by("image_id", "labeler_id"):
        first = not Assignment.objects.filter(image_id=a.image_id, done_at__isnull=False).exists()
        submit(cal1, a.labeler, a.image_id, tones=[3 if (first or a.image_id != far) else 7])
    return {"images": images, "cal1": cal1, "cal1_ids": cal1_ids, "far": far}


def test_filters_sorts_and_paging_are_the_same_in_page_and_api(project, lead, client, client_for, world, labelers):
    api = client_for(lead)
    url = f"/api/projects/{project.id}/data/"
    body = api.get(url).json()
    assert body["count"] == 12 and body["n_pages"] == 1
    row = next(r for r in body["results"] if r["id"] == world["far"])
    assert row["n_labels"] == 2 and row["range"] == 4 and row["near_consensus"] is False
    assert {a["labeler"] for a in row["labelers"]} and all(a["done"] for a in row["labelers"])
    assert row["phases"] == ["Calibration 1"] and row["review"] == "open"
    # Filters.
    assert api.get(url, {"phase": world["cal1"].id}).json()["count"] == 6
    assert [r["id"] for r in api.get(url, {"near_consensus": "false"}).json()["results"]] == [world["far"]]
    assert api.get(url, {"near_consensus": "true"}).json()["count"] == 3
    assert api.get(url, {"min_labels": 1}).json()["count"] == 4
    assert api.get(url, {"labeler_status": "pending"}).json()["count"] == 2
    assert api.get(url, {"labeler_status": "unassigned"}).json()["count"] == 6
    assert api.get(url, {"search": "s_ann"}).json()["results"][0]["id"] == world["images"][0].id
    assert api.get(url, {"attr": "gender:woman"}).json()["count"] == 1
    assert api.get(url, {"baseline_flag": "missing"}).json()["count"] == 12
    # Sorts and paging.
    by_labels = api.get(url, {"ordering": "-n_labels", "page_size": 5}).json()
    assert [r["n_labels"] for r in by_labels["results"]][:4] == [2, 2, 2, 2] and by_labels["n_pages"] == 3
    assert api.get(url, {"ordering": "-range"}).json()["results"][0]["id"] == world["far"]
    ids = [r["external_id"] for r in api.get(url, {"ordering": "-external_id"}).json()["results"]]
    assert ids == sorted(ids, reverse=True)
    # A label-statistics filter keeps the database's order by the image's own id.
    ids = [r["external_id"] for r in api.get(url, {"min_labels": 1, "ordering": "-external_id"}).json()["results"]]
    assert len(ids) == 4 and ids == sorted(ids, reverse=True)
    ids = [r["external_id"] for r in api.get(url, {"max_labels": 0}).json()["results"]]
    assert len(ids) == 8 and ids == sorted(ids)
    # Bad input: 400 with plain words, never a 500.
    for bad in (
        {"ordering": "password"},
        {"phase": "x"},
        {"labeler_status": "asleep"},
        {"near_consensus": "maybe"},
        {"min_labels": -1},
        {"page_size": 10**6},
        {"attr": "no colon"},
        {"baseline_flag": "purple"},
        {"review": "later"},
    ):
        assert api.get(url, bad).status_code == 400, bad
    # Well formed but naming nothing here (a phase of no project, a page past the last): 404, as the
    # schema says (tests/test_schema_conformance.py).
    for missing in ({"phase": 10**9}, {"labeler": 10**9}, {"page": 99}):
        response = api.get(url, missing)
        assert response.status_code == 404 and response.json()["detail"], missing
    # The page shows the same rows, by their own ids, and refuses bad input in words.
    client.force_login(lead)
    page = client.get(f"/projects/{project.id}/data/", {"near_consensus": "false"}).content.decode()
    far_image = next(i for i in world["images"] if i.id == world["far"])
    assert f'data-external-id="{far_image.external_id}"' in page and "1 image" in page
    page = client.get(f"/projects/{project.id}/data/", {"ordering": "password"}).content.decode()
    assert 'id="dm-error"' in page
    # Reviewers read; labelers do not see it.
    reviewer = MembershipFactory(project=project, user=UserFactory(username="rev"), role="reviewer", pseudonym="R1")
    assert client_for(reviewer.user).get(url).status_code == 200
    assert (
        client_for(reviewer.user).post(url + "bulk/", {"action": "accept", "image_ids": [1]}, format="json").status_code
        == 403
    )
    assert client_for(labelers[0].user).get(url).status_code == 403


def test_bulk_actions(project, lead, client, client_for, world, labelers):
    api = client_for(lead)
    bulk = f"/api/projects/{project.id}/data/bulk/"
    main_ids = set(phase_get(project, Phase.Kind.MAIN).phase_images.values_list("image_id", flat=True))
    some = sorted(main_ids)[:2]
    # Calibration has started: the set cannot change.
    r = api.post(bulk, {"action": "calibration_add", "image_ids": some}, format="json")
    assert r.status_code == 400 and "has started" in r.json()["detail"]
    assert api.post(bulk, {"action": "explode", "image_ids": some}, format="json").status_code == 400
    assert api.post(bulk, {"action": "accept"}, format="json").status_code == 400
    assert api.post(bulk, {"action": "accept", "image_ids": [10**9]}, format="json").status_code == 400
    # Review decisions in bulk, for every image the filters match.
    r = api.post(bulk, {"action": "accept", "filters": {"near_consensus": "true"}, "reason": "fine"}, format="json")
    assert r.status_code == 200 and r.json()["n_changed"] == 3
    assert ReviewDecision.objects.filter(state="accepted").count() == 3
    assert api.get(f"/api/projects/{project.id}/data/", {"review": "accepted"}).json()["count"] == 3
    # Relabel: needs the post-calibration phase open; then goes to who labelled the image, with the reason.
    r = api.post(bulk, {"action": "relabel", "image_ids": [world["far"]], "reason": "look again"}, format="json")
    assert r.status_code == 400
    phase_close(phase=world["cal1"])
    for kind in (Phase.Kind.CALIBRATION_2, Phase.Kind.MAIN):
        phase = phase_get(project, kind)
        phase.status = Phase.Status.CLOSED
        phase.save()
    post = phase_open(phase=phase_get(project, Phase.Kind.POST_CALIBRATION))
    r = api.post(bulk, {"action": "relabel", "image_ids": [world["far"]], "reason": "look again"}, format="json")
    assert r.status_code == 200 and r.json()["n_changed"] == 2
    assert set(post.assignments.filter(image_id=world["far"]).values_list("request_reason", flat=True)) == {
        "look again"
    }


def test_bulk_add_to_calibration_from_the_page(project, lead, client, labelers):
    images = add_images(project, 8)
    calibration_configure(project=project, size=4, calibration_1_size=2, n_repeated=0, seed=3)
    main = phase_get(project, Phase.Kind.MAIN)
    chosen = sorted(main.phase_images.values_list("image_id", flat=True))[:2]
    client.force_login(lead)
    r = client.post(
        f"/projects/{project.id}/data/",
        {"action": "calibration_add", "scope": "selected", "image_ids": chosen, "back": "ordering=external_id"},
        follow=True,
    )
    assert "2 image(s) added to calibration 1." in r.content.decode()
    cal1 = phase_get(project, Phase.Kind.CALIBRATION_1)
    assert set(chosen) <= set(cal1.phase_images.values_list("image_id", flat=True))
    assert not PhaseImage.objects.filter(phase=main, image_id__in=chosen).exists()
    r = client.post(f"/projects/{project.id}/data/", {"action": "calibration_add", "scope": "selected"}, follow=True)
    assert "Choose images" in r.content.decode()
    assert images


def test_label_statistics_patched_after_a_change_equal_a_full_computation(project, world, labelers):
    import numpy as np

    from labeling.models import Label
    from labeling.services.data_manager import _stats_rows, label_stats

    label_stats(project, None)  # cached
    cal1 = world["cal1"]
    # A new label on an image that had none, and a changed answer on another.
    pending = cal1.assignments.filter(done_at__isnull=True).select_related("labeler").first()
    submit(cal1, pending.labeler, pending.image_id, tones=[9])
    changed = Label.objects.filter(phase=cal1).first()
    submit(cal1, changed.labeler, changed.image_id, tones=[1])
    patched = label_stats(project, None)
    full = _stats_rows(Label.objects.filter(phase__project_id=project.id, is_repeat=False))
    for name in full:
        np.testing.assert_array_equal(patched[name], full[name])
    assert label_stats(project, cal1)["n_labels"].sum() == Label.objects.filter(phase=cal1).count()


def test_a_form_encoded_bulk_without_filters_changes_no_image(project, lead, client_for):
    """Issue 23: a form-encoded body with no "filters.<name>" field (or a bare "filters=") read as filters={},
    every image of the project; it now needs image_ids or named filters, as a JSON body does."""
    from labeling.models import ImageExclusion

    images = add_images(project, 2)
    api = client_for(lead)
    url = f"/api/projects/{project.id}/data/bulk/"
    for body in ("action=exclude&reason=x&filters=", "action=exclude&reason=x"):
        r = api.post(url, data=body, content_type="application/x-www-form-urlencoded")
        assert r.status_code == 400 and "image_ids" in r.json(), r.content
    assert not ImageExclusion.objects.filter(image__project=project).exists()
    r = api.post(
        url, data=f"action=exclude&reason=x&image_ids={images[0].id}", content_type="application/x-www-form-urlencoded"
    )
    assert r.status_code == 200 and r.json()["n_changed"] == 1
