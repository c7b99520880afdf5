"""Release file writers (labeling.services.releases.bundle): tables, images, manifest, zip. No database."""

import csv
import io
import json
import math
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image as PILImage
from PIL import ImageCms, PngImagePlugin

from labeling.services.releases import bundle
from labeling.services.releases.bundle import (
    FORMATS,
    ImagefolderWriter,
    TableWriter,
    file_info,
    image_strip_metadata,
    manifest_write,
    neutralise_cell,
    zip_write,
)

RED = (220, 30, 40)
BLUE = (30, 40, 210)
SECRETS = (b"secret", b"Exif", b"52.0", b"GPS", b"xmpmeta")

SCHEMA = pa.schema(
    [
        ("image_id", pa.int64()),
        ("ita", pa.float64()),
        ("f32", pa.float32()),
        ("agreed", pa.bool_()),
        ("note", pa.string()),
        ("tags", pa.list_(pa.string())),
    ]
)


def sample_table() -> pa.Table:
    return pa.table(
        {
            # Columns in another order and a narrower int type than the schema: the writer selects and casts.
            "note": ["=1+1", "-3.5", None, 'a,"b"\nc', "", "@home"],
            "image_id": pa.array([1, 2, 3, 4, 5, 6], pa.int32()),
            "ita": [0.1, -3.5, float("nan"), None, 1e20, float("inf")],
            "f32": [0.1, 1.5, None, 3.0, 2e-7, -0.0],
            "agreed": [True, False, None, True, False, True],
            "tags": [["a", "=b"], [], None, ["x,y"], ["é"], ["+1"]],
        }
    )


EXPECTED_CSV = (
    "image_id,ita,f32,agreed,note,tags\n"
    """1,0.1,0.1,true,'=1+1,"[""a"",""=b""]"\n"""
    "2,-3.5,1.5,false,'-3.5,[]\n"
    "3,,,,,\n"
    '4,,3.0,true,"a,""b""\nc","[""x,y""]"\n'
    '5,1e+20,2e-07,false,"","[""é""]"\n'
    """6,,-0.0,true,'@home,"[""+1""]"\n"""
)
EXPECTED_JSONL = (
    '{"image_id":1,"ita":0.1,"f32":0.1,"agreed":true,"note":"=1+1","tags":["a","=b"]}\n'
    '{"image_id":2,"ita":-3.5,"f32":1.5,"agreed":false,"note":"-3.5","tags":[]}\n'
    '{"image_id":3,"ita":null,"f32":null,"agreed":null,"note":null,"tags":null}\n'
    '{"image_id":4,"ita":null,"f32":3.0,"agreed":true,"note":"a,\\"b\\"\\nc","tags":["x,y"]}\n'
    '{"image_id":5,"ita":1e+20,"f32":2e-07,"agreed":false,"note":"","tags":["é"]}\n'
    '{"image_id":6,"ita":null,"f32":-0.0,"agreed":true,"note":"@home","tags":["+1"]}\n'
)


def write_sample(out_dir: Path, batches=None) -> dict:
    with TableWriter(out_dir, "labels", SCHEMA) as writer:
        for batch in batches if batches is not None else [sample_table()]:
            writer.write(batch)
    return writer.close()


# --------------------------------------------------------------------------- tables


def test_table_is_written_as_csv_jsonl_and_parquet(tmp_path):
    files = write_sample(tmp_path)

    assert sorted(files) == ["labels.csv", "labels.jsonl", "labels.parquet"]
    for name, info in files.items():
        assert info == {**file_info(tmp_path / name), "rows": 6}
    assert (tmp_path / "labels.csv").read_bytes() == EXPECTED_CSV.encode("utf-8")  # no BOM, \n line ends
    assert (tmp_path / "labels.jsonl").read_bytes() == EXPECTED_JSONL.encode("utf-8")
    for line in EXPECTED_JSONL.splitlines():
        assert list(json.loads(line)) == SCHEMA.names

    table = pq.read_table(tmp_path / "labels.parquet")
    assert table.schema == SCHEMA  # typed as given: ints, floats, bools, strings, list<string>
    assert table.column("image_id").to_pylist() == [1, 2, 3, 4, 5, 6]
    assert table.column("note").to_pylist() == ["=1+1", "-3.5", None, 'a,"b"\nc', "", "@home"]  # not neutralised
    ita = table.column("ita").to_pylist()
    assert math.isnan(ita[2]) and ita[3] is None and ita[5] == math.inf  # Parquet keeps what the text formats cannot
    assert table.column("tags").to_pylist()[0] == ["a", "=b"]


