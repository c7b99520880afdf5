"""A photo of three people, end to end in headless Chromium (issue 23): the lead imports it with a manifest
giving each person's box (and a second photo whose bad box is refused, row by row), labelers label each
person on the whole photo with their box outlined and the rest faded, zoom to them with Z, at desktop and
phone width; the release then has one row per person with the box.

Screenshots: test-results/boxes-*.png (and /tmp/boxes-*.png).
"""

import io
import shutil
import zipfile

import pyarrow.parquet as pq
import pytest
from playwright.sync_api import expect

from labeling.models import Image, Label
from labeling.services import releases as release_services
from labeling.services.phases import calibration_configure, phase_open
from labeling.services.projects import project_create
from labeling.services.scales import scales_ensure_builtin
from tests.e2e.test_labeling_browser import IMAGE_READY, sign_in
from tests.factories import MembershipFactory, UserFactory
from tests.labeling.test_releases import CARD, INCLUDE_ALL

pytestmark = pytest.mark.browser

#: The three people of the group photo: skin, shirt, and the box (x, y, width, height) around each.
PEOPLE = {
    "amara": ((94, 58, 42), (40, 90, 160), (60, 110, 220, 470)),
    "ben": ((236, 196, 170), (170, 60, 50), (340, 90, 220, 490)),
    "chen": ((198, 140, 100), (60, 130, 80), (620, 120, 220, 460)),
}
SIZE = (900, 600)


def group_jpeg() -> bytes:
    """A synthetic street scene with three people side by side (heads and shoulders)."""
    from PIL import Image as PILImage
    from PIL import ImageDraw

    img = PILImage.new("RGB", SIZE, (170, 175, 185))
    draw = ImageDraw.Draw(img)
    draw.rectangle((0, 420, SIZE[0], SIZE[1]), fill=(120, 118, 112))  # the pavement
    for x in range(0, SIZE[0], 150):
        draw.rectangle((x + 20, 40, x + 110, 200), fill=(140, 150, 165))  # windows behind
    for skin, shirt, (x, y, w, h) in PEOPLE.values():
        cx = x + w // 2
        draw.rounded_rectangle((x + 10, y + 200, x + w - 10, y + h), radius=60, fill=shirt)  # shoulders
        draw.rectangle((cx - 28, y + 160, cx + 28, y + 220), fill=skin)  # neck
        draw.ellipse((cx - 75, y, cx + 75, y + 190), fill=skin)  # face
        draw.ellipse((cx - 40, y + 70, cx - 20, y + 85), fill=(40, 30, 30))
        draw.ellipse((cx + 20, y + 70, cx + 40, y + 85), fill=(40, 30, 30))
        draw.arc((cx - 30, y + 110, cx + 30, y + 150), 20, 160, fill=(110, 50, 50), width=4)
    buffer = io.BytesIO()
    img.save(buffer, format="JPEG", quality=92)
    return buffer.getvalue()


def pair_jpeg() -> bytes:
    from PIL import Image as PILImage

    buffer = io.BytesIO()
    PILImage.new("RGB", (400, 300), (150, 120, 100)).save(buffer, format="JPEG")
    return buffer.getvalue()


def manifest_csv() -> str:
    lines = ["file,subject_id,gender,body_shape,x,y,width,height"]
    for (name, (_skin, _shirt, (x, y, w, h))), gender in zip(PEOPLE.items(), ("woman", "man", "man"), strict=True):
        lines.append(f"street.jpg,{name},{gender},average,{x},{y},{w},{h}")
    # A second photo: its second box goes past the right edge, so neither of its boxes is imported.
    lines += ["pair.jpg,dara,woman,slim,10,10,150,200", "pair.jpg,eli,man,slim,300,10,150,200"]
    return "\n".join(lines) + "\n"


@pytest.fixture
def study(transactional_db, jobs_here):
    scales_ensure_builtin()
    lead = UserFactory(username="lead")
    project = project_create(name="Street scenes", created_by=lead, labels_per_image=2)
    labelers = [
        MembershipFactory(project=project, user=UserFactory(username=f"labeler{i}"), pseudonym=f"L{i}") for i in (1, 2)
    ]
    return {"project": project, "lead": lead, "labelers": labelers}


