"""Issue 23: a lead fixes subjects and attributes after the import, without the admin.

``PATCH /api/images/{id}/`` changes one image (merge patches), ``POST /api/projects/{id}/image-attributes/``
applies a manifest to images already in the project (all rows or none, a report per row). Only the lead may;
bad values are a 400 naming the field with nothing half-applied; every change is audited; releases already
published keep their files byte for byte.
"""

import hashlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from labeling.models import AuditEntry, Image, Membership, Subject
from labeling.services import releases as release_services
from labeling.services.project_lifecycle import project_archive
from tests.factories import MembershipFactory, UserFactory, make_image
from tests.labeling import test_releases as base
from tests.labeling.helpers import add_images

# The release tests' fixtures: a study labelled in every phase, built in this process, files in a temporary folder.
eager, media, team, study = base.eager, base.media, base.team, base.study

pytestmark = pytest.mark.django_db


def patch(api, image, body):
    return api.patch(f"/api/images/{image.id}/", body, format="json")


def apply(api, project, text, name="fix.csv", **extra):
    upload = SimpleUploadedFile(name, text.encode(), content_type="text/csv")
    return api.post(f"/api/projects/{project.id}/image-attributes/", {"manifest": upload, **extra}, format="multipart")


@pytest.fixture
def uploaded(project):
    """Three photos uploaded in the browser: no subject, no attributes."""
    return [make_image(project, colour=(200, 10 + i, 40), name=f"photo{i}.png") for i in range(3)]


def test_the_lead_sets_the_subject_and_its_attributes_of_an_uploaded_photo(project, lead, client_for, uploaded):
    api = client_for(lead)
    r = patch(api, uploaded[0], {"subject_id": "S9", "subject_attributes": {"gender": "woman", "body_shape": 0.4}})
    assert r.status_code == 200, r.content
    assert r.json()["subject_id"] == "S9"
    assert r.json()["subject_attributes"] == {"gender": "woman", "body_shape": 0.4}
    image = Image.objects.select_related("subject").get(pk=uploaded[0].pk)
    assert image.subject.external_id == "S9" and image.subject.attributes == {"gender": "woman", "body_shape": 0.4}
    # The image's own attributes: a merge patch (null removes a name, the others stay).
    assert patch(api, uploaded[0], {"attributes": {"pose": "frontal", "lux": 300}}).status_code == 200
    r = patch(api, uploaded[0], {"attributes": {"lux": None, "camera": "A"}})
    assert r.status_code == 200 and r.json()["attributes"] == {"pose": "frontal", "camera": "A"}
    # Nothing to change: 200, no new audit entry.
    entries = AuditEntry.objects.filter(action="image.attributes").count()
    assert patch(api, uploaded[0], {"attributes": {"camera": "A"}}).status_code == 200
    assert AuditEntry.objects.filter(action="image.attributes").count() == entries == 3
    entry = AuditEntry.objects.filter(action="image.attributes").order_by("id").first()
    assert entry.user_id == lead.id and entry.object_id == str(uploaded[0].id)
    assert entry.details["changed"] == ["subject_id", "subject_attributes.gender", "subject_attributes.body_shape"]
    assert "woman" not in str(entry.details)  # names, never values
    # Detached again: the subject stays (other images may show the person), the image has none.
    r = patch(api, uploaded[0], {"subject_id": ""})
    assert r.status_code == 200 and r.json()["subject_id"] is None
    assert Subject.objects.filter(project=project, external_id="S9").exists()