def test_csv_is_rfc4180_and_guards_text_cells_only(tmp_path):
    write_sample(tmp_path)
    with open(tmp_path / "labels.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))

    assert rows[0] == SCHEMA.names
    assert [row[4] for row in rows[1:]] == ["'=1+1", "'-3.5", "", 'a,"b"\nc', "", "'@home"]
    assert rows[2][1] == "-3.5"  # a negative number stays a number
    assert json.loads(rows[1][5]) == ["a", "=b"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("=HYPERLINK(1)", "'=HYPERLINK(1)"),
        ("+1", "'+1"),
        ("-3.5", "'-3.5"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("plain", "plain"),
        ("a=b", "a=b"),
        ("", ""),
    ],
)
def test_neutralise_cell(text, expected):
    assert neutralise_cell(text) == expected


FLOATS = [0.1, 1 / 3, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, -0.0, float(2**53 + 2), 123456789.123]


def test_floats_are_shortest_round_trip_text(tmp_path):
    schema = pa.schema([("x", pa.float64()), ("y", pa.float32())])
    with TableWriter(tmp_path, "floats", schema) as writer:
        writer.write(
            pa.table(
                {"x": FLOATS, "y": pa.array(FLOATS[:2] + [1e-7, 3.4e38, 0.5, -0.0, 16777216.0, 1.1], pa.float32())}
            )
        )

    csv_rows = list(csv.reader(io.StringIO((tmp_path / "floats.csv").read_text())))[1:]
    json_rows = [json.loads(line) for line in (tmp_path / "floats.jsonl").read_text().splitlines()]
    stored = pq.read_table(tmp_path / "floats.parquet").to_pydict()
    for (x_text, y_text), json_row, x, y in zip(csv_rows, json_rows, stored["x"], stored["y"]):
        assert x_text == repr(x) and float(x_text) == x and json_row["x"] == x
        assert np.float32(y_text) == np.float32(y) and y_text == str(np.float32(y))  # float32: its own shortest text
    assert csv_rows[0] == ["0.1", "0.1"]


def test_write_conforms_batches_to_the_schema(tmp_path):
    with TableWriter(tmp_path, "t", SCHEMA) as writer:
        with pytest.raises(ValueError, match="missing \\['agreed'\\]"):
            writer.write(sample_table().drop_columns(["agreed"]))
        with pytest.raises(ValueError, match="unexpected \\['secret'\\]"):
            writer.write(sample_table().append_column("secret", pa.array(["x"] * 6)))
        with pytest.raises(pa.ArrowInvalid):  # an unsafe cast (1.5 -> int) is refused, not truncated
            writer.write(sample_table().set_column(1, "image_id", pa.array([1.5] * 6)))
        writer.write(sample_table().to_batches()[0])  # a valid batch after refused ones: nothing half-written
    assert writer.close()["t.csv"]["rows"] == 6
    assert (tmp_path / "t.csv").read_text(encoding="utf-8") == EXPECTED_CSV


def test_schema_checks(tmp_path):
    with pytest.raises(TypeError, match="not supported"):
        TableWriter(tmp_path, "t", pa.schema([("when", pa.timestamp("s"))]))
    with pytest.raises(ValueError, match="formats"):
        TableWriter(tmp_path, "t", SCHEMA, formats=("xlsx",))
    with pytest.raises(ValueError, match="safe file name"):
        TableWriter(tmp_path, "../t", SCHEMA)
    strict = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    with TableWriter(tmp_path, "strict", strict) as writer:
        with pytest.raises(ValueError, match="nullable"):
            writer.write(pa.table({"id": [1, None]}))
    assert writer.close()["strict.parquet"]["rows"] == 0  # a refused batch leaves the writer usable


def test_formats_subset_and_empty_table(tmp_path):
    with TableWriter(tmp_path, "empty", SCHEMA, formats=("parquet", "csv")) as writer:
        writer.write(sample_table().slice(0, 0))
    files = writer.close()

    assert sorted(files) == ["empty.csv", "empty.parquet"]
    assert not (tmp_path / "empty.jsonl").exists()
    assert (tmp_path / "empty.csv").read_text() == "image_id,ita,f32,agreed,note,tags\n"
    table = pq.read_table(tmp_path / "empty.parquet")
    assert table.num_rows == 0 and table.schema == SCHEMA
    assert writer.close() is files  # closing again (the context manager did) returns the same


def test_streams_in_chunks_with_one_row_group_per_batch(tmp_path, monkeypatch):
    monkeypatch.setattr(bundle, "CHUNK_ROWS", 2)
    monkeypatch.setattr(bundle, "ROW_GROUP_ROWS", 4)
    table = sample_table()
    # A batch of 1 row, one of 5 rows (split into row groups of at most 4 rows).
    write_sample(tmp_path, [table.slice(0, 1).to_batches()[0], table.slice(1)])

    assert (tmp_path / "labels.csv").read_text(encoding="utf-8") == EXPECTED_CSV
    assert (tmp_path / "labels.jsonl").read_text(encoding="utf-8") == EXPECTED_JSONL
    metadata = pq.ParquetFile(tmp_path / "labels.parquet").metadata
    assert [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)] == [1, 4, 1]


