"""Hostile manifests (issue 26): wide headers, huge lines, slow files are refused quickly, with a 400 naming
what was too big; the duplicate-column check is linear."""

import io
import json
import zipfile

import pytest
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from PIL import Image as PILImage

from labeling.models import ImportBatch
from labeling.services.imports import ImportRefused
from labeling.services.imports.manifest import parse_manifest


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")


def limits(**overrides):
    return override_settings(FAIRTONE={**django_settings.FAIRTONE, **overrides})


def archive() -> SimpleUploadedFile:
    image = io.BytesIO()
    PILImage.new("RGB", (8, 8), (200, 40, 40)).save(image, format="PNG")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("a.png", image.getvalue())
    return SimpleUploadedFile("a.zip", buffer.getvalue())


def post_manifest(client, project, data: bytes, name: str = "m.csv"):
    return client.post(
        f"/api/projects/{project.id}/imports/",
        {"manifest": SimpleUploadedFile(name, data), "archive": archive()},
        format="multipart",
    )


def wide_header(n: int) -> str:
    return ",".join(["file", *(f"c{i}" for i in range(n - 1))])


def test_a_repeated_column_is_named_among_thousands():
    # Beyond the default cap: 5,001 columns, one name repeated (in another case) at the end. How long the
    # check takes (linear: it took 1.3-1.9 s when it was quadratic) is measured in bench/bench_hostile_uploads.py.
    header = wide_header(5_000) + ",C7"
    data = f"{header}\na.png\n".encode()
    with limits(MAX_MANIFEST_COLUMNS=10_000):
        with pytest.raises(ImportRefused, match="names column 'C7' twice"):
            parse_manifest(data, "m.csv")


def test_a_5001_column_header_is_a_400_naming_the_column_limit(db, project, lead, client_for):
    r = post_manifest(client_for(lead), project, f"{wide_header(5_001)}\na.png\n".encode())
    assert r.status_code == 400, r.content[:300]
    assert "more than 500 columns" in str(r.json())
    batch = ImportBatch.objects.get(project=project)
    assert batch.status == ImportBatch.Status.FAILED and "500 columns" in batch.error
    assert not project.images.exists()


def test_a_million_column_header_is_refused_at_once(db, project, lead, client_for):
    data = f"{wide_header(1_000_000)}\na.png\n".encode()  # about 6.9 MB (timed in bench/bench_hostile_uploads.py)
    with pytest.raises(ImportRefused, match="more than 500 columns"):
        parse_manifest(data, "m.csv")
    r = post_manifest(client_for(lead), project, data)
    assert r.status_code == 400 and "500 columns" in str(r.json())


def test_a_huge_line_is_a_400_naming_the_line(db, project, lead, client_for):
    data = b"file,note\na.png," + b"x" * 100_000 + b"\n"
    r = post_manifest(client_for(lead), project, data)
    assert r.status_code == 400, r.content[:300]
    assert "line 2 is longer than 65,536 characters" in str(r.json())
    assert not project.images.exists()
    # A CSV line of many short cells is refused before the CSV reader splits it.
    with pytest.raises(ImportRefused, match="line 2 is longer"):
        parse_manifest(b"file\n" + b"1," * 2_000_000 + b"\n", "m.csv")
    # JSON Lines too: one object with too many keys, one line too long.
    wide = json.dumps({"file": "a.png", **{f"k{i}": 1 for i in range(600)}}).encode()
    with pytest.raises(ImportRefused, match="more than 500 columns"):
        parse_manifest(wide + b"\n", "m.jsonl")
    long = json.dumps({"file": "a.png", "note": "x" * 70_000}).encode()
    with pytest.raises(ImportRefused, match="line 1 is longer"):
        parse_manifest(long + b"\n", "m.jsonl")


def test_reading_a_manifest_has_a_time_budget(db, project, lead, client_for):
    rows = "".join(f"a{i}.png,{i}\n" for i in range(1_000))
    with limits(MANIFEST_TIME_BUDGET_SECONDS=-1):
        r = post_manifest(client_for(lead), project, f"file,n\n{rows}".encode())
    assert r.status_code == 400 and "took too long" in str(r.json())
    with limits(MANIFEST_TIME_BUDGET_SECONDS=-1), pytest.raises(ImportRefused, match="took too long"):
        parse_manifest(b'{"file": "a.png"}\n', "m.jsonl")


def test_an_ordinary_manifest_still_imports(db, project, lead, client_for):
    r = post_manifest(client_for(lead), project, b"file,subject_id,age\na.png,S1,40\n")
    assert r.status_code == 201 and r.json()["status"] == "done", r.json()
    assert project.images.count() == 1
