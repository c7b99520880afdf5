"""``?page=`` (and the data table's ``?page_size=``) on every paginated API list: one designed answer each.

Absent or empty: the first page; malformed, 0 or above the bound: 400 naming the parameter; a page past the
last: 404 (``labeling.api.pagination``). The lists come from the OpenAPI document: a new one is covered, and
the document must say the same (bounds, 400 and 404).
"""

import json

import pytest
from drf_spectacular.generators import SchemaGenerator

from labeling.api.pagination import MAX_PAGE
from labeling.services import data_manager as dm
from tests.labeling.helpers import add_images, open_calibration_1, submit

pytestmark = pytest.mark.django_db

MALFORMED = ["abc", "0", "-1", "1.5", "+1", "1_0", "\u0663", "1 2", "last", "0x1", str(MAX_PAGE + 1), "9" * 40]


def paginated_lists() -> dict[str, dict]:
    """``{path: operation}`` of every GET with a ``page`` query parameter."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    found = {}
    for path, item in schema["paths"].items():
        op = item.get("get")
        if op and any(p["in"] == "query" and p["name"] == "page" for p in op.get("parameters", [])):
            found[path] = op
    return found


@pytest.fixture
def api(project, labelers, lead, client_for):
    add_images(project, 3)
    phase = open_calibration_1(project, size=3, cal1=3)
    a = phase.assignments.filter(labeler=labelers[0]).first()
    submit(phase, labelers[0], a.image_id)
    client = client_for(lead)
    client.raise_request_exception = False
    return client


def url_of(path: str, project) -> str:
    return path.replace("{id}", str(project.id)).replace("{project_pk}", str(project.id))


def test_the_document_bounds_page_and_documents_400_and_404():
    lists = paginated_lists()
    assert len(lists) >= 10, sorted(lists)
    for path, op in lists.items():
        page = next(p for p in op["parameters"] if p["name"] == "page")
        assert page["schema"] == {"type": "integer", "minimum": 1, "maximum": MAX_PAGE}, path
        assert "400" in op["responses"] and "404" in op["responses"], path
        assert "empty" in page["description"] and "404" in page["description"], path


def test_every_list_answers_page_the_same_way(api, project):
    for path in paginated_lists():
        url = url_of(path, project)
        first = api.get(url)
        assert first.status_code == 200, (url, first.content[:300])
        for same in ("", " ", "1", " 1 ", "01"):
            r = api.get(url, {"page": same})
            assert r.status_code == 200, (url, same, r.content[:300])
            assert r.json() == first.json(), (url, same)
        for bad in MALFORMED:
            r = api.get(url, {"page": bad})
            assert r.status_code == 400, (url, bad, r.status_code, r.content[:300])
            assert "page" in r.json(), (url, bad, r.json())
        for past in ("2", "99", str(MAX_PAGE)):
            r = api.get(url, {"page": past})
            assert r.status_code == 404, (url, past, r.status_code, r.content[:300])
            assert "page(s)" in r.json()["detail"], (url, past, r.json())


def test_generic_lists_ignore_page_size(api, project):
    """Only the data table reads ``page_size``; elsewhere it is an unknown parameter, as any other."""
    for path in paginated_lists():
        if path.endswith("/data/"):
            continue
        url = url_of(path, project)
        assert api.get(url, {"page_size": "abc"}).status_code == 200, url


def test_the_data_table_reads_page_size_with_the_same_rules(api, project):
    url = f"/api/projects/{project.id}/data/"
    assert api.get(url, {"page_size": ""}).json()["page_size"] == dm.PAGE_SIZE
    assert api.get(url, {"page_size": "1"}).json()["n_pages"] == 3
    for bad in ["abc", "0", "-1", "+1", "1.5", str(dm.MAX_PAGE_SIZE + 1), "9" * 40]:
        r = api.get(url, {"page_size": bad})
        assert r.status_code == 400, (bad, r.content[:300])
        assert "page_size" in r.json(), (bad, r.json())
    r = api.get(url, {"page_size": "1", "page": "3"})
    assert r.status_code == 200 and r.json()["page"] == 3
    r = api.get(url, {"page_size": "1", "page": "4"})
    assert r.status_code == 404 and "3 page(s)" in json.dumps(r.json())