def test_parquet_is_deterministic(tmp_path):
    write_sample(tmp_path / "a")
    time.sleep(1.1)  # a timestamp with a resolution of a second would differ
    write_sample(tmp_path / "b")

    for fmt in FORMATS:
        assert (tmp_path / "a" / f"labels.{fmt}").read_bytes() == (tmp_path / "b" / f"labels.{fmt}").read_bytes()
    metadata = pq.ParquetFile(tmp_path / "a" / "labels.parquet").metadata
    assert metadata.created_by == f"parquet-cpp-arrow version {pa.__version__}"  # the version, no date or host
    assert set(metadata.metadata) == {b"ARROW:schema"}
    assert metadata.row_group(0).column(0).compression in ("ZSTD", "SNAPPY")


def test_a_failing_text_write_leaves_no_file(tmp_path, monkeypatch):
    calls = []

    def failing_write(self, fmt, data):
        calls.append(fmt)
        raise OSError(28, "No space left on device")

    writer = TableWriter(tmp_path, "t", SCHEMA)  # the CSV header is written here, before the patch
    monkeypatch.setattr(TableWriter, "_write_text", failing_write)
    with pytest.raises(OSError, match="No space"):
        with writer:
            writer.write(sample_table())
    assert calls == ["csv"]
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError, match="aborted"):
        writer.write(sample_table())


def test_a_failing_parquet_write_leaves_no_file_even_without_context_manager(tmp_path, monkeypatch):
    def failing_write_table(self, table, row_group_size=None):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", failing_write_table)
    writer = TableWriter(tmp_path, "t", SCHEMA)
    with pytest.raises(OSError, match="Input/output"):
        writer.write(sample_table())
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_raises_oserror_and_leaves_no_file(tmp_path):
    (tmp_path / "t.jsonl").symlink_to("/dev/full")  # every write to it fails with ENOSPC
    with pytest.raises(OSError):
        with TableWriter(tmp_path, "t", SCHEMA) as writer:
            for _ in range(200):  # past the write buffer
                writer.write(sample_table())
    assert list(tmp_path.iterdir()) == []


def test_a_removed_directory_raises_oserror_on_close(tmp_path):
    out = tmp_path / "release"
    with pytest.raises(OSError):
        with TableWriter(out, "t", SCHEMA) as writer:
            writer.write(sample_table())
            shutil.rmtree(out)
    assert not out.exists()


