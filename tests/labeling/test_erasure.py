"""Issue 13, erasure on request: a lead erases one subject (their images, files, labels, baselines and the rest),
the app records that it happened and which releases contained the subject (releases are not rewritten; they say
so from then on), and nothing of the subject remains on disk."""

import hashlib
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile

from labeling.models import (
    Assignment,
    AuditEntry,
    Image,
    ImageBaseline,
    ImageExclusion,
    Label,
    LabelRevision,
    PhaseImage,
    Release,
    ReviewDecision,
    Subject,
    SubjectErasure,
)
from labeling.services import erasure, project_lifecycle
from labeling.services import releases as release_services
from labeling.services.data_manager import images_exclude
from labeling.services.images import image_create_from_bytes, image_make_derivatives
from labeling.services.labels import label_correct
from labeling.services.review_decisions import review_decide
from tests.factories import MembershipFactory, UserFactory, png_bytes
from tests.labeling.helpers import open_calibration_1, submit

pytestmark = pytest.mark.django_db

GONE = "subject-to-erase-7f3"
KEPT = "subject-kept-2b1"


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return Path(settings.MEDIA_ROOT)


def files_under(root: Path) -> dict[str, str]:
    """Every file under ``root``: its relative path and the SHA-256 of its bytes."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


@pytest.fixture
def world(project, lead, labelers):
    """Two subjects with three images each (masks, display images, thumbnails, a baseline overlay), labelled by
    four labelers, one image excluded and one decided, a correction, and release v1 published."""
    subjects = {
        key: Subject.objects.create(project=project, external_id=key, attributes={"age": 30}) for key in (GONE, KEPT)
    }
    n = 0
    for key, subject in subjects.items():
        for _ in range(3):
            n += 1
            image = image_create_from_bytes(
                project=project,
                filename=f"{key}-{n}.png",
                data=png_bytes(colour=(20 * n, 90, 60)),
                subject=subject,
                mask_data=png_bytes(colour=(255, 255, 255), mode="L"),
                mask_kind="skin",
            )
            image_make_derivatives(image=image)
            ImageBaseline.objects.create(
                image=image,
                parameters={},
                parameters_hash="x",
                code_version="t",
                status=ImageBaseline.Status.OK,
                overlay=ContentFile(png_bytes(), name=f"{project.pk}/overlay-{image.sha256}.png"),
            )
    phase = open_calibration_1(project, size=6, cal1=6, labels_per_image=4)
    for m in labelers:
        for a in phase.assignments.filter(labeler=m):
            submit(phase, m, a.image_id, tones=[5])
    gone_images = list(Image.objects.filter(subject__external_id=GONE))
    images_exclude(project=project, images=gone_images[:1], reason="blurred", user=lead)
    review_decide(phase=phase, image=gone_images[1], state="accepted", user=lead)
    label_correct(label=Label.objects.filter(image=gone_images[2]).first(), user=lead, reason="slip", tones=[4])
    release = publish(project, lead)
    return {"project": project, "phase": phase, "gone": gone_images, "release": release}


def publish(project, lead) -> Release:
    release = release_services.release_request(
        project=project,
        user=lead,
        rule={"include": dict.fromkeys(release_services.CATEGORIES, True)},
        card_text={name: f"The {name}." for name in release_services.CARD_FIELDS},
    )
    release = release_services.release_build(release)
    assert release.status == "published"
    return release


def test_nothing_of_the_subject_remains_and_everything_else_does(
    world, lead, media_root, django_capture_on_commit_callbacks
):
    project, gone = world["project"], world["gone"]
    gone_ids = [i.pk for i in gone]
    gone_names = {n for i in gone for n in (i.original.name, i.mask.name, i.display.name, i.thumbnail.name)}
    gone_names |= set(ImageBaseline.objects.filter(image_id__in=gone_ids).values_list("overlay", flat=True))
    assert all(n and (media_root / n).is_file() for n in gone_names) and len(gone_names) == 15
    before = files_under(media_root)
    kept_labels = Label.objects.filter(phase__project=project).exclude(image_id__in=gone_ids).count()

    with django_capture_on_commit_callbacks(execute=True):
        record = erasure.subject_erase(project=project, external_id=GONE, user=lead, confirm=GONE, reason="asked")
    after = files_under(media_root)

    # Exactly the subject's files went; every other file is unchanged, byte for byte.
    assert set(before) - set(after) == gone_names
    assert set(after) <= set(before) and all(after[p] == before[p] for p in after)
    # Outside the (immutable) release files, no file names the subject or holds their bytes or their id.
    shas = {i.sha256 for i in gone}
    for relative in after:
        if relative.startswith("releases/"):
            continue
        assert not any(sha in relative for sha in shas)
        assert GONE.encode() not in (media_root / relative).read_bytes()
    # Rows: none of the subject's are left; the other subject's are all there.
    assert not Subject.objects.filter(project=project, external_id=GONE).exists()
    assert not Image.objects.filter(pk__in=gone_ids).exists()
    for model in (Label, ImageBaseline, ImageExclusion, ReviewDecision, PhaseImage, Assignment):
        assert not model.objects.filter(image_id__in=gone_ids).exists(), model
    assert not LabelRevision.objects.filter(label__image_id__in=gone_ids).exists()
    assert Label.objects.filter(phase__project=project).count() == kept_labels
    assert Image.objects.filter(subject__external_id=KEPT).count() == 3
    # The record: when, who, the id, the counts, and the releases that contained the subject.
    assert record.subject_external_id == GONE and record.erased_by == lead and record.erased_by_username == "lead"
    assert record.subject_sha256 == hashlib.sha256(GONE.encode()).hexdigest()
    assert record.counts["images"] == 3 and record.counts["labels"] == 12 and record.counts["files"] == 15
    assert record.counts["exclusions"] == 1 and record.counts["review_decisions"] == 1
    assert record.counts["revisions"] == 13
    assert [(r["version"], r["rows"]) for r in record.releases] == [(1, 3)]
    entry = AuditEntry.objects.get(project_id=project.pk, action="subject.erase")
    assert (entry.username, entry.details["subject"], entry.details["releases"]) == ("lead", GONE, [1])
    # The release's database rows stay (the release is immutable) but no longer point at the images.
    assert world["release"].release_images.filter(image_id__in=gone_ids).count() == 0
    assert world["release"].release_images.count() == 6


def test_a_release_made_before_says_so_and_one_made_after_does_not(world, lead, client, client_for, labelers):
    project = world["project"]
    erasure.subject_erase(project=project, external_id=GONE, user=lead, confirm=GONE)
    second = publish(project, lead)
    api = client_for(lead)
    old = api.get(f"/api/projects/{project.pk}/releases/1/").json()
    assert [e["subject"] for e in old["erasures"]] == [GONE]
    assert "after this release was made" in old["erasures"][0]["notice"]
    assert api.get(f"/api/projects/{project.pk}/releases/{second.version}/").json()["erasures"] == []
    client.force_login(lead)
    page = client.get(f"/projects/{project.pk}/releases/1/").content.decode()
    assert f"Subject {GONE} was erased on" in page and "after this release was made" in page
    assert "erased" not in client.get(f"/projects/{project.pk}/releases/{second.version}/").content.decode()


def test_refusals_leave_everything_in_place(world, lead, media_root):
    project = world["project"]
    before = files_under(media_root)
    with pytest.raises(ValidationError) as wrong:
        erasure.subject_erase(project=project, external_id=GONE, user=lead, confirm="something else")
    assert "confirm" in wrong.value.message_dict
    with pytest.raises(ValidationError):
        erasure.subject_erase(project=project, external_id="nobody", user=lead, confirm="nobody")
    queued = release_services.release_request(
        project=project,
        user=lead,
        rule={"include": dict.fromkeys(release_services.CATEGORIES, True)},
        card_text={name: "x" for name in release_services.CARD_FIELDS},
    )
    with pytest.raises(ValidationError) as busy:
        erasure.subject_erase(project=project, external_id=GONE, user=lead, confirm=GONE)
    assert busy.value.code == "busy"
    release_services.release_cancel(queued, user=lead)
    project_lifecycle.project_archive(project=project, user=lead)
    with pytest.raises(ValidationError) as archived:
        erasure.subject_erase(project=project, external_id=GONE, user=lead, confirm=GONE)
    assert archived.value.code == "archived"
    assert files_under(media_root) == before
    assert Image.objects.filter(subject__external_id=GONE).count() == 3
    assert not SubjectErasure.objects.exists()
    assert not AuditEntry.objects.filter(action="subject.erase").exists()


def test_api_erases_with_confirmation_for_leads_only(world, lead, labelers, client_for):
    project = world["project"]
    url = f"/api/projects/{project.pk}/subjects/{GONE}/erase/"
    assert client_for(labelers[0].user).post(url, {"confirm": GONE}, format="json").status_code == 403
    reviewer = MembershipFactory(project=project, user=UserFactory(username="rev"), role="reviewer", pseudonym="R1")
    assert client_for(reviewer.user).post(url, {"confirm": GONE}, format="json").status_code == 403
    assert client_for(UserFactory(username="stranger")).post(url, {"confirm": GONE}, format="json").status_code == 404
    api = client_for(lead)
    assert api.post(f"/api/projects/{project.pk}/subjects/nobody/erase/", {"confirm": "nobody"}).status_code == 404
    missing = api.post(url, {}, format="json")
    assert missing.status_code == 400 and "confirm" in missing.json()
    wrong = api.post(url, {"confirm": KEPT}, format="json")
    assert wrong.status_code == 400 and "confirm" in wrong.json()
    assert Image.objects.filter(subject__external_id=GONE).count() == 3
    answer = api.post(url, {"confirm": GONE, "reason": "request of 1 Dec"}, format="json")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["subject"] == GONE and body["erased_by"] == "lead" and body["counts"]["images"] == 3
    assert body["releases"][0]["version"] == 1 and body["releases"][0]["rows"] == 3
    assert api.post(url, {"confirm": GONE}, format="json").status_code == 404  # gone already


def test_the_confirmation_page_then_the_audit_log(world, lead, client):
    project, image = world["project"], world["gone"][0]
    client.force_login(lead)
    detail = client.get(f"/images/{image.pk}/").content.decode()
    assert f"/projects/{project.pk}/subjects/{GONE}/erase/" in detail
    page = client.get(f"/projects/{project.pk}/subjects/{GONE}/erase/")
    text = page.content.decode()
    assert page.status_code == 200 and "3 image(s)" in text and "v1 (3 rows" in text
    refused = client.post(f"/projects/{project.pk}/subjects/{GONE}/erase/", {"confirm": "no"})
    assert refused.status_code == 400 and Image.objects.filter(pk=image.pk).exists()
    done = client.post(f"/projects/{project.pk}/subjects/{GONE}/erase/", {"confirm": GONE}, follow=True)
    assert done.redirect_chain[-1][0] == f"/projects/{project.pk}/audit/"
    assert "subject.erase" in done.content.decode() and GONE in done.content.decode()
    assert client.get(f"/projects/{project.pk}/subjects/{GONE}/erase/").status_code == 404
