"""The REST API as its users meet it: tokens, roles, validation, no 500s."""

import io
import re
import uuid
import zipfile

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from labeling.models import Label, Phase
from tests.factories import MembershipFactory, ProjectFactory, UserFactory, png_bytes
from tests.labeling.helpers import add_images, open_calibration_1, submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def lead_api(lead, client_for):
    return client_for(lead)


def test_token_login_and_anonymous_refused(client, lead):
    api = APIClient()
    assert api.get("/api/projects/").status_code == 401
    r = api.post("/api/auth/token/", {"username": "lead", "password": "pw-test-123"}, format="json")
    assert r.status_code == 200 and r.json()["token"]
    assert api.post("/api/auth/token/", {"username": "lead", "password": "wrong"}, format="json").status_code == 400


def test_lead_creates_project_with_each_builtin_scale_and_a_custom_one(lead_api):
    scales = lead_api.get("/api/scales/").json()
    kinds = {s["kind"]: s for s in scales}
    assert set(kinds) >= {"monk", "fitzpatrick", "five_tone"}
    assert [t["hex_colour"] for t in kinds["monk"]["tones"]][:2] == ["#f6ede4", "#f3e7db"]
    assert len(kinds["fitzpatrick"]["tones"]) == 6 and len(kinds["five_tone"]["tones"]) == 5
    for kind in ("monk", "fitzpatrick", "five_tone"):
        r = lead_api.post("/api/projects/", {"name": f"P {kind}", "scale": kinds[kind]["id"]}, format="json")
        assert r.status_code == 201, r.content
        assert r.json()["my_role"] == "lead"
    r = lead_api.post(
        "/api/scales/",
        {
            "name": "Mine",
            "tones": [{"name": "pale", "hex_colour": "#eeeeee"}, {"name": "dark", "hex_colour": "#222222"}],
        },
        format="json",
    )
    assert r.status_code == 201
    r = lead_api.post(
        "/api/projects/",
        {
            "name": "Custom",
            "scale": r.json()["id"],
            "labels_per_image": 3,
            "allow_adjacent_pairs": False,
            "offer_uncertain": False,
            "skip_reasons": ["no skin visible"],
            "instructions": "<p>Look at the <b>neck</b></p><script>alert(1)</script><img src=x onerror=alert(1)>",
        },
        format="json",
    )
    assert r.status_code == 201
    body = r.json()
    assert "<script>" not in body["instructions"] and "onerror" not in body["instructions"]
    assert "<b>neck</b>" in body["instructions"]
    assert body["tone_order"] == [1, 2]


@pytest.mark.parametrize(
    "payload",
    [
        {"name": ""},
        {"name": "x", "labels_per_image": 0},
        {"name": "x", "labels_per_image": "many"},
        {"name": "x", "scale": 99999},
        {"name": "x", "skip_reasons": "no skin"},
        {"name": "x", "tone_order": [1, 1, 2]},
        {"name": "x" * 500},
    ],
)
def test_bad_project_payloads_get_400(lead_api, payload):
    r = lead_api.post("/api/projects/", payload, format="json")
    assert r.status_code == 400, r.content


@pytest.mark.parametrize("body", [b"{not json", b"[]", b"null"])
def test_malformed_json_never_500(lead_api, body):
    r = lead_api.post("/api/projects/", body, content_type="application/json")
    assert r.status_code == 400


def test_custom_scale_validation(lead_api):
    r = lead_api.post("/api/scales/", {"name": "bad", "tones": [{"name": "a", "hex_colour": "red"}]}, format="json")
    assert r.status_code == 400
    body = r.json()
    assert "tones" in body


def test_other_users_custom_scale_cannot_be_used(lead_api, client_for):
    stranger = client_for(UserFactory(username="stranger"))
    r = stranger.post(
        "/api/scales/",
        {"name": "S", "tones": [{"name": "a", "hex_colour": "#eeeeee"}, {"name": "b", "hex_colour": "#111111"}]},
        format="json",
    )
    r = lead_api.post("/api/projects/", {"name": "x", "scale": r.json()["id"]}, format="json")
    assert r.status_code == 400