def test_only_the_lead_may_change_attributes(project, lead, client_for, uploaded):
    labeler = MembershipFactory(project=project, user=UserFactory(username="lab"), pseudonym="L1")
    reviewer = MembershipFactory(
        project=project, user=UserFactory(username="rev"), pseudonym="R1", role=Membership.Role.REVIEWER
    )
    outsider = UserFactory(username="outsider")
    body = {"subject_attributes": {"gender": "man"}, "subject_id": "S1"}
    manifest = "image_id,subject_id,gender\nphoto1,S1,man\n"
    for user, code in ((labeler.user, 403), (reviewer.user, 403), (outsider, 404)):
        api = client_for(user)
        assert patch(api, uploaded[0], body).status_code == code, user
        assert apply(api, project, manifest).status_code == code, user
    assert not Image.objects.filter(project=project, subject__isnull=False).exists()
    assert not AuditEntry.objects.filter(action__in=["image.attributes", "images.attributes_apply"]).exists()
    assert client_for(lead).put(f"/api/images/{uploaded[0].id}/", body, format="json").status_code == 405


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"subject_id": "S1", "attributes": {"pose": ["a", "b"]}}, "attributes"),
        ({"subject_id": "S1", "attributes": {"x" * 101: 1}}, "attributes"),
        ({"subject_id": "S1", "subject_attributes": {"note": "y" * 1001}}, "subject_attributes"),
        ({"subject_id": "S" * 201, "attributes": {"pose": "side"}}, "subject_id"),
        ({"subject_attributes": {"gender": "woman"}}, "subject_attributes"),  # the image has no subject
        ({"attributes": "frontal"}, "attributes"),
        ({"subject_id": ["S1"]}, "subject_id"),
    ],
)
def test_bad_values_are_a_400_naming_the_field_and_change_nothing(project, lead, client_for, uploaded, body, field):
    r = patch(client_for(lead), uploaded[0], body)
    assert r.status_code == 400, r.content
    assert field in r.json(), r.json()
    image = Image.objects.get(pk=uploaded[0].pk)
    assert image.subject_id is None and image.attributes == {}
    assert not Subject.objects.filter(project=project).exists()
    assert not AuditEntry.objects.filter(action="image.attributes").exists()


def test_a_manifest_updates_the_images_already_imported_and_reports_each_row(project, lead, client_for, uploaded):
    api = client_for(lead)
    patch(api, uploaded[2], {"subject_id": "S3", "subject_attributes": {"gender": "man"}})
    manifest = (
        "file,image_id,subject_id,gender,body_shape,image.pose,mask\n"
        "photo0.png,,S1,woman,0.5,frontal,\n"  # matched by file name
        "elsewhere/x.png,photo1,S2,man,-1.2,,masks/x.png\n"  # by image id (the file cell is not used); mask ignored
        ",photo2,,man,,,\n"  # its subject already says so: unchanged
        "missing.png,,S4,woman,0.1,,\n"  # not in the project
    )
    r = apply(api, project, manifest)
    assert r.status_code == 200, r.content
    report = r.json()
    assert report["applied"] is True and report["dry_run"] is False
    assert report["counts"] == {"updated": 2, "unchanged": 1, "unknown": 1, "rejected": 0}
    rows = {row["row"]: row for row in report["rows"]}
    assert rows[2]["outcome"] == "updated" and rows[2]["image_id"] == "photo0"
    assert rows[2]["changed"] == [
        "subject_id",
        "attributes.pose",
        "subject_attributes.gender",
        "subject_attributes.body_shape",
    ]
    assert rows[3]["outcome"] == "updated" and rows[4]["outcome"] == "unchanged"
    assert rows[5]["outcome"] == "unknown" and "missing.png" in rows[5]["reason"]
    images = {i.external_id: i for i in Image.objects.select_related("subject").filter(project=project)}
    assert images["photo0"].subject.external_id == "S1" and images["photo0"].attributes == {"pose": "frontal"}
    assert images["photo0"].subject.attributes == {"gender": "woman", "body_shape": 0.5}
    assert images["photo1"].subject.attributes == {"gender": "man", "body_shape": -1.2}
    assert images["photo1"].mask_kind == ""
    assert not Subject.objects.filter(external_id="S4").exists()
    entry = AuditEntry.objects.get(action="images.attributes_apply")
    assert entry.user_id == lead.id and entry.details["manifest"] == "fix.csv"
    assert sorted(entry.details["images"]) == ["photo0", "photo1"] and entry.details["n_unknown"] == 1
    # The same manifest again: nothing left to change.
    again = apply(api, project, manifest).json()
    assert again["counts"] == {"updated": 0, "unchanged": 3, "unknown": 1, "rejected": 0}
    assert AuditEntry.objects.filter(action="images.attributes_apply").count() == 1


def test_one_bad_row_rejects_the_manifest_and_nothing_is_applied(project, lead, client_for, uploaded):
    api = client_for(lead)
    manifest = (
        "image_id,subject_id,gender\n"
        "photo0,S1,woman\n"
        "photo1,S1,man\n"  # S1 was a woman in row 2
        "photo2,S2," + "z" * 1001 + "\n"  # too long
        "photo0,S1,woman\n"  # the same image twice
    )
    r = apply(api, project, manifest)
    assert r.status_code == 400
    report = r.json()
    assert report["applied"] is False and report["counts"]["rejected"] == 3
    rows = {row["row"]: row for row in report["rows"]}
    assert rows[2]["outcome"] == "updated"  # would have been
    assert "S1" in rows[3]["reason"] and "'woman'" in rows[3]["reason"]
    assert "gender" in rows[4]["reason"] and "1000" in rows[4]["reason"]
    assert "also in row 2" in rows[5]["reason"]
    assert not Subject.objects.filter(project=project).exists()
    assert not Image.objects.filter(project=project, subject__isnull=False).exists()
    assert not AuditEntry.objects.filter(action="images.attributes_apply").exists()


