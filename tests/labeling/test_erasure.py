"""Issue 13, erasure on request: a lead erases one subject (their images, files, labels, baselines and the rest),
the app records that it happened and which releases contained the subject (releases are not rewritten; they say
so from then on), and nothing of the subject remains on disk."""

import hashlib
import io
import json
import zipfile
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
from tests.factories import MembershipFactory, ProjectFactory, UserFactory, make_labelers, make_lead, png_bytes
from tests.labeling.helpers import open_calibration_1, shared_world, submit

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


def _build_world():
    """Two subjects with three images each (masks, display images, thumbnails, a baseline overlay), labelled by
    four labelers, one image excluded and one decided, a correction, and release v1 published. Built once per
    module (``shared_world``, each test with its own copy of the media folder); every test of the module uses
    its lead, project and labelers."""
    lead = make_lead()
    project = ProjectFactory(created_by=lead)
    labelers = make_labelers(project)
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
    return {
        "project": project,
        "lead": lead,
        "labelers": labelers,
        "phase": phase,
        "gone": gone_images,
        "release": release,
    }


_shared_world, world = shared_world("world", _build_world, private_media=True)


@pytest.fixture
def lead(world):
    return world["lead"]


@pytest.fixture
def labelers(world):
    return world["labelers"]


@pytest.fixture
def project(world):
    return world["project"]


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


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_a_release_made_before_carries_the_notice_in_its_downloaded_cards_and_zip(world, lead, client, client_for):
    """The files on disk stay as published; the downloads say what was erased since, each telling how to get the
    published bytes back (strip the block, or ?original=1), and never the erasure's reason."""
    from labeling.services import erasure_notice

    project, release = world["project"], world["release"]
    erasure.subject_erase(project=project, external_id=GONE, user=lead, confirm=GONE, reason="private reason 41")
    release.refresh_from_db()
    second = publish(project, lead)
    api = client_for(lead)
    base = f"/api/projects/{project.pk}/releases/1"
    files = release.manifest["files"]
    for name in erasure_notice.CARD_FILES:
        on_disk = release_services.release_file_path(release, name).read_bytes()
        assert sha256(on_disk) == files[name]["sha256"]  # never rewritten
        served = api.get(f"{base}/files/{name}")
        assert served.status_code == 200 and served["X-Erasure-Notice"] == "1"
        assert served["Cache-Control"] == "private, no-cache"
        data = body(served)
        text = data.decode()
        assert erasure_notice.BEGIN in text and erasure_notice.END in text
        assert f"Subject {GONE} was erased on" in text and "after this release was made" in text
        assert f"{base}/files/{name}?original=1" in text and "private reason 41" not in text
        if name.endswith(".md"):
            assert text.startswith(erasure_notice.BEGIN)
        else:  # at the top of the page's body, the document's head untouched
            assert text.index("<body>") < text.index(erasure_notice.BEGIN) < text.index("<h1")
        assert erasure_notice.card_strip(data) == on_disk
        # Deleting the marked lines by hand, as the notice says, gives the published bytes too.
        lines, keep, skipping = data.decode().splitlines(keepends=True), [], False
        for line in lines:
            if line.startswith("<!-- BEGIN FAIRTONE ERASURE NOTICE"):
                skipping = True
            if not skipping:
                keep.append(line)
            if line.startswith(erasure_notice.END):
                skipping = False
        assert sha256("".join(keep).encode()) == files[name]["sha256"]
        original = api.get(f"{base}/files/{name}", {"original": "1"})
        assert body(original) == on_disk and "X-Erasure-Notice" not in original
    # Another file of the release is served as it is.
    assert sha256(body(api.get(f"{base}/files/images.csv"))) == files["images.csv"]["sha256"]

    zip_path = release_services.release_zip_path(release)
    served = api.get(f"{base}/download/")
    assert served.status_code == 200 and served["X-Erasure-Notice"] == "1"
    data = body(served)
    assert int(served["Content-Length"]) == len(data)
    with zipfile.ZipFile(zip_path) as published, zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.testzip() is None
        top = published.namelist()[0].split("/")[0]
        assert archive.namelist() == [*published.namelist(), f"{top}/ERASURE_NOTICE.md"]
        for name in published.namelist():
            assert archive.read(name) == published.read(name), name
        notice = archive.read(f"{top}/ERASURE_NOTICE.md").decode()
    assert f"Subject {GONE} was erased on" in notice and "manifest does not list it" in notice
    assert f"{base}/download/?original=1" in notice
    assert "ERASURE_NOTICE" not in json.dumps(release.manifest)
    original = api.get(f"{base}/download/", {"original": "true"})
    assert sha256(body(original)) == release.manifest["zip"]["sha256"] == sha256(zip_path.read_bytes())

    # The release's page says so, with a link to the zip as published.
    client.force_login(lead)
    page = client.get(f"/projects/{project.pk}/releases/1/").content.decode()
    assert "download with an erasure notice added" in page and f"{base}/download/?original=1" in page
    assert "erasure notice" not in client.get(f"/projects/{project.pk}/releases/{second.version}/").content.decode()

    # A release made after the erasure: no notice anywhere.
    after = f"/api/projects/{project.pk}/releases/{second.version}"
    card = api.get(f"{after}/files/data_card.md")
    assert "X-Erasure-Notice" not in card and erasure_notice.BEGIN.encode() not in body(card)
    assert sha256(body(api.get(f"{after}/download/"))) == second.manifest["zip"]["sha256"]
    for bad in ("", "yes", "2"):
        assert api.get(f"{base}/download/", {"original": bad}).status_code == 400
        assert api.get(f"{base}/files/data_card.md", {"original": bad}).status_code == 400