def test_members_are_added_with_pseudonyms_and_profiles(lead_api, project):
    r = lead_api.post(
        f"/api/projects/{project.id}/members/",
        {
            "username": "newbie",
            "password": "long-enough-pw",
            "expertise": "photographer",
            "region_of_upbringing": "East Africa",
            "gender": "woman",
        },
        format="json",
    )
    assert r.status_code == 201, r.content
    assert r.json()["pseudonym"] == "L01" and r.json()["role"] == "labeler"
    r = lead_api.post(f"/api/projects/{project.id}/members/", {"username": "newbie"}, format="json")
    assert r.status_code == 400 and "already a member" in str(r.json())
    r = lead_api.post(f"/api/projects/{project.id}/members/", {"username": "ghost"}, format="json")
    assert r.status_code == 400 and "No account is called “ghost”" in r.json()["username"][0]
    r = lead_api.post(
        f"/api/projects/{project.id}/members/", {"username": "x y", "password": "12345678"}, format="json"
    )
    assert r.status_code == 400


def test_labeler_never_reaches_another_project_or_lead_data(project, labelers, client_for):
    other = ProjectFactory(created_by=UserFactory(username="otherlead"))
    add_images(other, 2)
    add_images(project, 3)
    cal1 = open_calibration_1(project, size=3, cal1=3)
    api = client_for(labelers[0].user)
    assert [p["id"] for p in api.get("/api/projects/").json()["results"]] == [project.id]
    assert api.get(f"/api/projects/{other.id}/").status_code == 404
    other_image = other.images.first()
    assert api.get(f"/api/images/{other_image.id}/").status_code == 404
    # Lead-only endpoints of their own project.
    for url in [
        f"/api/projects/{project.id}/members/",
        f"/api/projects/{project.id}/images/",
        f"/api/projects/{project.id}/imports/",
        f"/api/phases/{cal1.id}/reflections/",
        f"/api/phases/{cal1.id}/review/",
    ]:
        assert api.get(url).status_code == 403, url
    assert api.post(f"/api/phases/{cal1.id}/close/").status_code == 403
    # Another labeler's label.
    from tests.labeling.helpers import submit

    a = cal1.assignments.filter(labeler=labelers[1]).first()
    label = submit(cal1, labelers[1], a.image_id).label
    assert api.get(f"/api/labels/{label.id}/").status_code == 403
    # Files: the display image of an assigned image only; never the original.
    mine = cal1.assignments.filter(labeler=labelers[0]).first().image_id
    assert api.get(f"/images/{mine}/file/display/").status_code == 200
    assert api.get(f"/images/{mine}/file/original/").status_code == 404
    assert api.get(f"/images/{other_image.id}/file/display/").status_code == 404


def test_labeling_flow_through_the_api(project, labelers, client_for):
    add_images(project, 3)
    cal1 = open_calibration_1(project, size=3, cal1=3)
    api = client_for(labelers[0].user)
    nxt = api.get(f"/api/phases/{cal1.id}/next/").json()
    assert nxt["total"] == 3 and nxt["done"] == 0 and nxt["preload"] is not None
    # Blind: nothing else (the box is the person to label in a photo of several; none for a whole photo).
    assert set(nxt["current"]["image"]) == {"id", "width", "height", "display_url", "box"}
    assert nxt["current"]["image"]["box"] is None
    image_id = nxt["current"]["image"]["id"]
    payload = {
        "client_id": str(uuid.uuid4()),
        "image": image_id,
        "tones": [3, 4],
        "uncertain": True,
        "time_spent_ms": 3100,
        "tone_order": list(range(1, 11)),
        "client_info": {"devicePixelRatio": 1.5, "colorGamut": "srgb"},
    }
    r = api.post(f"/api/phases/{cal1.id}/labels/", payload, format="json")
    assert r.status_code == 201, r.content
    assert r.json()["label"]["value"] == 3.5 and r.json()["next"]["image"]["id"] != image_id
    # A retried submit (same client id) stores nothing new.
    r2 = api.post(f"/api/phases/{cal1.id}/labels/", payload, format="json")
    assert r2.status_code == 200 and r2.json()["label"]["id"] == r.json()["label"]["id"]
    assert Label.objects.count() == 1
    # Going back to change the answer.
    r3 = api.post(
        f"/api/phases/{cal1.id}/labels/", {**payload, "client_id": str(uuid.uuid4()), "tones": [5]}, format="json"
    )
    assert r3.status_code == 200 and r3.json()["revision"] == 2
    history = api.get(f"/api/phases/{cal1.id}/labels/").json()
    assert [h["tones"] for h in history] == [[5]]
    progress = api.get(f"/api/phases/{cal1.id}/progress/").json()
    assert progress["me"]["done"] == 1