def test_an_error_in_the_block_removes_the_files(tmp_path):
    with pytest.raises(KeyError):
        with TableWriter(tmp_path, "t", SCHEMA) as writer:
            writer.write(sample_table())
            raise KeyError("boom")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- images


def two_colour_image(size=(40, 20), mode="RGB") -> PILImage.Image:
    """Left half red, right half blue: where red ends up shows how the picture was turned."""
    image = PILImage.new("RGB", size, RED)
    image.paste(BLUE, (size[0] // 2, 0, size[0], size[1]))
    return image.convert(mode)


def gps_exif(orientation: int) -> bytes:
    exif = PILImage.Exif()
    exif[0x0112] = orientation
    exif[0x010F] = "secret camera maker"
    gps = exif.get_ifd(0x8825)
    gps.update({1: "N", 2: (52.0, 22.0, 1.5), 3: "E", 4: (4.0, 53.0, 2.25)})
    return exif.tobytes()


def encode(image: PILImage.Image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def jpeg_with_gps_rotated() -> bytes:
    """A JPEG with EXIF GPS, orientation 6 (turn 90 degrees clockwise to show), a comment and XMP."""
    return encode(
        two_colour_image(),
        "JPEG",
        exif=gps_exif(6),
        comment=b"secret comment",
        xmp=b"<x:xmpmeta>secret xmp</x:xmpmeta>",
    )


def png_with_text() -> bytes:
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", "secret text")
    info.add_text("Location", "secret zipped text", zip=True)
    info.add_itxt("Description", "secret international text")
    return encode(two_colour_image(), "PNG", pnginfo=info, exif=gps_exif(1))


def webp_with_gps_rotated() -> bytes:
    return encode(two_colour_image(), "WEBP", lossless=True, exif=gps_exif(6))


def assert_no_metadata(data: bytes) -> PILImage.Image:
    for secret in SECRETS:
        assert secret not in data
    image = PILImage.open(io.BytesIO(data))
    assert dict(image.getexif()) == {}
    assert not {"exif", "comment", "xmp", "Comment", "Location", "Description"} & set(image.info)
    return image


def assert_turned_upright(image: PILImage.Image) -> None:
    """Orientation 6 applied: 20 x 40, red on top (the stored left half), blue below."""
    assert image.size == (20, 40)
    rgb = np.asarray(image.convert("RGB"), dtype=int)
    assert np.abs(rgb[5, 10] - RED).max() < 12
    assert np.abs(rgb[35, 10] - BLUE).max() < 12


def test_jpeg_with_orientation_is_turned_and_loses_gps_comment_and_xmp():
    clean, extension = image_strip_metadata(jpeg_with_gps_rotated())

    assert extension == "jpg"
    image = assert_no_metadata(clean)
    assert image.format == "JPEG"
    assert_turned_upright(image)
    assert image_strip_metadata(jpeg_with_gps_rotated()) == (clean, "jpg")  # deterministic


def test_upright_jpeg_is_stripped_losslessly():
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    source = encode(
        two_colour_image(),
        "JPEG",
        quality=80,
        exif=gps_exif(1),
        comment=b"secret comment",
        xmp=b"<x:xmpmeta>secret xmp</x:xmpmeta>",
        icc_profile=icc,
    )
    source += b"secret trailer after EOI"  # e.g. the second picture of an MPO

    clean, extension = image_strip_metadata(source)

    assert extension == "jpg"
    assert len(clean) < len(source)
    image = assert_no_metadata(clean)
    assert image.info["icc_profile"] == icc  # colour management kept
    assert image.info["jfif"]  # the JFIF header kept
    assert np.array_equal(np.asarray(image), np.asarray(PILImage.open(io.BytesIO(source))))  # not re-encoded
    scan = source[source.rindex(b"\xff\xda") : source.rindex(b"\xff\xd9") + 2]
    assert clean.endswith(scan)  # the compressed picture, byte for byte


def test_imagefolder_never_overwrites_an_existing_image(tmp_path):
    out = tmp_path / "imagefolder"
    out.mkdir()
    (out / "1.png").write_bytes(b"not ours")
    with pytest.raises(FileExistsError):
        with ImagefolderWriter(out) as writer:
            writer.add("1", png_with_text(), {"image_id": 1})
    assert [p.name for p in out.iterdir()] == ["1.png"]
    assert (out / "1.png").read_bytes() == b"not ours"


def test_a_truncated_jpeg_is_refused():
    with pytest.raises(ValueError, match="malformed JPEG"):
        image_strip_metadata(encode(two_colour_image(), "JPEG")[:-40])


def test_png_loses_text_and_exif_chunks_losslessly():
    source = png_with_text()
    clean, extension = image_strip_metadata(source)

    assert extension == "png"
    image = assert_no_metadata(clean)
    for chunk in (b"tEXt", b"zTXt", b"iTXt", b"eXIf"):
        assert chunk in source and chunk not in clean
    assert np.array_equal(np.asarray(image), np.asarray(two_colour_image()))


def test_png_with_orientation_is_turned():
    clean, extension = image_strip_metadata(encode(two_colour_image(), "PNG", exif=gps_exif(6)))
    assert extension == "png"
    assert_turned_upright(assert_no_metadata(clean))


def test_other_formats_become_png_turned_and_clean():
    clean, extension = image_strip_metadata(webp_with_gps_rotated())
    assert extension == "png"
    image = assert_no_metadata(clean)
    assert image.format == "PNG"
    assert_turned_upright(image)

    tiff, _ = image_strip_metadata(encode(two_colour_image(), "TIFF", exif=gps_exif(1)))
    assert np.array_equal(np.asarray(assert_no_metadata(tiff)), np.asarray(two_colour_image()))


def test_gif_transparency_becomes_alpha():
    image = two_colour_image().convert("P")
    transparent_index = image.getpixel((0, 0))
    clean, extension = image_strip_metadata(encode(image, "GIF", transparency=transparent_index, comment=b"secret"))

    out = assert_no_metadata(clean)
    assert (extension, out.mode) == ("png", "RGBA")
    assert out.getpixel((0, 0))[3] == 0 and out.getpixel((39, 0))[3] == 255


# --------------------------------------------------------------------------- imagefolder


def write_imagefolder(out: Path) -> dict:
    with ImagefolderWriter(out) as writer:
        writer.add("101", jpeg_with_gps_rotated(), {"image_id": 101, "ita": 41.5, "tags": ["a"], "note": "=x"})
        writer.add("102", png_with_text(), {"image_id": 102, "ita": float("nan"), "tags": [], "note": None})
        writer.add("103", webp_with_gps_rotated(), {"image_id": 103, "ita": -3.25, "tags": ["b", "c"], "note": ""})
    return writer.close()


def test_imagefolder_loads_with_hugging_face_datasets(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    import datasets  # after the variables above: it reads them on import

    out = tmp_path / "release" / "imagefolder"

    files = write_imagefolder(out)

    assert list(files) == [
        "imagefolder/101.jpg",
        "imagefolder/102.png",
        "imagefolder/103.png",
        "imagefolder/metadata.jsonl",
    ]
    for relative, info in files.items():
        assert {"sha256": info["sha256"], "bytes": info["bytes"]} == file_info(out.parent / relative)
    assert files["imagefolder/metadata.jsonl"]["rows"] == 3
    assert json.loads((out / "metadata.jsonl").read_text().splitlines()[1]) == {
        "file_name": "102.png",
        "image_id": 102,
        "ita": None,
        "tags": [],
        "note": None,
    }
    for name in ("101.jpg", "102.png", "103.png"):
        assert_no_metadata((out / name).read_bytes())

    dataset = datasets.load_dataset("imagefolder", data_dir=str(out), cache_dir=str(tmp_path / "hf-cache"))["train"]

    assert {"image", "image_id", "ita", "tags", "note"} <= set(dataset.column_names)
    rows = sorted(dataset, key=lambda row: row["image_id"])
    assert [row["image_id"] for row in rows] == [101, 102, 103]
    assert [row["tags"] for row in rows] == [["a"], [], ["b", "c"]]
    assert rows[0]["note"] == "=x"  # JSON is not a spreadsheet: no apostrophe
    for row in rows:
        row["image"].load()
    assert_turned_upright(rows[0]["image"])
    assert rows[1]["image"].size == (40, 20)
    assert_turned_upright(rows[2]["image"])
    assert sorted(p.name for p in out.iterdir()) == ["101.jpg", "102.png", "103.png", "metadata.jsonl"]  # no cache


@pytest.mark.parametrize("stem", ["../x", "a/b", "a\\b", "..", ".hidden", "", "a..b", "x" * 300])
def test_imagefolder_refuses_unsafe_stems(tmp_path, stem):
    with ImagefolderWriter(tmp_path / "imagefolder") as writer:
        with pytest.raises(ValueError, match="safe file name"):
            writer.add(stem, png_with_text(), {"image_id": 1})
    assert sorted(p.name for p in (tmp_path / "imagefolder").iterdir()) == ["metadata.jsonl"]
    assert list(tmp_path.iterdir()) == [tmp_path / "imagefolder"]


def test_imagefolder_refuses_inconsistent_rows(tmp_path):
    with ImagefolderWriter(tmp_path / "imagefolder") as writer:
        writer.add("1", png_with_text(), {"image_id": 1, "ita": 2.0})
        with pytest.raises(ValueError, match="differ"):
            writer.add("2", png_with_text(), {"ita": 2.0, "image_id": 2})
        with pytest.raises(ValueError, match="file_name"):
            writer.add("3", png_with_text(), {"file_name": "x.png"})
        with pytest.raises(ValueError, match="duplicate"):
            writer.add("1", png_with_text(), {"image_id": 1, "ita": 2.0})
        with pytest.raises(TypeError, match="JSON"):
            writer.add("4", png_with_text(), {"image_id": object(), "ita": 2.0})
    assert sorted(writer.close()) == ["imagefolder/1.png", "imagefolder/metadata.jsonl"]
    assert writer.close()["imagefolder/metadata.jsonl"]["rows"] == 1


def test_imagefolder_removes_everything_on_error(tmp_path):
    out = tmp_path / "imagefolder"
    with pytest.raises(RuntimeError, match="boom"):
        with ImagefolderWriter(out) as writer:
            writer.add("1", png_with_text(), {"image_id": 1})
            raise RuntimeError("boom")
    assert list(out.iterdir()) == []


# --------------------------------------------------------------------------- manifest and zip


def test_manifest_is_canonical_json(tmp_path):
    files = {
        "tables/labels.csv": {"sha256": "b" * 64, "bytes": 10, "rows": 2},
        "imagefolder/1.png": {"sha256": "a" * 64, "bytes": 5, "extra": "dropped"},
    }
    info = manifest_write(tmp_path, {"name": "Demo", "version": 2, "note": "é"}, files)

    text = (tmp_path / "manifest.json").read_bytes().decode("utf-8")
    assert info == file_info(tmp_path / "manifest.json")
    assert text == (
        "{\n"
        '  "files": {\n'
        '    "imagefolder/1.png": {\n'
        '      "bytes": 5,\n'
        f'      "sha256": "{"a" * 64}"\n'
        "    },\n"
        '    "tables/labels.csv": {\n'
        '      "bytes": 10,\n'
        '      "rows": 2,\n'
        f'      "sha256": "{"b" * 64}"\n'
        "    }\n"
        "  },\n"
        '  "release": {\n'
        '    "name": "Demo",\n'
        '    "note": "é",\n'
        '    "version": 2\n'
        "  }\n"
        "}\n"
    )


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a//b", "a\\b", "./a", ""])
def test_manifest_refuses_paths_outside_the_release(tmp_path, path):
    with pytest.raises(ValueError, match="relative"):
        manifest_write(tmp_path, {}, {path: {"sha256": "a" * 64, "bytes": 1}})


def test_zip_is_sorted_with_fixed_dates_and_modes(tmp_path):
    root = tmp_path / "root"
    (root / "tables").mkdir(parents=True)
    (root / "tables" / "b.csv").write_text("b\n")
    (root / "a.txt").write_text("a" * 1000)
    (root / "tables" / "a.csv").write_text("a\n")
    os.chmod(root / "a.txt", 0o600)
    zip_path = root / "release.zip"  # inside the root: not zipped into itself

    info = zip_write(root, zip_path, top="fairtone-demo-v1")

    assert info == file_info(zip_path)
    with zipfile.ZipFile(zip_path) as archive:
        entries = archive.infolist()
        assert [entry.filename for entry in entries] == [
            "fairtone-demo-v1/a.txt",
            "fairtone-demo-v1/tables/a.csv",
            "fairtone-demo-v1/tables/b.csv",
        ]
        for entry in entries:
            assert entry.date_time == (1980, 1, 1, 0, 0, 0)
            assert entry.external_attr >> 16 == 0o100644
            assert entry.compress_type == zipfile.ZIP_DEFLATED
        assert archive.read("fairtone-demo-v1/a.txt") == b"a" * 1000
        assert archive.testzip() is None


def test_zip_refuses_unsafe_top_and_symlinks(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("a")
    with pytest.raises(ValueError, match="safe file name"):
        zip_write(root, tmp_path / "x.zip", top="../up")
    (root / "link").symlink_to("/etc/hostname")
    with pytest.raises(ValueError, match="symbolic link"):
        zip_write(root, tmp_path / "x.zip", top="top")
    assert not (tmp_path / "x.zip").exists()


def build_release(root: Path) -> tuple[dict, dict, dict]:
    files = {}
    for name, info in write_sample(root / "tables").items():
        files[f"tables/{name}"] = info
    files.update(write_imagefolder(root / "imagefolder"))
    manifest = manifest_write(root, {"name": "Demo", "version": 1}, files)
    archive = zip_write(root, root.parent / f"{root.name}.zip", top="fairtone-demo-v1")
    return files, manifest, archive


def test_a_release_is_byte_identical_for_identical_inputs(tmp_path):
    first = build_release(tmp_path / "first")
    time.sleep(1.1)  # file times and any timestamp must not reach the bytes
    second = build_release(tmp_path / "second")

    assert first == second
    files, manifest, archive = first
    assert len(files) == 7
    assert json.loads((tmp_path / "first" / "manifest.json").read_text())["files"] == {
        path: {key: info[key] for key in ("sha256", "bytes", "rows") if key in info} for path, info in files.items()
    }
    assert manifest["bytes"] > 0 and archive == file_info(tmp_path / "second.zip")


@pytest.mark.slow  # starts a Python process (pytest.ini): CI runs it, bin/test --fast skips it
def test_bundle_imports_no_django():
    """The module alone (without the package, whose other modules use Django) loads neither Django nor the app."""
    path = Path(bundle.__file__)
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('bundle_alone', {str(path)!r})\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "loaded = sorted(name for name in sys.modules if name.split('.')[0] in ('django', 'labeling'))\n"
        "sys.exit(str(loaded) if loaded else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert (result.returncode, result.stderr) == (0, "")


def test_a_column_name_a_spreadsheet_would_run_is_neutralised_in_the_csv_header(tmp_path):
    # A manifest column named "=cmd" (issue 26): its cells were neutralised, its header was not.
    schema = pa.schema([("image_id", pa.int64()), ('=HYPERLINK("http://x")', pa.string()), ("@sum", pa.string())])
    with TableWriter(tmp_path, "images", schema) as writer:
        writer.write(pa.table({"image_id": [1], '=HYPERLINK("http://x")': ["=1+1"], "@sum": ["ok"]}, schema=schema))
    header, row = (tmp_path / "images.csv").read_text().splitlines()
    assert header == 'image_id,"\'=HYPERLINK(""http://x"")",\'@sum'
    assert row == "1,'=1+1,ok"
    # The typed formats keep the names as they are (no spreadsheet runs them).
    assert pq.read_table(tmp_path / "images.parquet").schema.names == schema.names