def save(page, results_dir, name: str) -> None:
    path = results_dir / f"boxes-{name}.png"
    page.screenshot(path=str(path))
    shutil.copy(path, f"/tmp/boxes-{name}.png")


def mark_and_frame(page) -> tuple[dict, dict, dict]:
    return (
        page.locator("#box-mark").bounding_box(),
        page.locator("#stage-canvas .stage-frame").bounding_box(),
        page.locator("#stage-canvas").bounding_box(),
    )


def label_everyone(page, live_server, phase, labeler, results_dir, prefix: str, tones: dict[str, int]):
    """Label the phase's three people with the keyboard; checks the outline sits on each person's box."""
    sign_in(page, live_server, labeler.user.username)
    page.goto(f"{live_server.url}/phases/{phase.id}/label/")
    for step in range(3):
        page.wait_for_function(IMAGE_READY)
        expect(page.locator("#progress-text")).to_have_text(f"{step} of 3 images done")
        src = page.get_attribute("#stage-canvas img", "src")
        image = Image.objects.select_related("subject").get(pk=int(src.split("/")[2]))
        expect(page.locator("#box-note")).to_be_visible()
        mark, frame, _stage = mark_and_frame(page)
        # The outline is the person's box on the photo as shown (2 px of white border outside it).
        x, y, w, h = image.box
        scale = frame["width"] / SIZE[0]
        assert mark["x"] + 2 == pytest.approx(frame["x"] + x * scale, abs=1.5)
        assert mark["y"] + 2 == pytest.approx(frame["y"] + y * scale, abs=1.5)
        assert mark["width"] - 4 == pytest.approx(w * scale, abs=1.5)
        assert mark["height"] - 4 == pytest.approx(h * scale, abs=1.5)
        if step == 0:
            save(page, results_dir, f"{prefix}-highlighted")
            # Z zooms to the person: their box then fills most of the stage, centred; Z again goes back.
            page.keyboard.press("z")
            page.wait_for_function("() => document.getElementById('stage').classList.contains('zoomed')")
            mark, frame, stage = mark_and_frame(page)
            fill = max(mark["width"] / stage["width"], mark["height"] / stage["height"])
            assert 0.7 < fill < 0.95, fill
            centre = (mark["x"] + mark["width"] / 2, mark["y"] + mark["height"] / 2)
            assert abs(centre[1] - (stage["y"] + stage["height"] / 2)) < stage["height"] * 0.1
            save(page, results_dir, f"{prefix}-zoomed")
            page.keyboard.press("z")
            page.wait_for_function("() => !document.getElementById('stage').classList.contains('zoomed')")
        page.keyboard.press(f"Digit{tones[image.subject.external_id]}")
        page.keyboard.press("Enter")
    expect(page.locator("#complete-panel")).to_be_visible()
    expect(page.locator("#save-status")).to_have_attribute("data-state", "saved")