@pytest.mark.parametrize(
    "change, status, fragment",
    [
        ({"tones": [12]}, 400, "not on this scale"),
        ({"tones": [2, 5]}, 400, "not adjacent"),
        ({"tones": ["x"]}, 400, "tones"),
        ({"client_id": "123"}, 400, "client_id"),
        ({"image": 999999}, 403, "not assigned"),
        ({"skip_reason": "boredom", "tones": []}, 400, "Unknown skip reason"),
        ({"time_spent_ms": -1}, 400, "time_spent_ms"),
    ],
)
def test_bad_label_submissions_get_clear_4xx(project, labelers, change, status, fragment, client_for):
    add_images(project, 2)
    cal1 = open_calibration_1(project, size=2, cal1=2)
    api = client_for(labelers[0].user)
    image_id = cal1.assignments.filter(labeler=labelers[0]).first().image_id
    payload = {"client_id": str(uuid.uuid4()), "image": image_id, "tones": [4], **change}
    r = api.post(f"/api/phases/{cal1.id}/labels/", payload, format="json")
    assert r.status_code == status and fragment in r.content.decode(), r.content
    assert not Label.objects.exists()


def test_submitting_into_a_closed_phase_is_refused(project, labelers, lead, client_for):
    add_images(project, 2)
    cal1 = open_calibration_1(project, size=2, cal1=2)
    assert client_for(lead).post(f"/api/phases/{cal1.id}/close/").status_code == 200
    api = client_for(labelers[0].user)
    image_id = cal1.assignments.filter(labeler=labelers[0]).first().image_id
    r = api.post(
        f"/api/phases/{cal1.id}/labels/",
        {"client_id": str(uuid.uuid4()), "image": image_id, "tones": [4]},
        format="json",
    )
    assert r.status_code == 400 and "closed" in r.content.decode()


def test_lead_phase_control_and_corrections(project, labelers, lead_api):
    add_images(project, 8)
    r = lead_api.post(
        f"/api/projects/{project.id}/calibration/",
        {"size": 6, "calibration_1_size": 4, "n_repeated": 2, "seed": 7},
        format="json",
    )
    assert r.status_code == 200, r.content
    cal1_id = next(p["id"] for p in r.json() if p["kind"] == "calibration_1")
    assert (
        lead_api.post(f"/api/projects/{project.id}/calibration/", {"n_repeated": 99}, format="json").status_code == 400
    )
    r = lead_api.post(f"/api/phases/{cal1_id}/open/", {"labels_per_image": 2}, format="json")
    assert r.status_code == 200 and r.json()["status"] == "open"
    r = lead_api.post(f"/api/phases/{cal1_id}/labels-per-image/", {"labels_per_image": 3}, format="json")
    assert r.status_code == 200 and r.json()["assignments_added"] == 4
    progress = lead_api.get(f"/api/phases/{cal1_id}/progress/").json()
    assert progress["assigned"] == 12 and len(progress["labelers"]) == 4
    cal1 = Phase.objects.get(pk=cal1_id)
    from tests.labeling.helpers import submit

    a = cal1.assignments.first()
    label = submit(cal1, a.labeler, a.image_id, tones=[2]).label
    r = lead_api.post(f"/api/labels/{label.id}/corrections/", {"tones": [7], "reason": "slip"}, format="json")
    assert r.status_code == 201 and r.json()["source"] == "correction" and r.json()["author"] == "LEAD"
    assert lead_api.post(f"/api/labels/{label.id}/corrections/", {"tones": [7]}, format="json").status_code == 400
    revisions = lead_api.get(f"/api/labels/{label.id}/revisions/").json()
    assert [(r["number"], r["tone_low"]) for r in revisions] == [(1, 2), (2, 7)]


def test_imports_through_the_api_report_per_file(lead_api, project):
    good = png_bytes((200, 150, 120))
    files = [
        ("good.png", good),
        ("same-content.png", good),
        ("fake.jpg", b"this is text, not a JPEG"),
    ]
    from django.core.files.uploadedfile import SimpleUploadedFile

    r = lead_api.post(
        f"/api/projects/{project.id}/imports/",
        {"files": [SimpleUploadedFile(n, d) for n, d in files]},
        format="multipart",
    )
    assert r.status_code == 201, r.content
    outcomes = {i["filename"]: i["outcome"] for i in r.json()["items"]}
    assert outcomes == {"good.png": "imported", "same-content.png": "duplicate", "fake.jpg": "rejected"}
    assert project.images.count() == 1
    # Zip with a path escaping the archive root is refused as a whole.
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("ok.png", png_bytes((1, 2, 3)))
        zf.writestr("../evil.png", png_bytes((4, 5, 6)))
    r = lead_api.post(
        f"/api/projects/{project.id}/imports/",
        {"archive": SimpleUploadedFile("a.zip", buf.getvalue())},
        format="multipart",
    )
    assert r.status_code == 201 and r.json()["status"] == "failed" and r.json()["error"]
    assert project.images.count() == 1
    # Garbage archive next to a manifest.
    r = lead_api.post(
        f"/api/projects/{project.id}/imports/",
        {
            "manifest": SimpleUploadedFile("m.csv", b"file\nx.png\n"),
            "archive": SimpleUploadedFile("a.zip", b"not a zip"),
        },
        format="multipart",
    )
    assert r.status_code == 400
    assert lead_api.post(f"/api/projects/{project.id}/imports/", {}, format="multipart").status_code == 400
    assert lead_api.get(f"/api/projects/{project.id}/imports/").json()["count"] == 2


