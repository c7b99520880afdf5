"""Issue 14: a lead excludes images from the dataset in the data manager, with a reason, and includes them
again; the "excluded" filter and column; page and API alike. (Releases: test_release_exclusions.py.)"""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from labeling.forms.data_manager import bulk_filters, data_request
from labeling.models import Image, ImageExclusion, Label
from labeling.services import data_manager as dm
from labeling.services.project_lifecycle import project_archive
from tests.factories import MembershipFactory, ProjectFactory, UserFactory
from tests.labeling.helpers import add_images, open_calibration_1, submit

pytestmark = pytest.mark.django_db


def page_of(project, params: dict) -> dict:
    """A table page as the page and the API ask for it (the request checked, then the service)."""
    asked = data_request(project, params)
    return dm.data_page(project, asked.filters, page=asked.page, page_size=asked.page_size, ignored=asked.ignored)


@pytest.fixture
def images(project):
    return add_images(project, 6)


def ids_of(page):
    return [row["id"] for row in page["results"]]


def test_exclude_with_a_reason_then_include_again_keeps_every_row(project, lead, images):
    chosen = [images[0].id, images[1].id]
    result = dm.data_bulk(project=project, action="exclude", user=lead, image_ids=chosen, reason="  blurry photo ")
    assert result["n_changed"] == 2 and "2 image(s) excluded" in result["message"]
    rows = {row["id"]: row for row in page_of(project, {})["results"]}
    assert rows[images[0].id]["excluded"]["reason"] == "blurry photo"
    assert rows[images[0].id]["excluded"]["by"] == lead.username and rows[images[0].id]["excluded"]["at"]
    assert rows[images[2].id]["excluded"] is None
    # The filter, both ways.
    assert sorted(ids_of(page_of(project, {"excluded": "true"}))) == sorted(chosen)
    assert page_of(project, {"excluded": "false"})["count"] == 4
    assert page_of(project, {"excluded": "True "})["chosen"]["excluded"] == "true"
    with pytest.raises(ValidationError) as bad:
        page_of(project, {"excluded": "maybe"})
    assert bad.value.message_dict == {"excluded": ["true or false."]}
    # Excluding again keeps the first reason (one open exclusion per image).
    again = dm.data_bulk(project=project, action="exclude", user=lead, image_ids=chosen[:1], reason="other")
    assert again["n_changed"] == 0 and "already excluded" in again["message"]
    assert ImageExclusion.objects.get(image=images[0]).reason == "blurry photo"
    # Include again: the exclusion is closed with who and when, never deleted; the image is back.
    back = dm.data_bulk(
        project=project, action="include", user=lead, image_ids=[images[0].id, images[3].id], reason="sharp enough"
    )
    assert back["n_changed"] == 1 and "1 were not excluded" in back["message"]
    closed = ImageExclusion.objects.get(image=images[0])
    assert closed.included_at is not None and closed.included_by == lead and closed.included_note == "sharp enough"
    assert ids_of(page_of(project, {"excluded": "true"})) == [images[1].id]
    # A second exclusion is a new row: the image's history stays readable.
    dm.data_bulk(project=project, action="exclude", user=lead, image_ids=[images[0].id], reason="duplicate of P_2")
    history = list(ImageExclusion.objects.filter(image=images[0]).order_by("id").values_list("reason", "included_at"))
    assert [r for r, _ in history] == ["blurry photo", "duplicate of P_2"] and history[1][1] is None
    assert Image.objects.filter(project=project).count() == 6


def test_excluding_needs_a_reason_in_plain_words(project, lead, images):
    for reason in ("", "   ", "\n"):
        with pytest.raises(ValidationError) as missing:
            dm.data_bulk(project=project, action="exclude", user=lead, image_ids=[images[0].id], reason=reason)
        assert "Say why these images are excluded" in missing.value.message_dict["reason"][0]
    with pytest.raises(ValidationError, match="At most 2,000"):
        dm.data_bulk(project=project, action="exclude", user=lead, image_ids=[images[0].id], reason="x" * 2001)
    assert not ImageExclusion.objects.exists()
    # The database refuses an empty reason and a second open exclusion of one image too.
    with pytest.raises(IntegrityError), transaction.atomic():
        ImageExclusion.objects.create(image=images[0], reason="")
    ImageExclusion.objects.create(image=images[0], reason="r")
    with pytest.raises(IntegrityError), transaction.atomic():
        ImageExclusion.objects.create(image=images[0], reason="again")


def test_exclude_every_image_the_filters_match_and_not_another_projects(project, lead, images):
    result = dm.data_bulk(
        project=project,
        action="exclude",
        user=lead,
        filters=bulk_filters(project, {"search": ""}),
        reason="pilot batch",
    )
    assert result["n_changed"] == 6
    other = ProjectFactory(created_by=lead)
    foreign = add_images(other, 1)[0]
    with pytest.raises(ValidationError, match="not in this project"):
        dm.data_bulk(project=project, action="exclude", user=lead, image_ids=[foreign.id], reason="x")
    with pytest.raises(ValidationError, match="not in this project"):
        dm.images_exclude(project=project, images=[foreign], reason="x", user=lead)
    assert dm.images_include(project=project, images=[foreign], user=lead) == 0
    assert not ImageExclusion.objects.filter(image=foreign).exists()


