"""NUL (U+0000) is refused once, at the edge (issue 26): a 400 from ``NulRefusedMiddleware`` for NUL in the
path, a query parameter, a form field or file name, or any string of a JSON body, anonymous too. PostgreSQL
cannot store NUL in text: ``POST /api/auth/token/`` with ``"username": "a\\u0000b"`` answered 500 there."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient


def refused(r, where: str = "") -> bool:
    text = r.content.decode("utf-8", "replace")
    return r.status_code == 400 and "NUL characters" in text and where in text


@pytest.mark.django_db
def test_anonymous_requests_with_nul_are_refused(client):
    r = client.post("/api/auth/token/", {"username": "a\u0000b", "password": "x"}, content_type="application/json")
    assert refused(r, "JSON body"), r.content
    r = client.post("/api/auth/token/", {"username": "a\u0000b", "password": "x"})  # a form
    assert refused(r, "the form field 'username'"), r.content
    r = client.post("/login/", {"username": "a\u0000b", "password": "x"})
    assert refused(r, "username"), r.content
    r = client.get("/login/?next=%2F%00")
    assert refused(r, "the query parameter 'next'"), r.content
    r = client.get("/api/projects/%00/")
    assert refused(r, "the path"), r.content
    # A raw NUL byte in a JSON body, and a NUL deep inside a nested document or in a key.
    r = client.generic("POST", "/api/auth/token/", b'{"username": "a\x00b"}', content_type="application/json")
    assert refused(r), r.content
    deep = {"a": [1, {"b": ["ok", {"c\u0000": 2}]}]}
    r = client.post("/api/auth/token/", deep, content_type="application/json")
    assert refused(r), r.content


def test_signed_in_requests_with_nul_are_refused(client_for, lead, project):
    api = client_for(lead)
    r = api.patch(f"/api/projects/{project.id}/", {"name": "a\u0000b"}, format="json")
    assert refused(r), r.content
    r = api.put(f"/api/projects/{project.id}/", "name=a%00b", content_type="application/x-www-form-urlencoded")
    assert refused(r, "name"), r.content
    r = api.get(f"/api/projects/{project.id}/data/", {"q": "a\u0000b"})
    assert refused(r, "'q'"), r.content
    r = api.get(f"/api/projects/{project.id}/data/?subject_id=S%001")
    assert refused(r, "'subject_id'"), r.content
    r = api.post(
        f"/api/projects/{project.id}/imports/",
        {"manifest": SimpleUploadedFile("m.csv", b"file\na.png\n"), "folder": "/data\u0000/x"},
        format="multipart",
    )
    assert refused(r, "'folder'"), r.content
    project.refresh_from_db()
    assert "\u0000" not in project.name


def test_text_without_nul_goes_through(client_for, lead, project):
    api = client_for(lead)
    # An escaped backslash before "u0000" is not NUL: the text is the six characters \u0000.
    r = api.patch(f"/api/projects/{project.id}/", json.dumps({"name": "a\\u0000b"}), content_type="application/json")
    assert r.status_code == 200, r.content
    project.refresh_from_db()
    assert project.name == "a\\u0000b"
    assert api.get(f"/api/projects/{project.id}/data/", {"q": "ab"}).status_code == 200
    assert APIClient().post("/api/auth/token/", {"username": "nobody", "password": "x"}).status_code == 400
