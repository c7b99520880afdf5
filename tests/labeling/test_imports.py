"""Imports (labeling.services.imports): uploads, zip archives, manifests, reports."""

import io
import json
import os
import stat
import zipfile
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from PIL import Image as PILImage

from labeling.models import Image, ImportBatch, ImportItem, Subject
from labeling.services.imports import import_files, import_manifest, import_zip

COLOURS = [(200, 40, 40), (40, 200, 40), (40, 40, 200), (200, 200, 40), (40, 200, 200)]


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return Path(settings.MEDIA_ROOT)


@pytest.fixture
def import_root(tmp_path):
    root = tmp_path / "imports"
    root.mkdir()
    with override_settings(FAIRTONE={**django_settings.FAIRTONE, "IMPORT_ROOTS": [str(root)]}):
        yield root


def limits(**overrides):
    return override_settings(FAIRTONE={**django_settings.FAIRTONE, **overrides})


def photo(i: int = 0, fmt: str = "JPEG", size=(32, 24)) -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", size, COLOURS[i % len(COLOURS)]).save(buffer, format=fmt)
    return buffer.getvalue()


def mask_png(size=(32, 24)) -> bytes:
    buffer = io.BytesIO()
    PILImage.new("L", size, 255).save(buffer, format="PNG")
    return buffer.getvalue()