def test_a_dry_run_reports_and_changes_nothing(project, lead, client_for, uploaded):
    r = apply(client_for(lead), project, "image_id;subject_id;gender\nphoto0;S1;woman\n", dry_run="true")
    assert r.status_code == 200
    assert r.json()["applied"] is False and r.json()["counts"]["updated"] == 1
    assert not Subject.objects.filter(project=project).exists()


def test_a_file_name_shared_by_two_images_needs_the_image_id(project, lead, client_for):
    make_image(project, colour=(1, 2, 3), name="same.png", external_id="a")
    make_image(project, colour=(4, 5, 6), name="same.png", external_id="b")
    r = apply(client_for(lead), project, "file,gender\nsame.png,woman\n")
    assert r.status_code == 400 and "give their image_id" in r.json()["rows"][0]["reason"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gender,age\nwoman,30\n", "'image_id' or a 'file' column"),
        ("", "empty"),
        ("image_id,gender,gender\nphoto0,a,b\n", "twice"),
    ],
)
def test_a_manifest_that_cannot_be_read_is_a_400_naming_it(project, lead, client_for, uploaded, text, message):
    r = apply(client_for(lead), project, text)
    assert r.status_code == 400 and message in " ".join(r.json()["manifest"]), r.json()


def test_no_manifest_and_an_archived_project_are_refused(project, lead, client_for, uploaded):
    api = client_for(lead)
    r = api.post(f"/api/projects/{project.id}/image-attributes/", {}, format="multipart")
    assert r.status_code == 400 and "manifest" in r.json()
    project_archive(project=project, user=lead)
    assert "archived" in str(patch(api, uploaded[0], {"attributes": {"pose": "x"}}).json())
    assert apply(api, project, "image_id,gender\nphoto0,woman\n").status_code == 400
    assert Image.objects.get(pk=uploaded[0].pk).attributes == {}


def test_published_releases_keep_their_files_when_attributes_change(study, lead, client_for, media):
    project, images = study["project"], study["images"]
    release = base.make_release(project, lead)
    folder = release_services.release_dir(release)
    before = {path: hashlib.sha256((folder / path).read_bytes()).hexdigest() for path in release.manifest["files"]}
    assert before and all(before[p] == release.manifest["files"][p]["sha256"] for p in before)
    api = client_for(lead)
    r = patch(api, images[0], {"subject_attributes": {"gender": "non-binary", "body_shape": 1.5}})
    assert r.status_code == 200, r.content
    rows = "\n".join(f"{image.external_id},S{9 + i},{0.1 * i:.1f}" for i, image in enumerate(images[1:4]))
    assert apply(api, project, "image_id,subject_id,body_shape\n" + rows + "\n").status_code == 200
    after = {path: hashlib.sha256((folder / path).read_bytes()).hexdigest() for path in release.manifest["files"]}
    assert after == before
    release.refresh_from_db()
    assert {p: f["sha256"] for p, f in release.manifest["files"].items()} == before
    # The next release carries the new values.
    second = base.make_release(project, lead)
    subjects = (release_services.release_dir(second) / "images.csv").read_text()
    assert "non-binary" in subjects and "S9" in subjects


def test_reusing_the_import_checks():
    """The import and the later changes check attributes with the same function."""
    from labeling.services import image_attributes, images

    assert image_attributes.clean_attributes is images.clean_attributes
    assert not hasattr(images, "_clean_attributes")
    add_images  # noqa: B018 - the helpers stay importable from here


