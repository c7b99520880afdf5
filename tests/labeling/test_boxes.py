"""Photos with several people (issue 23): a manifest gives a box per person (``subject_id`` with ``x``, ``y``,
``width``, ``height`` in pixels, several rows per file); each box is its own labelling item with its own subject
and attributes, labelled on the whole photo with its box highlighted, measured inside its box, released as its own
row with its box. A photo without boxes behaves as before.
"""

import contextlib
import io
import json
import tempfile
import uuid
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from django.conf import settings as django_settings
from django.db import IntegrityError, transaction
from django.test import TestCase, override_settings
from PIL import Image as PILImage

from colorimetry import measure_image, skin_tone_stats
from labeling.models import Image, ImportItem, Label, Subject
from labeling.services import releases as release_services
from labeling.services.baselines import baseline_compute, baseline_parameters_effective
from labeling.services.baselines.parameters import stats_options
from labeling.services.erasure import subject_erase, subject_erase_preview
from labeling.services.image_attributes import image_attributes_apply
from labeling.services.images import image_create_from_bytes, image_make_derivatives
from labeling.services.imports import import_files, import_manifest
from labeling.services.phases import calibration_configure, phase_get, phase_open
from tests.factories import MembershipFactory, ProjectFactory, UserFactory, make_lead
from tests.labeling.helpers import shared_world
from tests.labeling.test_releases import CARD, INCLUDE_ALL

#: Three people side by side, each on their own skin colour (light, medium, deep), on a grey background.
SKIN = {"alice": (0xD7, 0xBD, 0x96), "bob": (0x8D, 0x5D, 0x3C), "carol": (0x3A, 0x22, 0x17)}
BOXES = {"alice": (10, 20, 80, 120), "bob": (110, 20, 80, 120), "carol": (210, 20, 80, 120)}
PHOTO_SIZE = (300, 160)
ATTRIBUTES = {"alice": ("woman", "slim"), "bob": ("man", "average"), "carol": ("woman", "heavy")}


def group_photo() -> bytes:
    img = PILImage.new("RGB", PHOTO_SIZE, (128, 128, 128))
    for name, (x, y, w, h) in BOXES.items():
        img.paste(SKIN[name], (x, y, x + w, y + h))
    buffer = io.BytesIO()
    img.save(buffer, format="PNG")
    return buffer.getvalue()


def single_photo(colour=(160, 126, 86)) -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", (64, 48), colour).save(buffer, format="PNG")
    return buffer.getvalue()


def full_mask() -> bytes:
    buffer = io.BytesIO()
    PILImage.new("L", PHOTO_SIZE, 255).save(buffer, format="PNG")
    return buffer.getvalue()


def box_rows(file="group.png", **changes) -> list[str]:
    rows = []
    for name, (x, y, w, h) in BOXES.items():
        gender, shape = ATTRIBUTES[name]
        cells = {"x": x, "y": y, "width": w, "height": h, **changes.get(name, {})}
        rows.append(f"{file},{name},{gender},{shape},{cells['x']},{cells['y']},{cells['width']},{cells['height']}")
    return rows


HEADER = "file,subject_id,gender,body_shape,x,y,width,height"


@pytest.fixture(autouse=True)
def here(monkeypatch):
    """Background work (display images, baselines, releases) runs in this process, also with CI's real worker:
    these tests never commit, so a worker could not see their rows."""
    from tests.labeling.helpers import run_tasks_here

    run_tasks_here(monkeypatch)


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return Path(settings.MEDIA_ROOT)


@contextlib.contextmanager
def import_folder(parent: Path):
    """The group photo, a single photo and a mask in ``parent / "imports"``, an import root for the block."""
    root = parent / "imports"
    root.mkdir()
    (root / "group.png").write_bytes(group_photo())
    (root / "solo.png").write_bytes(single_photo())
    (root / "mask.png").write_bytes(full_mask())
    with override_settings(FAIRTONE={**django_settings.FAIRTONE, "IMPORT_ROOTS": [str(root)]}):
        yield root