def test_images_list_filters_by_subject_attribute(lead_api, project):
    from labeling.models import Subject

    women = Subject.objects.create(project=project, external_id="A", attributes={"gender": "woman", "height": 170})
    men = Subject.objects.create(project=project, external_id="B", attributes={"gender": "man", "height": 180})
    add_images(project, 1)[0].__class__.objects.filter(project=project).update(subject=women)
    img = add_images(project, 1)[0]
    img.subject = men
    img.save()
    r = lead_api.get(f"/api/projects/{project.id}/images/?attr=gender:man").json()
    assert [i["id"] for i in r["results"]] == [img.id]
    r = lead_api.get(f"/api/projects/{project.id}/images/?attr=height:170").json()
    assert r["count"] == 1
    assert lead_api.get(f"/api/projects/{project.id}/images/?attr=bad").status_code == 400


def test_schema_and_docs_are_served_locally(lead_api, client, lead):
    r = lead_api.get("/api/schema/")
    assert r.status_code == 200 and b"/api/phases/{id}/labels/" in r.content
    client.force_login(lead)
    html = client.get("/api/docs/").content.decode()
    assert "swagger" in html.lower()
    # No outside host: no CDN name, no absolute or protocol-relative URL ("cdn" alone can occur in the
    # page's random CSRF token).
    assert "cdn." not in html.lower() and "https://" not in html and "http://" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?//""", html)


def test_reviewer_role_sees_images_but_not_labels(project, client_for):
    reviewer = MembershipFactory(project=project, user=UserFactory(username="rev"), role="reviewer", pseudonym="R01")
    add_images(project, 1)
    api = client_for(reviewer.user)
    assert api.get(f"/api/projects/{project.id}/images/").status_code == 200
    image = project.images.first()
    assert api.get(f"/api/images/{image.id}/labels/").status_code == 403


def test_deleted_token_stops_working_at_once(lead, client_for):
    api = client_for(lead)
    assert api.get("/api/projects/").status_code == 200  # now cached
    Token.objects.filter(user=lead).delete()
    assert api.get("/api/projects/").status_code == 401


def test_deactivated_user_is_refused(lead, client_for):
    api = client_for(lead)
    assert api.get("/api/projects/").status_code == 200
    lead.is_active = False
    lead.save()
    from django.core.cache import cache

    cache.clear()  # within TOKEN_CACHE_SECONDS a cached user may still pass; after it, refused
    assert api.get("/api/projects/").status_code == 401


def test_removing_a_labeler_takes_effect_at_once(project, labelers, client_for):
    add_images(project, 2)
    phase = open_calibration_1(project, size=2, cal1=2)
    api = client_for(labelers[0].user)
    assert api.get(f"/api/phases/{phase.id}/next/").status_code == 200  # membership now cached
    labelers[0].is_active = False
    labelers[0].save()
    assert api.get(f"/api/phases/{phase.id}/next/").status_code == 404
    labelers[0].is_active = True
    labelers[0].role = "reviewer"
    labelers[0].save()
    assert api.get(f"/api/phases/{phase.id}/next/").status_code == 403


def test_labelers_cannot_make_themselves_leads(project, labelers, client, client_for):
    """Creating a project (and so becoming its lead) needs staff or the add_project permission."""
    api = client_for(labelers[0].user)
    assert api.post("/api/projects/", {"name": "Mine"}, format="json").status_code == 403
    client.force_login(labelers[0].user)
    assert client.get("/projects/new/").status_code == 404
    assert "New project" not in client.get("/").content.decode()


def test_server_folder_imports_are_for_staff(lead_api, project, lead):
    from django.core.files.uploadedfile import SimpleUploadedFile

    r = lead_api.post(
        f"/api/projects/{project.id}/imports/",
        {"manifest": SimpleUploadedFile("m.csv", b"file\\nx.png\\n"), "folder": "/"},
        format="multipart",
    )
    assert r.status_code == 403 and "staff" in r.content.decode()


