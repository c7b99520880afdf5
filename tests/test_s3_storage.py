# ruff: noqa: F811  (the fixtures of tests/s3.py are imported by name and then used as parameters)
"""Issue 25: media in an S3 bucket. The app talks HTTP S3 to moto's standalone server (tests/s3.py) on a free
local port: imports, baselines, releases, evaluations, downloads, erasure and project deletion all go through
the bucket, and nothing is written under ``MEDIA_ROOT`` (an empty folder made read-only, checked empty after
each test by the ``s3_media`` fixture)."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import Image as PILImage

from labeling.models import EvaluationRun, Image, ImageBaseline, ImportBatch, Release
from labeling.services import erasure, project_lifecycle
from labeling.services import evaluations as evaluation_services
from labeling.services import releases as release_services
from labeling.services.baselines import baseline_image_ensure
from labeling.services.imports import import_zip
from tests.factories import UserFactory
from tests.labeling.helpers import open_calibration_1, run_tasks_here, submit
from tests.s3 import s3_media, s3_server  # noqa: F401  (fixtures)

# Each test runs against a moto S3 server (tests/s3.py): the slow tier (CI runs it, bin/test --fast skips it).
pytestmark = [pytest.mark.django_db, pytest.mark.slow]

# Monk Skin Tone 5 (#d7bd96): published ITA 50.32 degrees (D65, 2 degree observer).
MST5 = (0xD7, 0xBD, 0x96)
MST5_ITA = 50.32
GONE, KEPT = "subject-gone", "subject-kept"


@pytest.fixture(autouse=True)
def _here(monkeypatch):
    run_tasks_here(monkeypatch)


def png(colour, size=(48, 36), mode="RGB") -> bytes:
    buffer = io.BytesIO()
    PILImage.new(mode, size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def archive_with_manifest(n: int = 6) -> io.BytesIO:
    """``n`` MST 5 swatches (three of subject GONE, one subject each for the others), each with a skin mask, and a manifest naming them."""
    rows = ["file,image_id,subject_id,gender,mask,mask_kind"]
    members = []
    for i in range(n):
        subject = GONE if i < 3 else f"{KEPT}-{i}"
        gender = "woman" if subject == GONE or i % 2 else "man"
        rows.append(f"photos/p{i}.png,IMG{i:02d},{subject},{gender},masks/p{i}.png,skin")
        members.append((f"photos/p{i}.png", png(MST5, (48 + i, 36))))
        members.append((f"masks/p{i}.png", png(255, (48 + i, 36), mode="L")))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("manifest.csv", "\n".join(rows) + "\n")
        for name, data in members:
            archive.writestr(name, data)
    buffer.seek(0)
    return buffer


def imported(project, lead, s3, django_capture_on_commit_callbacks, n: int = 6):
    with django_capture_on_commit_callbacks(execute=True):  # derivatives and baselines, in this process
        batch = import_zip(project=project, fileobj=archive_with_manifest(n), user=lead)
    assert batch.status == ImportBatch.Status.DONE
    assert [(i.outcome, i.reason) for i in batch.items.exclude(outcome="imported")] == []
    return list(Image.objects.filter(project=project).order_by("external_id"))


def labelled_and_released(project, lead, labelers, n: int = 6):
    phase = open_calibration_1(project, size=n, cal1=n, labels_per_image=4)
    for m in labelers:
        for a in phase.assignments.filter(labeler=m):
            submit(phase, m, a.image_id, tones=[1 + a.image_id % 10])
    release = release_services.release_request(
        project=project,
        user=lead,
        rule={"include": dict.fromkeys(release_services.CATEGORIES, True)},
        card_text={name: f"The {name}." for name in release_services.CARD_FIELDS},
    )
    release = release_services.release_build(release)
    assert release.status == Release.Status.PUBLISHED, release.error
    return release


def test_the_storage_is_the_bucket_and_it_is_private(s3_media):
    from django.core.files.storage import storages

    assert type(storages["default"]).__name__ == "MediaS3Storage"
    name = default_storage.save("probe/hello.txt", io.BytesIO(b"hello"))
    assert s3_media.names() == ["probe/hello.txt"]
    grants = s3_media.server.client().get_object_acl(Bucket=s3_media.bucket, Key=name)["Grants"]
    assert not [g for g in grants if "AllUsers" in g["Grantee"].get("URI", "")]  # nothing public-read
    default_storage.delete(name)
    assert s3_media.names() == []


def test_an_archive_with_a_manifest_lands_in_the_bucket_and_baselines_read_it_from_there(
    s3_media, project, lead, django_capture_on_commit_callbacks
):
    images = imported(project, lead, s3_media, django_capture_on_commit_callbacks)
    assert len(images) == 6
    stored = set(s3_media.names())
    for image in images:
        assert {image.original.name, image.mask.name, image.display.name, image.thumbnail.name} <= stored
        assert image.original.name.startswith(f"projects/{project.pk}/originals/")
    rows = list(ImageBaseline.objects.filter(image__project=project))
    assert len(rows) == 6, "every imported image was measured from the bucket"
    for row in rows:
        assert row.status == ImageBaseline.Status.OK, row.error
        assert row.ita_median == pytest.approx(MST5_ITA, abs=0.02)
        assert row.overlay.name in stored
    # Measured again straight from the bucket, after a photo is replaced there by another tone.
    image = images[0]
    default_storage.delete(image.original.name)
    default_storage.save(image.original.name, io.BytesIO(png((0x3B, 0x2A, 0x1F), (image.width, image.height))))
    ImageBaseline.objects.filter(image=image).delete()
    row = baseline_image_ensure(image=image)
    assert row.status == ImageBaseline.Status.OK and row.ita_median < 0  # a dark tone: read from the bucket


def test_a_release_is_built_into_the_bucket_and_downloaded_after_the_role_check(
    s3_media, project, lead, labelers, client_for, django_capture_on_commit_callbacks
):
    imported(project, lead, s3_media, django_capture_on_commit_callbacks)
    release = labelled_and_released(project, lead, labelers)
    prefix = f"releases/{project.pk}/"
    stored = s3_media.names(prefix)
    zip_name = release_services.release_zip_name(release)
    assert zip_name in stored and zip_name.endswith(".zip")
    assert {f"{prefix}v1/{name}" for name in release.manifest["files"]} <= set(stored)
    base = f"/api/projects/{project.pk}/releases/1"
    api = client_for(lead)
    got = api.get(f"{base}/download/")
    assert got.status_code == 200
    data = b"".join(got.streaming_content)
    assert int(got["Content-Length"]) == len(data)
    client = s3_media.server.client()
    assert data == client.get_object(Bucket=s3_media.bucket, Key=zip_name)["Body"].read()
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert any(n.endswith("/images.parquet") for n in archive.namelist())
    table = api.get(f"{base}/files/images.parquet")
    assert table.status_code == 200
    images = pq.read_table(io.BytesIO(b"".join(table.streaming_content))).to_pandas()
    finals = dict(zip(images["image_id"], images["final_value"], strict=True))
    assert len(images) == 6 and finals == {i.pk: 1.0 + i.pk % 10 for i in Image.objects.filter(project=project)}
    for bad in ("../../../etc/passwd", "v1/images.csv", "images.parquet/../manifest.json"):
        assert api.get(f"{base}/files/{bad}").status_code == 404, bad
    outsider = client_for(UserFactory(username="outsider"))
    assert outsider.get(f"{base}/download/").status_code == 404
    labeler = client_for(labelers[0].user)
    assert labeler.get(f"{base}/download/").status_code == 403
    assert s3_media.names("releases/") == stored  # the local working folder was uploaded, nothing else


def test_an_evaluation_upload_and_its_report_live_in_the_bucket(
    s3_media, project, lead, labelers, client_for, django_capture_on_commit_callbacks
):
    images = imported(project, lead, s3_media, django_capture_on_commit_callbacks, n=24)
    release = labelled_and_released(project, lead, labelers, n=24)
    rng = np.random.default_rng(3)
    results = pd.DataFrame({"external_id": [i.external_id for i in images], "error": rng.normal(1, 0.1, 24)})
    upload = SimpleUploadedFile("results.csv", results.to_csv(index=False).encode(), content_type="text/csv")
    run = evaluation_services.evaluation_create(
        project=project,
        user=lead,
        release=release,
        upload=upload,
        name="s3",
        options={"permutations": 9, "band_permutations": 99, "uncertainty_draws": 5, "min_samples": 2},
    )
    prefix = f"evaluations/{project.pk}/{run.pk}/"
    assert f"{prefix}joined.parquet" in s3_media.names(prefix)
    assert run.predictions.name in s3_media.names(f"evaluations/{project.pk}/")
    run = evaluation_services.evaluation_run(EvaluationRun.objects.get(pk=run.pk))
    assert run.status == EvaluationRun.Status.DONE, run.error
    assert {f"{prefix}report/report.json", f"{prefix}report/report.html"} <= set(s3_media.names(prefix))
    got = client_for(lead).get(f"/api/projects/{project.pk}/evaluations/{run.pk}/report/")
    assert got.status_code == 200
    assert b'"skin_tone"' in b"".join(got.streaming_content)


def test_erasure_and_project_deletion_remove_the_objects(
    s3_media, project, lead, labelers, django_capture_on_commit_callbacks
):
    images = imported(project, lead, s3_media, django_capture_on_commit_callbacks)
    labelled_and_released(project, lead, labelers)
    gone = [i for i in images if i.subject.external_id == GONE]
    gone_names = {n for i in gone for n in (i.original.name, i.mask.name, i.display.name, i.thumbnail.name)}
    gone_names |= set(ImageBaseline.objects.filter(image__in=gone).values_list("overlay", flat=True))
    before = set(s3_media.names())
    assert gone_names <= before and len(gone_names) == 15
    with django_capture_on_commit_callbacks(execute=True):
        erasure.subject_erase(project=project, external_id=GONE, user=lead, confirm=GONE, reason="asked")
    after = set(s3_media.names())
    assert before - after == gone_names  # exactly the subject's objects, nothing else
    with django_capture_on_commit_callbacks(execute=True):
        project_lifecycle.project_delete(project=project, user=lead, confirm=True)
    assert s3_media.names() == []


def test_a_missing_object_is_a_clear_404_not_a_500(
    s3_media, project, lead, labelers, client_for, django_capture_on_commit_callbacks
):
    imported(project, lead, s3_media, django_capture_on_commit_callbacks)
    release = labelled_and_released(project, lead, labelers)
    default_storage.delete(release_services.release_zip_name(release))
    assert client_for(lead).get(f"/api/projects/{project.pk}/releases/1/download/").status_code == 404
