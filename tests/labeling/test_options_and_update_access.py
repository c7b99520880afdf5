"""``OPTIONS`` never 500s, and a labeler's change of a project is refused before its body is read (issue 26).

``OPTIONS /api/projects/{id}/baselines/run/`` raised DRF's "should include a serializer_class" assertion (a
500); a labeler's ``PATCH /api/projects/{id}/`` with a bad body got the field errors (400) before its 403."""

import re

import pytest
from django.urls import get_resolver

pytestmark = pytest.mark.django_db


def api_routes(project_id: int) -> list[str]:
    """Every API route of the router, with the project's id for each id in it."""
    routes = set()
    for pattern in get_resolver("labeling.api.urls").url_patterns:
        for p in getattr(pattern, "url_patterns", [pattern]):
            regex = str(p.pattern)
            if "format" in regex or not regex.startswith("^"):
                continue
            path = re.sub(r"\(\?P<[a-z_]+>[^)]*\)", str(project_id), regex.strip("^$"))
            routes.add("/api/" + path)
    return sorted(routes)


def test_options_on_baselines_run(client_for, lead, project, labelers):
    for user in (lead, labelers[0].user):
        r = client_for(user).options(f"/api/projects/{project.id}/baselines/run/")
        assert r.status_code in (200, 403), r.content[:300]


def test_options_on_every_api_route_is_not_a_server_error(client_for, lead, project, labelers):
    routes = api_routes(project.id)
    assert f"/api/projects/{project.id}/baselines/run/" in routes and len(routes) > 40
    for user in (lead, labelers[0].user):
        client = client_for(user)
        for route in routes:
            r = client.options(route)
            assert r.status_code < 500, (route, r.status_code)


def test_a_labelers_change_of_a_project_is_a_403_whatever_its_body(client_for, project, labelers):
    client = client_for(labelers[0].user)
    for body in ({"name": ""}, {"name": "x" * 10_000}, {"scale": "nope"}, {"name": "fine"}):
        r = client.patch(f"/api/projects/{project.id}/", body, format="json")
        assert r.status_code == 403, (body, r.status_code, r.content[:200])
    project.refresh_from_db()
    assert project.name != "fine"


def test_a_leads_bad_change_still_gets_the_field_errors(client_for, lead, project):
    r = client_for(lead).patch(f"/api/projects/{project.id}/", {"name": ""}, format="json")
    assert r.status_code == 400 and "name" in r.json()
