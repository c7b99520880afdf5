"""Routes that take ids match digits only (issue 26): a non-number id is a 404 from the URL resolver, never a
500 (``/api/projects/abc/releases/`` raised ``ValueError`` in the view's query)."""

import pytest
from django.urls import Resolver404, resolve

NOT_IDS = ["abc", "1a", "-1", "\u0663", "1_0", " 1"]  # \u0663: ARABIC-INDIC DIGIT THREE
ROUTES = [
    "/api/projects/{}/",
    "/api/projects/{}/releases/",
    "/api/projects/{}/releases/1/",
    "/api/projects/{}/evaluations/",
    "/api/projects/{}/evaluation-gates/",
    "/api/projects/{}/audit/",
    "/api/projects/{}/data/",
    "/api/projects/{}/imports/",
    "/api/images/{}/",
    "/api/phases/{}/",
    "/api/labels/{}/",
    "/api/jobs/{}/",
    "/api/imports/{}/",
    "/api/scales/{}/",
]


@pytest.mark.parametrize("route", ROUTES)
def test_a_non_number_id_is_not_a_route(route):
    for bad in NOT_IDS:
        with pytest.raises(Resolver404):
            resolve(route.format(bad))
    resolve(route.format(7))  # digits still route


def test_non_number_ids_answer_404_on_every_method(client_for, lead, project):
    client = client_for(lead)
    for route in ROUTES:
        for method in ("get", "post", "patch", "delete"):
            for bad in ("abc", "1a", "%D9%A3"):
                url = route.format(bad)
                r = getattr(client, method)(url, {}, format="json")
                assert r.status_code == 404, (method, url, r.status_code)
    # A nested id after a good project id too; and a number too big for the column is not a 500.
    assert client.get(f"/api/projects/{project.id}/releases/abc/").status_code == 404
    assert client.get(f"/api/projects/{'9' * 30}/releases/").status_code in (403, 404)
