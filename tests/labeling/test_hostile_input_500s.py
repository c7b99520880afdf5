"""Issue 13, item 7: the inputs that answered 500 now answer 400 with a clear message.

Deeply nested JSON (anonymously, on the token endpoint), an id beyond 64 bits in a label submit,
``?ordering=`` on a computed field, attribute filters carrying Django lookups, and manifests with an
integer of 4,300+ digits or nesting too deep for the JSON decoder.
"""

import io
import json
import uuid

import pytest
from rest_framework.test import APIClient

from tests.labeling.helpers import add_images, open_calibration_1

pytestmark = pytest.mark.django_db

NESTED = "[" * 100_000 + "]" * 100_000


def quiet(api: APIClient) -> APIClient:
    api.raise_request_exception = False
    return api


def test_deeply_nested_json_is_a_400_even_anonymously(project, labelers, client_for):
    r = quiet(APIClient()).post("/api/auth/token/", NESTED, content_type="application/json")
    assert r.status_code == 400 and "nested too deeply" in r.json()["detail"]
    r = quiet(client_for(project.created_by)).post("/api/projects/", NESTED, content_type="application/json")
    assert r.status_code == 400


def test_an_id_beyond_64_bits_in_a_label_submit_is_a_400(project, labelers, client_for):
    add_images(project, 2)
    phase = open_calibration_1(project, size=2, cal1=2)
    api = quiet(client_for(labelers[0].user))
    for image in (10**20, 2**63, -1, 0):
        r = api.post(
            f"/api/phases/{phase.id}/labels/",
            {"client_id": str(uuid.uuid4()), "image": image, "tones": [3]},
            format="json",
        )
        assert r.status_code == 400 and "image" in r.json(), (image, r.status_code)
    r = api.post(
        f"/api/phases/{phase.id}/labels/",
        {"client_id": str(uuid.uuid4()), "image": phase.assignments.first().image_id, "tones": [10**30]},
        format="json",
    )
    assert r.status_code == 400


def test_ordering_by_a_computed_or_unknown_field_is_a_400(project, lead, client_for):
    api = quiet(client_for(lead))
    for ordering in ("images__count", "-images__count", "memberships__user__password", "nope"):
        r = api.get(f"/api/projects/?ordering={ordering}")
        assert r.status_code == 400 and "Cannot sort by" in str(r.json()["ordering"]), (ordering, r.status_code)
    assert api.get("/api/projects/?ordering=-name").status_code == 200


@pytest.mark.parametrize("attr", ["foo__regex:(", "foo__isnull:maybe", "foo__in:a", "_x:1", "a__b:c", "x__:1"])
def test_attribute_filters_take_no_django_lookups(project, lead, client_for, attr):
    add_images(project, 1)
    r = quiet(client_for(lead)).get(f"/api/projects/{project.id}/images/", {"attr": attr})
    assert r.status_code == 400 and "equality only" in str(r.json()["attr"])


def test_the_images_page_ignores_a_lookup_in_its_filter(project, lead, client):
    add_images(project, 1)
    client.force_login(lead)
    client.raise_request_exception = False
    r = client.get(f"/projects/{project.id}/images/", {"key": "foo__regex", "value": "("})
    assert r.status_code == 200


def test_manifests_with_huge_integers_or_deep_nesting_are_reported_per_row(project, lead, client_for):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.factories import png_bytes

    lines = [
        json.dumps({"file": "a.png", "subject": "S1"}),
        '{"file": "b.png", "age": ' + "9" * 5000 + "}",
        '{"file": "c.png", "deep": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ]
    csv = "file,subject,weight\nd.png,S2," + "7" * 5000 + "\n"
    api = quiet(client_for(lead))
    for name, manifest, images in (
        ("manifest.jsonl", "\n".join(lines), ["a.png", "b.png", "c.png"]),
        ("manifest.csv", csv, ["d.png"]),
    ):
        files = [SimpleUploadedFile(n, png_bytes((i * 40, 90, 70))) for i, n in enumerate(images)]
        r = api.post(
            f"/api/projects/{project.id}/imports/",
            {"files": files, "manifest": SimpleUploadedFile(name, manifest.encode())},
            format="multipart",
        )
        assert r.status_code < 500, (name, r.status_code, r.content[:300])
    assert io  # the manifests are built in memory


def test_a_list_of_objects_in_a_reflection_is_a_400(project, labelers, client_for):
    add_images(project, 2)
    phase = open_calibration_1(project, size=2, cal1=2)
    api = quiet(client_for(labelers[0].user))
    for body in ({"biases_noticed": [{"a": 1}]}, {"biases_noticed": [["lighting"]]}, {"biases_noticed": {"a": 1}}):
        r = api.put(f"/api/phases/{phase.id}/reflection/", body, format="json")
        assert r.status_code == 400, (body, r.status_code, r.content[:200])


@pytest.mark.parametrize("attr", ["foo__regex:(", "foo__isnull:maybe", "a__b:c"])
def test_the_data_manager_filter_takes_no_django_lookups(project, lead, client_for, attr):
    add_images(project, 1)
    r = quiet(client_for(lead)).get(f"/api/projects/{project.id}/data/", {"attr": attr})
    assert r.status_code == 400 and "equality only" in str(r.json()["attr"])


def test_a_gate_named_by_a_number_is_a_400(project, lead, client_for):
    """POST evaluation-gates with ``"name": 5`` answered 500 ('int' has no strip; the deep schema run)."""
    r = client_for(lead).post(f"/api/projects/{project.id}/evaluation-gates/", {"name": 5, "rules": {}}, format="json")
    assert r.status_code == 400 and "name" in r.json(), r.content