@pytest.fixture
def folder(tmp_path):
    with import_folder(tmp_path) as root:
        yield root


def run(project, lead, folder, lines, name="manifest.csv"):
    text = "\n".join(lines) + "\n"
    return import_manifest(
        project=project, manifest=io.BytesIO(text.encode()), user=lead, name=name, folder=str(folder)
    )


def report(batch):
    return [(item.row, item.outcome, item.reason) for item in batch.items.order_by("row", "id")]


def stored_files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()} if root.exists() else set()


# --------------------------------------------------------------------------- the import


def test_a_three_person_photo_is_three_items_sharing_one_stored_file(project, lead, folder, media):
    batch = run(project, lead, folder, [HEADER, *box_rows(), "solo.png,dan,man,slim,,,,"])
    assert [(row, outcome) for row, outcome, _ in report(batch)] == [
        (2, "imported"),
        (3, "imported"),
        (4, "imported"),
        (5, "imported"),
    ]
    items = {i.subject.external_id: i for i in Image.objects.filter(project=project).select_related("subject")}
    # Each person is an item of their own: their subject, attributes and box; one photo, one file on disk.
    for name, box in BOXES.items():
        image = items[name]
        assert image.external_id == f"group#{name}"
        assert image.box == box and image.box_dict == dict(zip(("x", "y", "width", "height"), box, strict=True))
        assert image.subject.attributes == {"gender": ATTRIBUTES[name][0], "body_shape": ATTRIBUTES[name][1]}
        assert (image.width, image.height) == PHOTO_SIZE
    assert len({items[n].original.name for n in BOXES}) == 1
    assert len({items[n].sha256 for n in BOXES}) == 1
    # A photo without a box is as before: the whole photo, its stem as id.
    assert items["dan"].box is None and items["dan"].external_id == "solo"
    originals = {p for p in stored_files(media) if "/originals/" in p.as_posix()}
    assert len(originals) == 2

    # Derivatives: the display is the whole photo (the page highlights the box); the thumbnail is the box.
    for name in BOXES:
        image_make_derivatives(image=items[name])
        items[name].refresh_from_db()
        with items[name].display.open("rb") as handle:
            assert PILImage.open(handle).size == PHOTO_SIZE
        with items[name].thumbnail.open("rb") as handle:
            thumb = PILImage.open(handle).convert("RGB")
        assert thumb.size[0] * 120 == thumb.size[1] * 80  # the box's shape, 2:3
        centre = np.asarray(thumb)[thumb.size[1] // 2, thumb.size[0] // 2].astype(int)
        assert np.abs(centre - np.array(SKIN[name])).max() <= 6, (name, centre)
    assert len({items[n].display.name for n in BOXES} | {items[n].thumbnail.name for n in BOXES}) == 6


def test_an_item_id_or_a_box_without_subject_is_kept(project, lead, folder):
    lines = [
        "file,image_id,subject_id,x,y,width,height",
        "group.png,G-1,,10,20,80,120",
        "group.png,,,110,20,80,120",
        "group.png,,carol,210,20,80,120",
    ]
    batch = run(project, lead, folder, lines)
    assert [o for _, o, _ in report(batch)] == ["imported"] * 3
    assert set(Image.objects.filter(project=project).values_list("external_id", flat=True)) == {
        "G-1",
        "group#110,20,80,120",
        "group#carol",
    }


BAD_ROWS = [
    ({"bob": {"width": ""}}, "a box needs all four of x, y, width, height: width is empty"),
    ({"bob": {"x": "", "y": ""}}, "x and y are empty"),
    ({"bob": {"x": "10.5"}}, "x = '10.5' is not a whole number of pixels"),
    ({"bob": {"y": "top"}}, "y = 'top' is not a whole number of pixels"),
    ({"bob": {"x": "-1"}}, "the box starts outside the photo (x=-1, y=20)"),
    ({"bob": {"width": "0"}}, "the box has no area (width=0, height=120)"),
    (
        {"bob": {"x": "250"}},
        "the box goes past the photo's right edge: x + width = 330 but the photo is 300 pixels wide",
    ),
    ({"bob": {"height": "141"}}, "the box goes past the photo's bottom edge: y + height = 161 but the photo is 160"),
    ({"bob": {"x": "10"}}, "the same box of 'group.png' as row 2"),
]


@pytest.mark.parametrize(("changes", "reason"), BAD_ROWS, ids=[r for _, r in BAD_ROWS])
def test_a_bad_box_rejects_its_row_with_the_reason_and_nothing_of_its_photo_is_imported(
    project, lead, folder, media, changes, reason
):
    before = stored_files(media)
    batch = run(project, lead, folder, [HEADER, *box_rows(**changes), "solo.png,dan,man,slim,,,,"])
    rows = {row: (outcome, text) for row, outcome, text in report(batch)}
    # Bob's row says what is wrong with it; Alice's and Carol's say which row stopped their photo.
    assert rows[3][0] == "rejected" and rows[3][1].startswith("row 3: ") and reason in rows[3][1]
    for row in (2, 4):
        assert rows[row][0] == "rejected"
        assert "row 3, another box of the same photo, was rejected" in rows[row][1]
    assert rows[5][0] == "imported"  # the other photo is not held back
    # Nothing of the group photo: no item, no subject, no file.
    assert list(Image.objects.filter(project=project).values_list("external_id", flat=True)) == ["solo"]
    assert set(Subject.objects.filter(project=project).values_list("external_id", flat=True)) == {"dan"}
    assert {p for p in stored_files(media) - before if "/originals/" in p.as_posix()} == {
        Path(Image.objects.get(project=project, external_id="solo").original.path)
    }


def test_a_photo_rejected_late_leaves_no_file_behind(project, lead, folder, media):
    # The third box's image id is taken in the project: found when its item is created, after the first two
    # were. The photo's boxes are rolled back, and the file written for the first one removed.
    image_create_from_bytes(project=project, filename="other.png", data=single_photo((1, 2, 3)), external_id="taken")
    lines = ["file,image_id,subject_id,x,y,width,height"]
    lines += [f"group.png,{n if n != 'carol' else 'taken'},{n},{x},{y},{w},{h}" for n, (x, y, w, h) in BOXES.items()]
    batch = run(project, lead, folder, lines)
    outcomes = report(batch)
    assert [o for _, o, _ in outcomes] == ["rejected"] * 3
    assert "image id 'taken' is already used" in outcomes[2][2]
    assert "row 4, another box of the same photo, was rejected" in outcomes[0][2]
    assert list(Image.objects.filter(project=project).values_list("external_id", flat=True)) == ["taken"]
    assert not Subject.objects.filter(project=project).exists()
    originals = {p for p in stored_files(media) if "/originals/" in p.as_posix()}
    assert originals == {Path(Image.objects.get(project=project).original.path)}


def test_the_fixed_manifest_imports_what_was_missing_and_skips_the_rest(project, lead, folder):
    run(project, lead, folder, [HEADER, *box_rows()[:2]])
    assert Image.objects.filter(project=project).count() == 2
    batch = run(project, lead, folder, [HEADER, *box_rows()])
    assert [o for _, o, _ in report(batch)] == ["duplicate", "duplicate", "imported"]
    assert "the same box of the same photo as image 'group#alice'" in report(batch)[0][2]
    assert (
        Image.objects.filter(project=project).count() == 3
        and len(set(Image.objects.filter(project=project).values_list("original", flat=True))) == 1
    )


def test_whole_photo_and_boxes_of_the_same_file(project, lead, folder):
    run(project, lead, folder, [HEADER, *box_rows()])
    # Uploading the photo again as a whole photo: it is in the project already (as boxes).
    batch = import_files(project=project, files=[("group.png", io.BytesIO(group_photo()))], user=lead)
    assert (batch.n_imported, batch.n_duplicate) == (0, 1)
    # A photo uploaded whole and then given boxes: the boxes come in, with a word about the whole photo.
    other = single_photo((10, 200, 10))
    (folder / "pair.png").write_bytes(other)
    import_files(project=project, files=[("pair.png", io.BytesIO(other))], user=lead)
    batch = run(project, lead, folder, ["file,subject_id,x,y,width,height", "pair.png,erin,0,0,32,48"])
    [(_, outcome, reason)] = report(batch)
    assert outcome == "imported"
    assert "the whole photo is also in the project as image 'pair'" in reason


def test_the_database_refuses_a_box_outside_its_photo_or_half_a_box(project):
    image = image_create_from_bytes(
        project=project, filename="g.png", data=group_photo(), box=(10, 20, 80, 120), external_id="g-1"
    )
    for fields in ({"box_x": 250}, {"box_height": None}, {"box_width": 0}):
        with pytest.raises(IntegrityError), transaction.atomic():
            Image.objects.filter(pk=image.pk).update(**fields)
    # The same file and box twice is refused too; the same file with another box is not.
    with pytest.raises(IntegrityError), transaction.atomic():
        Image.objects.create(
            **{f.attname: getattr(image, f.attname) for f in Image._meta.concrete_fields if f.attname != "id"}
            | {"external_id": "again"}
        )
    image_create_from_bytes(
        project=project, filename="g.png", data=group_photo(), box=(11, 20, 80, 120), external_id="g-2"
    )


def test_the_same_photo_is_a_duplicate_for_the_same_box_only(project):
    from labeling.services.images import DuplicateImage, ImageRejected

    first = image_create_from_bytes(project=project, filename="g.png", data=group_photo(), box=BOXES["alice"])
    with pytest.raises(DuplicateImage) as raised:
        image_create_from_bytes(
            project=project, filename="g.png", data=group_photo(), box=BOXES["alice"], external_id="x"
        )
    assert raised.value.existing == first
    with pytest.raises(ImageRejected, match="past the photo's right edge"):
        image_create_from_bytes(project=project, filename="g.png", data=group_photo(), box=(299, 0, 2, 1))
    second = image_create_from_bytes(
        project=project, filename="g.png", data=group_photo(), box=BOXES["bob"], external_id="g-bob"
    )
    assert second.original.name == first.original.name


# --------------------------------------------------------------------------- labeling


def _build_boxed():
    """The group photo's three boxes and a single photo imported by manifest into a project of their own,
    built once for the module (``shared_world``; each test with its own copy of the files: one erases)."""
    lead = make_lead("boxes-lead")
    project = ProjectFactory(created_by=lead)
    with tempfile.TemporaryDirectory() as tmp, import_folder(Path(tmp)) as folder:
        # The import's background work (display images, thumbnails, baselines) runs as it would after the commit.
        with TestCase.captureOnCommitCallbacks(execute=True):
            run(project, lead, folder, [HEADER, *box_rows(), "solo.png,dan,man,slim,,,,"])
    images = {i.subject.external_id: i for i in Image.objects.filter(project=project).select_related("subject")}
    return {"project": project, "lead": lead, "images": images}


_shared_world, boxed_world = shared_world("boxed_world", _build_boxed, private_media=True)


@pytest.fixture
def boxed(boxed_world):
    """The imported items by subject (alice, bob, carol: the boxes; dan: the single photo)."""
    return boxed_world["images"]


@pytest.fixture
def three(boxed_world):
    return [
        MembershipFactory(project=boxed_world["project"], user=UserFactory(username=f"boxer{i}"), pseudonym=f"B{i}")
        for i in range(1, 4)
    ]


def open_all(project):
    calibration_configure(project=project, size=4, calibration_1_size=4, n_repeated=0, seed=7)
    return phase_open(phase=phase_get(project, "calibration_1"), labels_per_image=3)


def test_the_labeler_gets_each_person_with_their_box_and_nothing_else(boxed_world, boxed, three, client_for):
    project = boxed_world["project"]
    phase = open_all(project)
    api = client_for(three[0].user)
    seen = {}
    for _ in range(4):
        nxt = api.get(f"/api/phases/{phase.id}/next/").json()
        image = nxt["current"]["image"]
        assert set(image) == {"id", "width", "height", "display_url", "box"}
        seen[image["id"]] = image
        r = api.post(
            f"/api/phases/{phase.id}/labels/",
            {"client_id": str(uuid.uuid4()), "image": image["id"], "tones": [4]},
            format="json",
        )
        assert r.status_code == 201, r.content
    by_id = {i.id: i for i in boxed.values()}
    for image_id, image in seen.items():
        assert image["box"] == by_id[image_id].box_dict  # None for the whole photo
        assert (image["width"], image["height"]) == (by_id[image_id].width, by_id[image_id].height)
    # Going back: the history carries the box and the photo's size too.
    history = api.get(f"/api/phases/{phase.id}/labels/").json()
    assert {h["image"]: h["box"] for h in history} == {i: by_id[i].box_dict for i in seen}
    assert all((h["width"], h["height"]) == (by_id[h["image"]].width, by_id[h["image"]].height) for h in history)
    # A labeler may see the display image of a box in their queue (the whole photo), nothing else of it.
    box_item = boxed["alice"]
    assert api.get(f"/images/{box_item.id}/file/display/").status_code == 200
    assert api.get(f"/images/{box_item.id}/file/thumbnail/").status_code == 404
    assert api.get(f"/images/{box_item.id}/file/original/").status_code == 404


def test_the_labeling_page_offers_the_zoom_to_the_person(boxed_world, boxed, three, client):
    project = boxed_world["project"]
    phase = open_all(project)
    client.force_login(three[0].user)
    page = client.get(f"/phases/{phase.id}/label/").content.decode()
    assert 'id="box-note"' in page and "<kbd>Z</kbd>" in page


# --------------------------------------------------------------------------- the baseline


def uniform_ita(colour) -> float:
    patch = np.full((40, 40, 3), colour, dtype=np.uint8)
    return skin_tone_stats(patch, np.ones((40, 40), dtype=bool))["ita_median"]


def test_the_baseline_measures_inside_the_box(project, lead, folder):
    lines = ["file,subject_id,mask,mask_kind,x,y,width,height"]
    lines += [f"group.png,{n},mask.png,skin,{x},{y},{w},{h}" for n, (x, y, w, h) in BOXES.items()]
    assert [o for _, o, _ in report(run(project, lead, folder, lines))] == ["imported"] * 3
    parameters = baseline_parameters_effective(project)
    readings = {}
    for name in BOXES:
        row = baseline_compute(
            image=Image.objects.get(project=project, subject__external_id=name), parameters=parameters
        )
        assert row.status == "ok", row.error
        assert row.stats["region"] == list(BOXES[name])
        readings[name] = row.ita_median
        # Inside the box the mask covers one colour: the box's own ITA, to a hundredth of a degree.
        assert readings[name] == pytest.approx(uniform_ita(SKIN[name]), abs=0.01), name
    assert readings["alice"] > readings["bob"] > readings["carol"]
    # The whole photo with the same all-skin mask mixes grey, light, medium and deep pixels.
    options = stats_options(parameters)
    whole = measure_image(folder / "group.png", folder / "mask.png", max_pixels=parameters["max_pixels"], **options)
    assert "region" not in whole
    assert whole["ita_iqr"] > 50 and "wide_ita_spread" in whole["flags"]
    assert all(row.stats["ita_iqr"] < 0.5 for row in ImageBaselineRows(project))
    # The overlay covers the whole photo (laid over its display image), the outside of the box dimmed.
    row = Image.objects.get(project=project, subject__external_id="bob").baselines.get()
    with row.overlay.open("rb") as handle:
        overlay = np.asarray(PILImage.open(handle))
    assert overlay.shape == (PHOTO_SIZE[1], PHOTO_SIZE[0])
    assert (overlay[80, 30] == 1) and (overlay[80, 150] == 0)  # alice's box dimmed, bob's interior skin


def ImageBaselineRows(project):  # noqa: N802 - reads like the model it lists
    from labeling.models import ImageBaseline

    return ImageBaseline.objects.filter(image__project=project)


# --------------------------------------------------------------------------- from manifest to release rows


def test_a_three_person_photo_goes_from_manifest_to_labels_to_release_rows(boxed_world, boxed, three, client_for):
    project, lead = boxed_world["project"], boxed_world["lead"]
    phase = open_all(project)
    tones = {"alice": 3, "bob": 6, "carol": 9, "dan": 5}
    by_id = {i.id: name for name, i in boxed.items()}
    for member in three:
        api = client_for(member.user)
        while (nxt := api.get(f"/api/phases/{phase.id}/next/").json())["current"]:
            image_id = nxt["current"]["image"]["id"]
            body = {"client_id": str(uuid.uuid4()), "image": image_id, "tones": [tones[by_id[image_id]]]}
            assert api.post(f"/api/phases/{phase.id}/labels/", body, format="json").status_code == 201
    assert Label.objects.filter(phase=phase).count() == 12
    release = release_services.release_request(
        project=project, user=lead, rule={"include": INCLUDE_ALL}, card_text=CARD, with_images=True
    )
    release = release_services.release_build(release)
    assert release.status == "published", release.error
    root = release_services.release_dir(release)
    table = pq.read_table(root / "images.parquet").to_pylist()
    rows = {row["subject_id"]: row for row in table}
    assert set(rows) == {"alice", "bob", "carol", "dan"}
    for name, (x, y, w, h) in BOXES.items():
        row = rows[name]
        assert (row["box_x"], row["box_y"], row["box_width"], row["box_height"]) == (x, y, w, h)
        assert row["final_tone"] == tones[name] and row["n_labels"] == 3
        assert row["gender"] == ATTRIBUTES[name][0] and row["body_shape"] == ATTRIBUTES[name][1]
        assert row["external_id"] == f"group#{name}"
    assert len({rows[n]["sha256"] for n in BOXES}) == 1
    assert [rows["dan"][c] for c in ("box_x", "box_y", "box_width", "box_height")] == [None] * 4
    # The CSV carries the box too; the imagefolder has one row (and one copy of the photo) per person.
    csv_text = (root / "images.csv").read_text()
    assert "box_x,box_y,box_width,box_height" in csv_text.splitlines()[0]
    metadata = [json.loads(line) for line in (root / "imagefolder" / "metadata.jsonl").read_text().splitlines()]
    boxes = {m["subject_id"]: (m["box_x"], m["box_y"], m["box_width"], m["box_height"]) for m in metadata}
    assert boxes == {**BOXES, "dan": (None, None, None, None)}
    assert len({m["file_name"] for m in metadata}) == 4
    for m in metadata:
        with PILImage.open(root / "imagefolder" / m["file_name"]) as photo:
            assert photo.size == ((300, 160) if m["box_x"] is not None else (64, 48))
    # croissant.json describes the box columns of the images record set.
    croissant = json.loads((root / "croissant.json").read_text())
    images = next(rs for rs in croissant["recordSet"] if rs["@id"] == "images")
    fields = {f["name"]: f for f in images["field"]}
    assert {"box_x", "box_y", "box_width", "box_height"} <= set(fields)
    assert "box" in fields["box_x"]["description"]
    # The release with its photos imports into a new project with each person's box (issue 22's round trip):
    # the three rows' photos are the same stripped bytes, so without their boxes they would be duplicates.
    from labeling.services.projects import project_create

    data = release_services.release_zip_path(release).read_bytes()
    target = project_create(name="Restored", created_by=lead)
    result = release_services.release_import(project=target, fileobj=io.BytesIO(data), user=lead)
    assert result["images"] == 4 and result["labels"] == 12
    restored = {i.external_id: i.box for i in target.images.all()}
    assert restored == {**{f"group#{n}": b for n, b in BOXES.items()}, "solo": None}
    assert len(set(target.images.filter(box_x__isnull=False).values_list("original", flat=True))) == 1
    # The data card lists the columns with their meaning.
    card = json.loads((root / "data_card.json").read_text())
    meanings = {f["name"]: f["meaning"] for f in card["fields"]["images"]}
    assert "person's box" in meanings["box_x"]


# --------------------------------------------------------------------------- erasure, attributes, data manager


def test_erasing_one_person_keeps_the_photo_for_the_others_and_says_so(
    boxed_world, boxed, media, django_capture_on_commit_callbacks
):
    project, lead = boxed_world["project"], boxed_world["lead"]
    preview = subject_erase_preview(project=project, external_id="alice")
    assert preview["images"] == 1
    assert preview["shared_photos"] == [{"image": "group#alice", "kept_by": ["group#bob", "group#carol"]}]
    original = Path(boxed["alice"].original.path)
    alice = Image.objects.get(pk=boxed["alice"].pk)
    own = [Path(alice.display.path), Path(alice.thumbnail.path)]
    with django_capture_on_commit_callbacks(execute=True):
        record = subject_erase(project=project, external_id="alice", user=lead, confirm="alice")
    assert record.counts["photos_kept_for_other_boxes"] == 1
    assert original.exists()  # Bob's and Carol's boxes still use it
    assert not any(p.exists() for p in own)
    assert set(Image.objects.filter(project=project).values_list("external_id", flat=True)) == {
        "group#bob",
        "group#carol",
        "solo",
    }
    for name in ("bob", "carol"):
        with django_capture_on_commit_callbacks(execute=True):
            subject_erase(project=project, external_id=name, user=lead, confirm=name)
    assert not original.exists()  # the last box gone: the photo goes too


def test_the_erase_page_warns_that_the_photo_stays(boxed_world, boxed, client):
    project, lead = boxed_world["project"], boxed_world["lead"]
    client.force_login(lead)
    page = client.get(f"/projects/{project.pk}/subjects/bob/erase/").content.decode()
    assert 'id="erase-shared"' in page and "group#bob: kept by group#alice, group#carol" in page


def test_attributes_are_applied_to_a_box_by_file_and_box(boxed_world, boxed):
    project, lead = boxed_world["project"], boxed_world["lead"]
    text = "file,x,y,width,height,age\ngroup.png,110,20,80,120,41\n"
    result = image_attributes_apply(project=project, data=text.encode(), name="m.csv", user=lead)
    assert result["applied"] and result["counts"]["updated"] == 1
    assert Subject.objects.get(project=project, external_id="bob").attributes["age"] == 41
    ambiguous = image_attributes_apply(project=project, data=b"file,age\ngroup.png,3\n", name="m.csv", user=lead)
    assert not ambiguous["applied"]
    assert "3 images come from 'group.png'" in ambiguous["rows"][0]["reason"]
    missing = image_attributes_apply(
        project=project, data=b"file,x,y,width,height,age\ngroup.png,0,0,5,5,3\n", name="m.csv", user=lead
    )
    assert missing["rows"][0]["outcome"] == "unknown"


def test_the_data_manager_shows_each_box_with_its_own_thumbnail(boxed_world, boxed, client):
    project, lead = boxed_world["project"], boxed_world["lead"]
    client.force_login(lead)
    data = client.get(f"/api/projects/{project.pk}/data/?search=group").json()
    rows = {r["external_id"]: r for r in data["results"]}
    assert set(rows) == {"group#alice", "group#bob", "group#carol"}
    assert rows["group#bob"]["box"] == {"x": 110, "y": 20, "width": 80, "height": 120}
    assert len({r["thumbnail_url"] for r in rows.values()}) == 3
    page = client.get(f"/projects/{project.pk}/data/?search=group").content.decode()
    assert "box 80×120 of group.png" in page
    detail = client.get(f"/images/{boxed['bob'].pk}/").content.decode()
    assert 'id="boxed-photo"' in detail and 'id="same-photo"' in detail and "group#alice" in detail


def test_import_report_rows_are_per_row(project, lead, folder):
    batch = run(project, lead, folder, [HEADER, *box_rows(bob={"x": "250"})])
    items = list(batch.items.order_by("id"))
    assert [i.row for i in items] == [2, 3, 4]
    assert all(i.outcome == ImportItem.Outcome.REJECTED and i.filename == "group.png" for i in items)
    assert batch.n_rejected == 3 and batch.n_imported == 0
