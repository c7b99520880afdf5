"""The data manager on a project whose images have no labels yet, and filter keys it does not know (issue 26).

Filters and sorts on label statistics raised ``IndexError`` in ``_filter_and_sort_by_stats`` when no image had a
label (a 500); a bulk action with a misspelt filter key (``{"filters": {"subject": "B000"}}``) filtered nothing
and acted on every image."""

import pytest

from labeling.models import ImageExclusion
from labeling.services import data_manager as dm
from tests.labeling.helpers import add_images

pytestmark = pytest.mark.django_db

STATS_QUERIES = [
    {"min_labels": "1"},
    {"max_labels": "0"},
    {"near_consensus": "true"},
    {"near_consensus": "false"},
    {"ordering": "n_labels"},
    {"ordering": "-mean"},
    {"ordering": "range", "search": "img"},
    {"min_labels": "0", "ordering": "-external_id"},
]


@pytest.mark.parametrize("params", STATS_QUERIES)
def test_label_statistics_filters_on_a_project_without_labels(client_for, lead, project, params):
    images = add_images(project, 3)
    r = client_for(lead).get(f"/api/projects/{project.id}/data/", params)
    assert r.status_code == 200, r.content[:300]
    body = r.json()
    expected = 0 if params.get("min_labels") == "1" or "near_consensus" in params else len(images)
    assert body["count"] == expected
    assert sorted(row["id"] for row in body["results"]) == sorted(i.id for i in images)[: body["count"]]


def test_label_statistics_filters_on_a_project_without_images(client_for, lead, project):
    r = client_for(lead).get(f"/api/projects/{project.id}/data/", {"ordering": "-n_labels", "min_labels": "0"})
    assert r.status_code == 200 and r.json()["count"] == 0


def test_a_bulk_action_with_an_unknown_filter_key_is_a_400_naming_it(client_for, lead, project):
    add_images(project, 4)
    api = client_for(lead)
    r = api.post(
        f"/api/projects/{project.id}/data/bulk/",
        {"action": "exclude", "reason": "bad photo", "filters": {"subject": "B000"}},
        format="json",
    )
    assert r.status_code == 400, r.content[:300]
    assert "'subject'" in str(r.json()) and "Unknown filter key" in str(r.json())
    assert not ImageExclusion.objects.exists()  # no image acted on
    # A known key still acts (the search matches no image here: nothing changes, no error).
    r = api.post(
        f"/api/projects/{project.id}/data/bulk/",
        {"action": "exclude", "reason": "bad photo", "filters": {"search": "B000", "page": "1"}},
        format="json",
    )
    assert r.status_code == 200, r.content[:300]
    assert r.json()["n_images"] == 0


def test_a_read_names_the_keys_it_ignored(client_for, lead, project):
    add_images(project, 2)
    body = client_for(lead).get(f"/api/projects/{project.id}/data/", {"subject": "B000", "page": "1"}).json()
    assert body["ignored"] == ["subject"] and body["count"] == 2
    assert "ignored" not in client_for(lead).get(f"/api/projects/{project.id}/data/").json()


def test_filter_keys_are_one_list():
    # The page's own form sends only these keys (views.data.FILTER_NAMES).
    from labeling.views.data import FILTER_NAMES

    assert set(FILTER_NAMES) <= dm.FILTER_KEYS | dm.PAGE_KEYS