def test_a_three_person_photo_from_manifest_to_labels_to_release_rows(
    browser, page, live_server, study, results_dir, page_errors, tmp_path
):
    project, lead, labelers = study["project"], study["lead"], study["labelers"]
    # The lead imports the manifest and its zip of photos on the import page.
    archive = tmp_path / "photos.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("street.jpg", group_jpeg())
        z.writestr("pair.jpg", pair_jpeg())
    manifest = tmp_path / "manifest.csv"
    manifest.write_text(manifest_csv())
    sign_in(page, live_server, "lead")
    page.goto(f"{live_server.url}/projects/{project.id}/import/")
    page.set_input_files("#manifest-form input[name=manifest]", str(manifest))
    page.set_input_files("#manifest-form input[name=archive]", str(archive))
    page.click("#manifest-form button[type=submit]")
    page.wait_for_url("**/imports/*/")
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(5)
    for i in range(3):  # rows 2-4: the three people of street.jpg
        expect(rows.nth(i)).to_contain_text("Imported")
        expect(rows.nth(i)).to_contain_text("street.jpg")
    rejected = page.locator("tr", has_text="row 6:")
    expect(rejected).to_contain_text("Rejected")
    expect(rejected).to_contain_text(
        "goes past the photo's right edge: x + width = 450 but the photo is 400 pixels wide"
    )
    expect(page.locator("tr", has_text="row 5:")).to_contain_text("row 6, another box of the same photo, was rejected")
    save(page, results_dir, "import-report")
    assert sorted(Image.objects.values_list("external_id", flat=True)) == ["street#amara", "street#ben", "street#chen"]
    # The data manager: one row per person, each with the thumbnail of their box; the image page outlines it.
    page.goto(f"{live_server.url}/projects/{project.id}/data/")
    expect(page.locator("tbody tr")).to_have_count(3)
    expect(page.locator("tbody tr", has_text="street#ben")).to_contain_text("box 220×490 of street.jpg")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.dm-image img')].every(i => i.complete && i.naturalWidth > 0)"
    )
    sizes = page.evaluate(
        "() => [...document.querySelectorAll('.dm-image img')].map(i => i.naturalWidth / i.naturalHeight)"
    )
    assert all(abs(r - 220 / 470) < 0.06 or abs(r - 220 / 490) < 0.06 or abs(r - 220 / 460) < 0.06 for r in sizes), (
        sizes
    )
    save(page, results_dir, "data-manager")
    ben = Image.objects.get(external_id="street#ben")
    page.goto(f"{live_server.url}/images/{ben.id}/")
    expect(page.locator("#image-box")).to_contain_text("x=340, y=90, 220 × 490 pixels")
    expect(page.locator("#same-photo")).to_contain_text("street#amara")
    save(page, results_dir, "image-page")
    page.context.clear_cookies()

    cal1, _cal2 = calibration_configure(project=project, size=3, calibration_1_size=3, n_repeated=0, seed=3)
    phase_open(phase=cal1, labels_per_image=2)
    tones = {"amara": 9, "ben": 2, "chen": 6}
    label_everyone(page, live_server, cal1, labelers[0], results_dir, "desktop", tones)

    # At phone width: the photo, the outlined person and the tones fit the screen's width.
    phone = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True)
    phone_page = phone.new_page()
    phone_page.on("pageerror", lambda exc: page_errors.append(str(exc)))
    sign_in(phone_page, live_server, labelers[1].user.username)
    phone_page.goto(f"{live_server.url}/phases/{cal1.id}/label/")
    phone_page.wait_for_function(IMAGE_READY)
    mark, frame, stage = mark_and_frame(phone_page)
    assert frame["x"] >= stage["x"] - 1 and frame["x"] + frame["width"] <= stage["x"] + stage["width"] + 1
    assert 0 <= mark["x"] and mark["x"] + mark["width"] <= 390
    width = phone_page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 390, f"the labeling page is {width} px wide at phone width"
    save(phone_page, results_dir, "phone-highlighted")
    phone_page.keyboard.press("z")
    phone_page.wait_for_function("() => document.getElementById('stage').classList.contains('zoomed')")
    save(phone_page, results_dir, "phone-zoomed")
    phone_page.keyboard.press("z")
    phone.close()
    page.context.clear_cookies()
    label_everyone(page, live_server, cal1, labelers[1], results_dir, "second", tones)
    assert Label.objects.filter(phase=cal1).count() == 6

    # The release: one row per person, with their box and their tone.
    release = release_services.release_request(
        project=project, user=lead, rule={"include": INCLUDE_ALL}, card_text=CARD, with_images=True
    )
    release = release_services.release_build(release)
    assert release.status == "published", release.error
    rows = pq.read_table(release_services.release_dir(release) / "images.parquet").to_pylist()
    got = {r["subject_id"]: ((r["box_x"], r["box_y"], r["box_width"], r["box_height"]), r["final_tone"]) for r in rows}
    assert got == {name: (box, tones[name]) for name, (_s, _c, box) in PEOPLE.items()}
    assert page_errors == []
