"""Hostile and malformed input on every API endpoint: a clear 4xx, never a 500.

The endpoints come from the OpenAPI schema itself, so a new endpoint is covered
without editing this file.
"""

import json
import re

import pytest
from drf_spectacular.generators import SchemaGenerator

from tests.labeling.helpers import add_images, open_calibration_1, submit

pytestmark = pytest.mark.django_db

HOSTILE_BODIES = [
    None,
    [],
    "a string",
    12,
    {"name": None, "tones": "5", "image": "1; DROP TABLE labeling_label"},
    {"name": "x" * 100_000, "labels_per_image": 10**30, "size": -1, "seed": 2**80},
    {"tones": [[1, 2]], "client_id": {"$ne": None}, "labeler_ids": "all", "image_ids": [None]},
    {"reason": "\x00\ud800", "username": "../../etc/passwd", "password": "\u202e" * 10},
    {"skip_reasons": [{"nested": {"deeper": [1] * 100}}], "tone_order": list(range(10_000))},
    {"labels_per_image": True, "n_repeated": "NaN", "calibration_1_size": 1.5, "time_spent_ms": "Infinity"},
]


def endpoints():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    for path, item in schema["paths"].items():
        for method in item:
            if method in {"get", "post", "patch", "put", "delete"}:
                yield path, method


def fill(path: str, ids: dict) -> str:
    def sub(match):
        # /api/<collection>/{id}/...: an id of a real object of that collection.
        return str(ids.get(path.split("/")[2], ids["default"]))

    return re.sub(r"\{(\w+)\}", sub, path)


@pytest.fixture
def world(project, labelers, lead):
    add_images(project, 3)
    phase = open_calibration_1(project, size=3, cal1=3)
    a = phase.assignments.filter(labeler=labelers[0]).first()
    label = submit(phase, labelers[0], a.image_id).label
    return {
        "projects": project.id,
        "phases": phase.id,
        "images": a.image_id,
        "labels": label.id,
        "imports": 999999,
        "jobs": 999999,
        "scales": project.scale_id,
        "default": project.id,
    }


@pytest.mark.parametrize("who", ["lead", "labeler", "stranger"])
def test_no_endpoint_answers_500_to_hostile_input(world, lead, labelers, who, client_for):
    from tests.factories import UserFactory

    user = {"lead": lead, "labeler": labelers[0].user, "stranger": UserFactory(username="stranger")}[who]
    api = client_for(user)
    api.raise_request_exception = False
    checked, n_endpoints = 0, 0
    for path, method in endpoints():
        n_endpoints += 1
        url = fill(path, world)
        if url.startswith("/api/auth/token/"):
            continue
        # Leads reach the most code: every body. Others are mostly refused early: a few bodies.
        bodies = (
            (HOSTILE_BODIES if who == "lead" else HOSTILE_BODIES[::3]) if method in {"post", "patch", "put"} else [None]
        )
        for body in bodies:
            if method == "get":
                r = api.get(url, {"attr": "x:" + "y" * 500, "phase": "abc", "page": "-1", "subject": "\x00"})
            else:
                # json.dumps escapes lone surrogates as \ud800, as a hostile client would send them.
                r = getattr(api, method)(url, json.dumps(body), content_type="application/json")
            assert r.status_code < 500, (method, url, body, r.status_code, r.content[:300])
            checked += 1
    assert n_endpoints > 30 and checked >= n_endpoints  # the schema was read and every endpoint tried


def test_hostile_query_strings_on_pages(client, lead, world):
    client.force_login(lead)
    client.raise_request_exception = False
    pid = world["projects"]
    for url in [
        f"/projects/{pid}/images/?page=abc&key=__class__&value=x",
        f"/projects/{pid}/images/?key=a%00b&value=%ff",
        f"/projects/{pid}/imports/999999/?outcome=<script>",
        f"/images/{world['images']}/file/../../etc/passwd/",
        f"/images/{world['images']}/file/sha256/",
    ]:
        r = client.get(url)
        assert r.status_code < 500, url