def test_labelers_do_not_get_the_calibration_seed(project, labelers, client_for):
    add_images(project, 4)
    phase = open_calibration_1(project, size=4, cal1=4)
    body = client_for(labelers[0].user).get(f"/api/projects/{project.id}/phases/").json()
    assert body and all(set(p) <= {"id", "kind", "status", "opened_at", "closed_at"} for p in body)
    detail = client_for(labelers[0].user).get(f"/api/phases/{phase.id}/").json()
    assert "selection_seed" not in detail and "n_repeated" not in detail


def test_a_bad_tone_order_is_refused(lead_api, project):
    r = lead_api.patch(f"/api/projects/{project.id}/", {"tone_order": [1, 1, 2, 3, 4, 5, 6, 7, 8, 9]}, format="json")
    assert r.status_code == 400
    r = lead_api.patch(f"/api/projects/{project.id}/", {"tone_order": list(range(10, 0, -1))}, format="json")
    assert r.status_code == 200 and r.json()["tone_order"] == list(range(10, 0, -1))


def test_token_endpoint_shares_the_sign_in_brake(client, lead):
    """Ten wrong passwords through either door lock both for that username, until a right one after the window."""
    api = APIClient()
    for _ in range(10):
        assert api.post("/api/auth/token/", {"username": "lead", "password": "wrong"}, format="json").status_code == 400
    r = api.post("/api/auth/token/", {"username": "lead", "password": "pw-test-123"}, format="json")
    assert r.status_code == 429 and "Too many wrong passwords" in r.json()["detail"]
    assert client.post("/login/", {"username": "lead", "password": "pw-test-123"}).status_code == 429
    UserFactory(username="other")
    assert api.post("/api/auth/token/", {"username": "other", "password": "pw-test-123"}).status_code == 200


def test_every_paginated_list_has_one_shape(lead_api, project, labelers):
    """DRF's page (count, next, previous, results), the consensus images included (extra keys may follow)."""
    add_images(project, 4)
    phase = open_calibration_1(project, size=4, cal1=4, labels_per_image=2)
    for m in labelers:
        for a in phase.assignments.filter(labeler=m):
            submit(phase, m, a.image_id, tones=[4])
    urls = [
        f"/api/projects/{project.id}/images/",
        f"/api/projects/{project.id}/imports/",
        f"/api/projects/{project.id}/jobs/",
        f"/api/projects/{project.id}/baselines/",
        f"/api/projects/{project.id}/consensus/images/?phase={phase.id}",
    ]
    for url in urls:
        body = lead_api.get(url).json()
        assert list(body)[:4] == ["count", "next", "previous", "results"], (url, list(body))
    body = lead_api.get(urls[-1]).json()
    assert body["count"] == 4 and body["phase"]["id"] == phase.id and "n_pages" not in body
    assert lead_api.get(urls[-1] + "&page=9").status_code == 404


def test_the_token_endpoint_brakes_password_guessing(lead):
    c = APIClient()
    codes = [c.post("/api/auth/token/", {"username": "lead", "password": f"guess{i}"}).status_code for i in range(30)]
    assert 429 in codes, codes


def test_a_tone_order_with_duplicates_is_refused(project, labelers, lead, client_for):
    add_images(project, 2)
    r = client_for(lead).patch(
        f"/api/projects/{project.id}/", {"tone_order": [1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}, format="json"
    )
    assert r.status_code == 400, r.content  # a bad order would block every submit


def test_text_under_a_files_name_is_refused_and_nothing_imported(project, lead, client_for):
    """A text field named like an upload (archive, manifest, files) is a 400 naming it, not ignored while the
    rest of the request is imported (schemathesis's negative run found the import accepted)."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    api = client_for(lead)
    for name in ("archive", "manifest", "files"):
        r = api.post(
            f"/api/projects/{project.id}/imports/",
            {"files": [SimpleUploadedFile("a.png", png_bytes())], name: "not a file"}
            if name != "files"
            else {"files": "not a file"},
            format="multipart",
        )
        assert r.status_code == 400 and name in r.json(), (name, r.content)
    # A file and a text part under one name (the text would have been dropped silently).
    r = api.post(
        f"/api/projects/{project.id}/imports/",
        {"files": [SimpleUploadedFile("a.png", png_bytes()), "text"]},
        format="multipart",
    )
    assert r.status_code == 400 and "files" in r.json(), r.content
    r = api.post(f"/api/projects/{project.id}/imports/", {"archive": "x"}, format="json")
    assert r.status_code == 400 and "archive" in r.json()
    assert project.images.count() == 0