def zip_bytes(members, compression=zipfile.ZIP_DEFLATED) -> io.BytesIO:
    """members: (name or ZipInfo, bytes) pairs."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, data in members:
            archive.writestr(name, data)
    buffer.seek(0)
    return buffer


def stored_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def outcomes(batch: ImportBatch) -> list[tuple]:
    return [(item.row, item.outcome) for item in batch.items.order_by("id")]


def assert_refused(batch: ImportBatch, project, media_root, *fragments) -> None:
    batch.refresh_from_db()
    assert batch.status == ImportBatch.Status.FAILED
    for fragment in fragments:
        assert fragment in batch.error
    assert not batch.items.exists()
    assert not Image.objects.filter(project=project).exists()
    assert not Subject.objects.filter(project=project).exists()
    assert stored_files(media_root) == []


def assert_stored_files_match_images(project, media_root) -> None:
    """Every file on disk belongs to an image row (nothing half-imported)."""
    expected = set()
    for image in Image.objects.filter(project=project):
        expected.add(Path(image.original.path))
        if image.mask:
            expected.add(Path(image.mask.path))
    assert set(stored_files(media_root)) == expected


# --- browser uploads ------------------------------------------------------------------------


def test_import_files_reports_each_file(project, lead, media_root):
    files = [
        ("a.jpg", io.BytesIO(photo(0))),
        ("b.png", SimpleUploadedFile("b.png", photo(1, "PNG"))),
        ("c.webp", io.BytesIO(photo(2, "WEBP"))),
        ("again.jpg", io.BytesIO(photo(0))),
        ("note.jpg", io.BytesIO(b"just some text\n")),
        ("readme.txt", io.BytesIO(b"hello")),
    ]
    batch = import_files(project=project, files=files, user=lead)
    assert batch.status == ImportBatch.Status.DONE
    assert batch.kind == ImportBatch.Kind.UPLOAD
    assert (batch.n_imported, batch.n_duplicate, batch.n_rejected) == (3, 1, 2)
    items = list(batch.items.order_by("id"))
    assert [i.outcome for i in items] == ["imported"] * 3 + [
        "duplicate",
        "rejected",
        "rejected",
    ]
    assert items[3].image == items[0].image
    assert "plain text" in items[4].reason
    assert ".txt" in items[5].reason
    assert set(Image.objects.filter(project=project).values_list("external_id", flat=True)) == {
        "a",
        "b",
        "c",
    }
    assert all(i.import_batch == batch for i in Image.objects.filter(project=project))
    assert_stored_files_match_images(project, media_root)


def test_import_files_size_limit_uses_the_uploaded_size(project, lead, media_root):
    with limits(MAX_IMAGE_BYTES=100):
        batch = import_files(
            project=project,
            files=[("a.jpg", SimpleUploadedFile("a.jpg", photo()))],
            user=lead,
        )
    assert outcomes(batch) == [(None, "rejected")]
    assert "size limit" in batch.items.get().reason
    assert stored_files(media_root) == []


# --- zip archives ----------------------------------------------------------------------------


def test_import_zip_imports_images_and_ignores_clutter(project, lead, media_root):
    archive = zip_bytes(
        [
            ("shoot/", b""),
            ("shoot/p1.jpg", photo(0)),
            ("shoot/deep/p2.PNG", photo(1, "PNG")),
            ("__MACOSX/shoot/._p1.jpg", b"\x00\x05\x16\x07"),
            (".DS_Store", b"\x00\x00"),
            ("shoot/.hidden.jpg", b"nothing"),
            ("shoot/notes.txt", b"hello"),
            ("shoot/fake.jpg", b"%PDF-1.4"),
        ]
    )
    batch = import_zip(project=project, fileobj=archive, user=lead, name="shoot.zip")
    assert batch.status == ImportBatch.Status.DONE
    assert batch.kind == ImportBatch.Kind.ZIP
    assert batch.source_name == "shoot.zip"
    assert (batch.n_imported, batch.n_duplicate, batch.n_rejected) == (2, 0, 2)
    by_name = {item.filename: item for item in batch.items.all()}
    assert set(by_name) == {
        "shoot/p1.jpg",
        "shoot/deep/p2.PNG",
        "shoot/notes.txt",
        "shoot/fake.jpg",
    }
    assert "PDF" in by_name["shoot/fake.jpg"].reason
    assert by_name["shoot/deep/p2.PNG"].image.original_filename == "p2.PNG"
    assert_stored_files_match_images(project, media_root)


def test_not_a_zip_is_refused(project, lead, media_root):
    batch = import_zip(project=project, fileobj=io.BytesIO(b"PK but not really"), user=lead)
    assert_refused(batch, project, media_root, "not a readable zip")


@pytest.mark.parametrize(
    "evil",
    [
        "../evil.jpg",
        "shoot/../../evil.jpg",
        "/etc/evil.jpg",
        "C:/evil.jpg",
        "..\\evil.jpg",
    ],
)
def test_unsafe_paths_refuse_the_whole_archive(project, lead, media_root, evil):
    archive = zip_bytes([("good.jpg", photo(0)), (zipfile.ZipInfo(evil), photo(1))])
    assert zipfile.ZipFile(archive).namelist()[1] == evil  # the name really is in the archive
    archive.seek(0)
    batch = import_zip(project=project, fileobj=archive, user=lead)
    assert_refused(batch, project, media_root, "unsafe path", evil)


def test_symlink_member_is_refused(project, lead, media_root):
    link = zipfile.ZipInfo("link.jpg")
    link.create_system = 3
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    archive = zip_bytes([("good.jpg", photo(0)), (link, b"/etc/passwd")])
    batch = import_zip(project=project, fileobj=archive, user=lead)
    assert_refused(batch, project, media_root, "symbolic link")


def test_too_many_members_is_refused(project, lead, media_root):
    archive = zip_bytes([(f"p{i}.jpg", photo(i)) for i in range(4)])
    with limits(MAX_ARCHIVE_MEMBERS=3):
        batch = import_zip(project=project, fileobj=archive, user=lead)
    assert_refused(batch, project, media_root, "4 entries", "limit is 3")


def test_archive_over_the_total_size_is_refused(project, lead, media_root):
    archive = zip_bytes([(f"p{i}.jpg", photo(i)) for i in range(3)])
    with limits(MAX_ARCHIVE_BYTES=1000):
        batch = import_zip(project=project, fileobj=archive, user=lead)
    assert_refused(batch, project, media_root, "unpacks to", "1,000")


def test_zip_bomb_member_is_refused(project, lead, media_root):
    archive = zip_bytes([("good.jpg", photo(0)), ("flat.bmp", b"\x00" * (4 * 1024 * 1024))])
    info = zipfile.ZipFile(archive).getinfo("flat.bmp")
    assert info.file_size / info.compress_size > 200  # it really is highly compressed
    archive.seek(0)
    batch = import_zip(project=project, fileobj=archive, user=lead)
    assert_refused(batch, project, media_root, "zip bomb", "flat.bmp")


def test_member_lying_about_its_size_is_rejected(project, lead, media_root):
    # The headers claim 100 bytes; the member really holds a whole photo. Only the
    # claimed size is decompressed, and the checksum then gives the lie away.
    data = photo(0, size=(200, 150))
    archive = zip_bytes([("liar.jpg", data), ("good.jpg", photo(1))], zipfile.ZIP_STORED)
    raw = bytearray(archive.getvalue())
    for signature, size_offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = raw.find(signature)
        raw[at + size_offset : at + size_offset + 4] = (100).to_bytes(4, "little")
    batch = import_zip(project=project, fileobj=io.BytesIO(bytes(raw)), user=lead)
    assert batch.status == ImportBatch.Status.DONE
    by_name = {item.filename: item for item in batch.items.all()}
    assert by_name["liar.jpg"].outcome == ImportItem.Outcome.REJECTED
    assert "damaged" in by_name["liar.jpg"].reason
    assert by_name["good.jpg"].outcome == ImportItem.Outcome.IMPORTED
    assert_stored_files_match_images(project, media_root)


def test_member_over_the_image_size_limit_is_rejected(project, lead, media_root):
    big = photo(0, size=(200, 150))
    archive = zip_bytes([("big.jpg", big), ("small.png", photo(1, "PNG", size=(4, 4)))])
    with limits(MAX_IMAGE_BYTES=len(big) - 1):
        batch = import_zip(project=project, fileobj=archive, user=lead)
    assert outcomes(batch) == [(None, "rejected"), (None, "imported")]
    assert "size limit" in batch.items.get(filename="big.jpg").reason
    assert_stored_files_match_images(project, media_root)


def test_encrypted_member_is_refused(project, lead, media_root):
    archive = zip_bytes([("good.jpg", photo(0)), ("secret.jpg", photo(1))], zipfile.ZIP_STORED)
    raw = bytearray(archive.getvalue())
    # Set the "encrypted" flag (bit 0) of the second member in its local header
    # and in the central directory, as a password-protected archive has it.
    local = raw.find(b"PK\x03\x04", raw.find(b"PK\x03\x04") + 4)
    central = raw.find(b"PK\x01\x02", raw.find(b"PK\x01\x02") + 4)
    raw[local + 6] |= 0x01
    raw[central + 8] |= 0x01
    with pytest.raises(RuntimeError, match="encrypted"):  # Python agrees it is encrypted
        zipfile.ZipFile(io.BytesIO(bytes(raw))).read("secret.jpg")
    batch = import_zip(project=project, fileobj=io.BytesIO(bytes(raw)), user=lead)
    assert_refused(batch, project, media_root, "encrypted", "secret.jpg")


def test_zip_with_manifest_uses_it(project, lead, media_root):
    manifest = (
        "file,image_id,subject_id,gender,height_cm,mask,mask_kind\n"
        "imgs/a.jpg,A1,S1,female,172,masks/a.png,silhouette\n"
        "imgs/b.jpg,B1,S2,male,,,\n"
    )
    archive = zip_bytes(
        [
            ("manifest.csv", manifest.encode()),
            ("imgs/a.jpg", photo(0)),
            ("imgs/b.jpg", photo(1)),
            ("imgs/extra.jpg", photo(2)),
            ("masks/a.png", mask_png()),
        ]
    )
    batch = import_zip(project=project, fileobj=archive, user=lead)
    assert batch.status == ImportBatch.Status.DONE
    assert outcomes(batch) == [(2, "imported"), (3, "imported"), (None, "rejected")]
    assert "not listed in manifest.csv" in batch.items.get(row=None).reason
    a1 = Image.objects.get(project=project, external_id="A1")
    assert a1.subject.external_id == "S1"
    assert a1.mask_kind == "silhouette" and a1.mask
    assert Subject.objects.get(project=project, external_id="S1").attributes == {
        "gender": "female",
        "height_cm": 172,
    }
    assert Subject.objects.get(project=project, external_id="S2").attributes == {"gender": "male"}
    assert_stored_files_match_images(project, media_root)


def test_zip_with_two_manifests_is_refused(project, lead, media_root):
    archive = zip_bytes(
        [
            ("manifest.csv", b"file\na.jpg\n"),
            ("manifest.jsonl", b'{"file": "a.jpg"}\n'),
            ("a.jpg", photo()),
        ]
    )
    batch = import_zip(project=project, fileobj=archive, user=lead)
    assert_refused(batch, project, media_root, "both manifest.csv and manifest.jsonl")


# --- manifests -------------------------------------------------------------------------------


def write_photos(folder: Path, names) -> None:
    for i, name in enumerate(names):
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(photo(i))


def run_manifest(project, lead, folder, text, name="manifest.csv"):
    data = text.encode() if isinstance(text, str) else text
    return import_manifest(
        project=project,
        manifest=io.BytesIO(data),
        user=lead,
        name=name,
        folder=str(folder),
    )


def test_manifest_from_a_server_folder(project, lead, media_root, import_root):
    write_photos(import_root, ["p/a.jpg", "p/b.jpg", "p/c.jpg"])
    text = (
        "\ufefffile,image_id,subject_id,gender,body_shape,pose,age\n"
        "p/a.jpg,A,S1,female,pear,front,31\n"
        "p/b.jpg,B,S1,female,,side,\n"
        "p/c.jpg,,,,,,\n"
    )
    batch = run_manifest(project, lead, import_root, text)
    assert batch.status == ImportBatch.Status.DONE
    assert batch.kind == ImportBatch.Kind.MANIFEST
    assert outcomes(batch) == [(2, "imported"), (3, "rejected"), (4, "imported")]
    # pose differs between the subject's two photos: a conflict, the later row loses.
    assert "subject 'S1' has pose='front' in row 2 but pose='side' here" in (batch.items.get(row=3).reason)
    assert Subject.objects.get(project=project, external_id="S1").attributes == {
        "gender": "female",
        "body_shape": "pear",
        "pose": "front",
        "age": 31,
    }
    assert Image.objects.get(project=project, external_id="c").subject is None
    assert_stored_files_match_images(project, media_root)


def test_manifest_per_image_attribute_columns(project, lead, import_root):
    write_photos(import_root, ["a.jpg", "b.jpg"])
    text = "filename,subject_id,gender,image.pose\na.jpg,S1,f,front\nb.jpg,S1,f,side\n"
    batch = run_manifest(project, lead, import_root, text)
    assert outcomes(batch) == [(2, "imported"), (3, "imported")]
    assert Image.objects.get(project=project, external_id="b").attributes == {"pose": "side"}
    assert Subject.objects.get(project=project, external_id="S1").attributes == {"gender": "f"}


def test_manifest_attributes_merge_into_existing_subjects(project, lead, import_root):
    # (x, y, width and height are a person's box since issue 23: other names here.)
    Subject.objects.create(project=project, external_id="S1", attributes={"gender": "f", "age": 1})
    write_photos(import_root, ["a.jpg"])
    run_manifest(project, lead, import_root, "image,subject_id,age,bmi\na.jpg,S1,2,2.5\n")
    assert Subject.objects.get(project=project, external_id="S1").attributes == {
        "gender": "f",
        "age": 2,
        "bmi": 2.5,
    }


def test_manifest_without_file_column(project, lead, media_root, import_root):
    batch = run_manifest(project, lead, import_root, "name,gender\na.jpg,f\n")
    assert_refused(
        batch,
        project,
        media_root,
        "the manifest has no 'file' column; columns found: 'name', 'gender'",
    )


def test_manifest_row_errors_are_reported_per_row(project, lead, media_root, import_root):
    write_photos(import_root, ["a.jpg", "b.jpg", "c.jpg"])
    (import_root / "broken.jpg").write_bytes(b"not a photo at all")
    text = (
        "file,image_id,subject_id,gender\n"
        "a.jpg,A,S1,f\n"  # 2 imported
        "x.jpg,X,S9,f\n"  # 3 unknown file
        "b.jpg,A,S2,m\n"  # 4 duplicate image id
        "a.jpg,A,S1,f\n"  # 5 duplicate row
        "c.jpg,C,S1,m\n"  # 6 conflicting attribute
        "broken.jpg,BR,S7,f\n"  # 7 not an image: leaves no subject S7
        "../outside.jpg,O,,\n"  # 8 escapes the folder
    )
    batch = run_manifest(project, lead, import_root, text)
    assert batch.status == ImportBatch.Status.DONE
    reasons = {item.row: item.reason for item in batch.items.all()}
    assert reasons[3] == "row 3: file 'x.jpg' is not in the folder"
    assert "image id 'A' is already used by row 2" in reasons[4]
    assert "repeats row 2" in reasons[5]
    assert "subject 'S1' has gender='f' in row 2" in reasons[6]
    assert "not an image" in reasons[7]
    assert "'..'" in reasons[8]
    assert outcomes(batch)[0] == (2, "imported")
    assert (batch.n_imported, batch.n_duplicate, batch.n_rejected) == (1, 0, 6)
    assert not Subject.objects.filter(project=project, external_id__in=["S7", "S9"]).exists()
    assert_stored_files_match_images(project, media_root)


def test_formula_like_cells_are_kept_as_text_with_a_warning(project, lead, import_root):
    write_photos(import_root, ["a.jpg"])
    text = 'file,subject_id,note,delta\na.jpg,S1,"=HYPERLINK(""http://x"")",-3\n'
    batch = run_manifest(project, lead, import_root, text)
    item = batch.items.get()
    assert item.outcome == ImportItem.Outcome.IMPORTED
    assert "'note'" in item.reason and "formula" in item.reason
    assert "'delta'" not in item.reason  # a negative number is not a formula
    assert Subject.objects.get(project=project, external_id="S1").attributes == {
        "note": '=HYPERLINK("http://x")',
        "delta": -3,
    }


def test_rejected_row_leaves_nothing_behind(project, lead, media_root, import_root):
    write_photos(import_root, ["a.jpg"])
    (import_root / "m.png").write_bytes(mask_png(size=(10, 10)))
    batch = run_manifest(project, lead, import_root, "file,subject_id,gender,mask\na.jpg,S1,f,m.png\n")
    item = batch.items.get()
    assert item.outcome == ImportItem.Outcome.REJECTED
    assert "mask is 10x10 but the image is 32x24" in item.reason
    assert not Subject.objects.filter(project=project).exists()
    assert not Image.objects.filter(project=project).exists()
    assert stored_files(media_root) == []


def test_duplicate_content_row(project, lead, import_root):
    write_photos(import_root, ["a.jpg"])
    (import_root / "copy.jpg").write_bytes((import_root / "a.jpg").read_bytes())
    batch = run_manifest(project, lead, import_root, "file\na.jpg\ncopy.jpg\n")
    assert outcomes(batch) == [(2, "imported"), (3, "duplicate")]
    assert batch.n_duplicate == 1


def test_manifest_jsonl_by_name_and_by_content(project, lead, import_root):
    write_photos(import_root, ["a.jpg", "b.jpg"])
    lines = [
        {"file": "a.jpg", "subject_id": "S1", "height_cm": 180.5, "tag": None},
        {"file": "b.jpg", "subject_id": "S2", "tags": ["x"]},
    ]
    text = "\n".join(json.dumps(line) for line in lines) + "\n"
    batch = run_manifest(project, lead, import_root, text, name="m.jsonl")
    assert outcomes(batch) == [(1, "imported"), (2, "rejected")]
    assert "only text and numbers" in batch.items.get(row=2).reason
    assert Subject.objects.get(external_id="S1", project=project).attributes == {"height_cm": 180.5}
    write_photos(import_root, ["c.jpg", "d.jpg", "e.jpg"])
    sniffed = run_manifest(project, lead, import_root, '{"file": "e.jpg"}\n', name="upload")
    assert outcomes(sniffed) == [(1, "imported")]


def test_too_many_rows(project, lead, media_root, import_root):
    write_photos(import_root, ["a.jpg", "b.jpg", "c.jpg"])
    with limits(MAX_MANIFEST_ROWS=2, IMPORT_ROOTS=[str(import_root)]):
        batch = run_manifest(project, lead, import_root, "file\na.jpg\nb.jpg\nc.jpg\n")
    assert_refused(batch, project, media_root, "more than 2 rows")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("", "is empty"), ("file,subject_id\n", "no rows"), ("\n\n", "empty")],
)
def test_empty_manifest(project, lead, media_root, import_root, text, fragment):
    batch = run_manifest(project, lead, import_root, text)
    assert_refused(batch, project, media_root, fragment)


def test_manifest_in_a_wrong_encoding(project, lead, media_root, import_root):
    data = "file,city\na.jpg,Zürich\n".encode("latin-1")
    batch = run_manifest(project, lead, import_root, data)
    offset = data.index("ü".encode("latin-1"))
    assert_refused(batch, project, media_root, "not UTF-8", f"offset {offset} ", "(line 2)")


def test_folder_outside_the_import_roots_is_refused(project, lead, media_root, tmp_path):
    outside = tmp_path / "elsewhere"
    write_photos(outside, ["a.jpg"])
    with limits(IMPORT_ROOTS=[str(tmp_path / "allowed")]):
        batch = run_manifest(project, lead, outside, "file\na.jpg\n")
    assert_refused(batch, project, media_root, "not inside an import folder")


def test_symlink_out_of_the_folder_is_rejected(project, lead, media_root, import_root, tmp_path):
    secret = tmp_path / "secret.jpg"
    secret.write_bytes(photo(3))
    os.symlink(secret, import_root / "link.jpg")
    write_photos(import_root, ["a.jpg"])
    batch = run_manifest(project, lead, import_root, "file\nlink.jpg\na.jpg\n")
    assert outcomes(batch) == [(2, "rejected"), (3, "imported")]
    assert "out of the folder" in batch.items.get(row=2).reason
    assert_stored_files_match_images(project, media_root)


def test_manifest_with_an_archive(project, lead, media_root):
    archive = zipfile.ZipFile(zip_bytes([("d/a.jpg", photo(0))]))
    batch = import_manifest(
        project=project,
        manifest=io.BytesIO(b"file\nd/a.jpg\nd/missing.jpg\n"),
        user=lead,
        archive=archive,
    )
    assert outcomes(batch) == [(2, "imported"), (3, "rejected")]
    assert batch.items.get(row=3).reason == "row 3: file 'd/missing.jpg' is not in the archive"
    assert_stored_files_match_images(project, media_root)


def test_mask_problems_reject_their_row_only_and_listed_files_count_as_used(project, lead, media_root):
    """Each step of a manifest row can reject it; the files a row named are never reported as unlisted."""
    manifest = (
        "file,mask\n"
        "a.jpg,masks/missing.png\n"  # row 2: the mask is not in the archive
        "b.jpg,../b.png\n"  # row 3: the mask path climbs out
        "c.jpg,masks/c.png\n"  # row 4: imported with its mask
    )
    members = [
        ("manifest.csv", manifest.encode()),
        ("a.jpg", photo(0)),
        ("b.jpg", photo(1)),
        ("c.jpg", photo(2)),
        ("masks/c.png", mask_png()),
        ("extra.jpg", photo(3)),
    ]
    batch = import_zip(project=project, fileobj=zip_bytes(members), user=lead)
    by_row = {item.row: item for item in batch.items.all()}
    assert by_row[2].reason == "row 2: mask 'masks/missing.png' is not in the archive"
    assert by_row[2].filename == "a.jpg"
    assert by_row[3].reason == "row 3: mask '../b.png' climbs out of the folder with '..'"
    assert by_row[4].outcome == "imported" and by_row[4].image.mask_kind == ""
    assert by_row[4].image.mask
    unlisted = [item.filename for item in batch.items.filter(row__isnull=True)]
    assert unlisted == ["extra.jpg"]  # a.jpg and b.jpg were named by rows, masks/c.png used by row 4
    assert_stored_files_match_images(project, media_root)