def test_a_release_without_erasures_downloads_as_published(world, lead, client_for):
    project, release = world["project"], world["release"]
    api = client_for(lead)
    base = f"/api/projects/{project.pk}/releases/1"
    for name in ("data_card.md", "data_card.html"):
        served = api.get(f"{base}/files/{name}")
        assert sha256(body(served)) == release.manifest["files"][name]["sha256"] and "X-Erasure-Notice" not in served
    assert sha256(body(api.get(f"{base}/download/"))) == release.manifest["zip"]["sha256"]


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


# --------------------------------------------------------------------------- issue 26: any id, no cached rows


@pytest.mark.parametrize("external_id", ["site/B 01", "a/b/c", "x?y#z", "name with ünïcödé/%2F"])
def test_a_subject_whose_id_holds_slashes_or_url_characters_is_shown_and_erased(
    project, lead, client, client_for, external_id
):
    from django.urls import reverse

    subject = Subject.objects.create(project=project, external_id=external_id)
    images = [
        image_create_from_bytes(
            project=project, filename=f"s{k}.png", data=png_bytes(colour=(30 * k, 80, 60)), subject=subject
        )
        for k in (1, 2)
    ]
    client.force_login(lead)
    detail = client.get(f"/images/{images[0].pk}/")
    assert detail.status_code == 200  # was a 500: the erase link could not be built
    url = reverse("subject-erase", args=[project.pk, external_id])
    assert url in detail.content.decode().replace("&amp;", "&")
    page = client.get(url)
    assert page.status_code == 200 and "2 image(s)" in page.content.decode()
    api_url = reverse("subject-erase-api", args=[project.pk, external_id])
    answer = client_for(lead).post(api_url, {"confirm": external_id}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["subject"] == external_id
    assert not Subject.objects.filter(project=project, external_id=external_id).exists()
    assert not Image.objects.filter(pk__in=[i.pk for i in images]).exists()


def test_an_erasure_removes_the_cached_rows_of_every_lead_page(world, lead, django_capture_on_commit_callbacks):
    from django.core.cache import cache

    from labeling.services.cache_purge import PROJECT_DATA_PREFIXES
    from labeling.services.releases import release_readiness_cached

    project = world["project"]
    # A real cached page (the release readiness) and an entry under every prefix, as the pages write them.
    release_readiness_cached(project, compute=True)
    planted = {f"{prefix}:{project.pk}:test": {"external_id": GONE} for prefix in PROJECT_DATA_PREFIXES}
    cache.set_many(planted, 3600)
    kept = {"consensus:v2:deleted:999": 3, "unrelated:key": "stays"}
    cache.set_many(kept, 3600)
    assert all(cache.get(key) is not None for key in planted)
    with django_capture_on_commit_callbacks(execute=True):
        erasure.subject_erase(project=project, external_id=GONE, user=lead, confirm=GONE)
    assert [key for key in planted if cache.get(key) is not None] == []
    assert cache.get_many(list(kept)) == kept
    from labeling.services.cache_purge import project_caches_purge

    assert project_caches_purge() == 0  # nothing of the prefixes is left to find