def test_an_archived_project_refuses_exclusions(project, lead, images):
    project_archive(project=project, user=lead)
    for action, reason in (("exclude", "blurry"), ("include", "")):
        with pytest.raises(ValidationError, match="archived"):
            dm.data_bulk(project=project, action=action, user=lead, image_ids=[images[0].id], reason=reason)
    assert not ImageExclusion.objects.exists()


def test_labelers_are_still_served_an_excluded_image(project, lead, labelers):
    """The documented choice (services.data_manager): an exclusion changes releases, not the labeling."""
    from labeling.selectors import assignment_next

    add_images(project, 6)
    phase = open_calibration_1(project, labels_per_image=2)
    first = assignment_next(phase=phase, labeler=labelers[0])
    dm.data_bulk(project=project, action="exclude", user=lead, image_ids=[first.image_id], reason="blurry")
    assert assignment_next(phase=phase, labeler=labelers[0]).image_id == first.image_id
    revision = submit(phase, labelers[0], first.image_id, tones=[4])
    assert revision.label.image_id == first.image_id


def test_api_exclude_include_and_filter(project, lead, client_for, images, labelers):
    api = client_for(lead)
    url = f"/api/projects/{project.id}/data/"
    bulk = url + "bulk/"
    r = api.post(bulk, {"action": "exclude", "image_ids": [images[0].id]}, format="json")
    assert r.status_code == 400
    assert "Say why these images are excluded" in str(r.json())
    assert "reason:" not in str(r.json().get("detail", ""))  # plain words, no field name in the sentence
    r = api.post(bulk, {"action": "exclude", "image_ids": [images[0].id], "reason": "not a face"}, format="json")
    assert r.status_code == 200 and r.json()["n_changed"] == 1
    body = api.get(url, {"excluded": "true"}).json()
    assert body["count"] == 1 and body["results"][0]["excluded"]["reason"] == "not a face"
    assert api.get(url, {"excluded": "false"}).json()["count"] == 5
    assert api.get(url, {"excluded": "perhaps"}).status_code == 400
    r = api.post(bulk, {"action": "include", "filters": {"excluded": "true"}}, format="json")
    assert r.status_code == 200 and r.json()["n_changed"] == 1
    assert api.get(url, {"excluded": "true"}).json()["count"] == 0
    # Reviewers read the column but cannot exclude; labelers see nothing.
    reviewer = MembershipFactory(project=project, user=UserFactory(username="rev"), role="reviewer", pseudonym="R1")
    assert client_for(reviewer.user).get(url, {"excluded": "false"}).status_code == 200
    r = client_for(reviewer.user).post(bulk, {"action": "exclude", "image_ids": [images[1].id], "reason": "x"})
    assert r.status_code == 403
    assert client_for(labelers[0].user).post(bulk, {"action": "exclude", "reason": "x"}).status_code == 403
    assert ImageExclusion.objects.filter(included_at__isnull=True).count() == 0
    schema = api.get("/api/schema/").content.decode()
    assert "excluded" in schema


def test_page_excludes_with_a_reason_shows_the_badge_and_filters(project, lead, client, images):
    client.force_login(lead)
    url = f"/projects/{project.id}/data/"
    page = client.get(url).content.decode()
    assert 'value="exclude"' in page and 'value="include"' in page and 'name="excluded"' in page
    # No reason: refused in plain words, nothing excluded.
    r = client.post(url, {"action": "exclude", "image_ids": [images[0].id], "reason": " "}, follow=True)
    assert "Say why these images are excluded" in r.content.decode()
    assert not ImageExclusion.objects.exists()
    r = client.post(
        url, {"action": "exclude", "image_ids": [images[0].id], "reason": "<b>consent withdrawn</b>"}, follow=True
    )
    text = r.content.decode()
    assert "1 image(s) excluded from the dataset." in text
    assert 'class="badge excluded"' in text and "&lt;b&gt;consent withdrawn&lt;/b&gt;" in text
    assert "<b>consent withdrawn</b>" not in text
    filtered = client.get(url, {"excluded": "true"}).content.decode()
    assert f'data-external-id="{images[0].external_id}"' in filtered
    assert f'data-external-id="{images[1].external_id}"' not in filtered and "1 image" in filtered
    assert f'data-external-id="{images[0].external_id}"' not in client.get(url, {"excluded": "false"}).content.decode()
    # The labels of an excluded image are untouched (nothing is deleted).
    assert Label.objects.count() == 0 and Image.objects.filter(project=project).count() == 6