def test_the_image_page_form_saves_what_it_shows(project, lead, client, uploaded):
    client.force_login(lead)
    url = f"/images/{uploaded[0].id}/"
    page = client.get(url).content.decode()
    assert 'id="edit-attributes"' in page and 'name="subject_attributes"' in page
    form = {"action": "attributes", "subject_id": "S5", "subject_attributes": "gender: woman\nbody_shape: 0.3"}
    r = client.post(url, {**form, "attributes": "pose: side"})
    assert r.status_code == 302
    image = Image.objects.select_related("subject").get(pk=uploaded[0].pk)
    assert image.subject.external_id == "S5" and image.subject.attributes == {"gender": "woman", "body_shape": 0.3}
    assert image.attributes == {"pose": "side"}
    page = client.get(url).content.decode()
    assert "Saved: subject_id" in page and "body_shape: 0.3" in page
    # A line deleted removes that attribute.
    assert client.post(url, {**form, "subject_attributes": "gender: woman", "attributes": ""}).status_code == 302
    image = Image.objects.select_related("subject").get(pk=uploaded[0].pk)
    assert image.subject.attributes == {"gender": "woman"} and image.attributes == {}
    assert AuditEntry.objects.filter(action="image.attributes", object_id=str(image.id)).count() == 2
    # A bad line: the form again with the error next to its field, nothing changed.
    r = client.post(url, {**form, "subject_attributes": "gender woman"})
    assert r.status_code == 200 and "write “name: value”" in r.content.decode()
    r = client.post(url, {**form, "subject_id": "", "subject_attributes": "gender: man"})
    assert r.status_code == 200 and "has no subject" in r.content.decode()
    image = Image.objects.select_related("subject").get(pk=uploaded[0].pk)
    assert image.subject.external_id == "S5" and image.subject.attributes == {"gender": "woman"}


def test_a_reviewer_sees_no_form_and_cannot_post_one(project, client, uploaded):
    reviewer = MembershipFactory(
        project=project, user=UserFactory(username="rev"), pseudonym="R1", role=Membership.Role.REVIEWER
    )
    client.force_login(reviewer.user)
    url = f"/images/{uploaded[0].id}/"
    assert 'id="edit-attributes"' not in client.get(url).content.decode()
    r = client.post(url, {"action": "attributes", "subject_id": "S1", "subject_attributes": "gender: man"})
    assert r.status_code in (403, 404)
    assert Image.objects.get(pk=uploaded[0].pk).subject_id is None


def test_the_data_managers_bulk_set_attribute(project, lead, client_for, client, uploaded):
    api = client_for(lead)
    patch(api, uploaded[0], {"subject_id": "S1"})
    patch(api, uploaded[1], {"subject_id": "S1"})
    url = f"/api/projects/{project.id}/data/bulk/"
    ids = [i.id for i in uploaded]
    r = api.post(
        url, {"action": "set_attribute", "image_ids": ids, "attribute": "gender", "value": "woman"}, format="json"
    )
    assert r.status_code == 200, r.content
    assert r.json()["n_changed"] == 3 and r.json()["n_images"] == 3
    assert Subject.objects.get(project=project, external_id="S1").attributes == {"gender": "woman"}
    assert Image.objects.get(pk=uploaded[2].pk).attributes == {"gender": "woman"}  # no subject: the image's
    body = {"action": "set_attribute", "image_ids": ids[:1], "attribute": "image.lux", "value": "250"}
    assert api.post(url, body, format="json").json()["n_changed"] == 1
    assert Image.objects.get(pk=uploaded[0].pk).attributes == {"lux": 250}
    # An empty value removes it; a bad name or value is a 400 naming the field, nothing changed.
    body = {"action": "set_attribute", "image_ids": ids, "attribute": "gender", "value": ""}
    assert api.post(url, body, format="json").json()["n_changed"] == 3
    assert Subject.objects.get(project=project, external_id="S1").attributes == {}
    for bad, field in (
        ({"attribute": ""}, "attribute"),
        ({"attribute": "g", "value": "v" * 1001}, "value"),
        ({"attribute": "x" * 101}, "attribute"),
    ):
        r = api.post(url, {"action": "set_attribute", "image_ids": ids, "value": "x", **bad}, format="json")
        assert r.status_code == 400 and field in r.json(), r.json()
    entries = AuditEntry.objects.filter(action="images.attribute_set").order_by("id")
    assert [e.details["attribute"] for e in entries] == ["gender", "image.lux", "gender"]
    assert "woman" not in str([e.details for e in entries])
    # The page's bulk bar does the same.
    client.force_login(lead)
    r = client.post(
        f"/projects/{project.id}/data/",
        {"action": "set_attribute", "scope": "selected", "image_ids": ids, "attribute": "body_shape", "value": "0.7"},
    )
    assert r.status_code == 302
    assert Subject.objects.get(project=project, external_id="S1").attributes == {"body_shape": 0.7}
