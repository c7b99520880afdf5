"""A lead makes a dataset release from the releases page, end to end in headless Chromium."""

import csv
import hashlib
import io
import json
import uuid
import zipfile

import pytest
from playwright.sync_api import expect

from labeling.models import Release
from labeling.services.labels import label_submit
from labeling.services.phases import calibration_configure, phase_close, phase_open
from labeling.services.projects import project_create
from labeling.services.scales import scales_ensure_builtin
from tests.card_texts import card_texts_for_tests
from tests.factories import MembershipFactory, UserFactory, make_image

pytestmark = pytest.mark.browser
PASSWORD = "pw-test-123"
CARD = card_texts_for_tests(consent="Written consent of every person photographed.")  # looked for in the card


@pytest.fixture
def labelled(transactional_db, jobs_here):
    scales_ensure_builtin()
    lead = UserFactory(username="lead")
    project = project_create(name="Release test", created_by=lead, labels_per_image=3)
    labelers = [
        MembershipFactory(project=project, user=UserFactory(username=f"lab{i}"), pseudonym=f"L{i}") for i in (1, 2, 3)
    ]
    images = [make_image(project, colour=(200 - 30 * i, 150 - 20 * i, 120 - 15 * i)) for i in range(3)]
    cal1, _ = calibration_configure(project=project, size=3, calibration_1_size=3, n_repeated=0, seed=5)
    cal1 = phase_open(phase=cal1)
    for k, image in enumerate(images):
        for m, tone in zip(labelers, [3 + k, 3 + k, 4 + k], strict=True):
            label_submit(phase=cal1, labeler=m, image_id=image.id, client_id=uuid.uuid4(), tones=[tone])
    phase_close(phase=cal1)
    return {"project": project, "images": images, "labelers": labelers}


def test_lead_makes_a_release_and_reads_its_data_card(page, live_server, labelled, page_errors, results_dir):
    project = labelled["project"]
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", "lead")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.goto(f"{live_server.url}/projects/{project.pk}/")
    page.click("nav.topnav >> text=Releases")
    expect(page.locator("#category-no_labels")).to_contain_text("0")
    page.screenshot(path=str(results_dir / "release-readiness.png"), full_page=True)
    for name, text in CARD.items():
        page.fill(f"textarea[name={name}]", text)
    page.screenshot(path=str(results_dir / "release-form.png"), full_page=True)
    page.click("#release-form button[type=submit]")
    expect(page.locator("h1")).to_contain_text("Release v1")
    expect(page.locator("h1 .badge")).to_have_text("Published")
    expect(page.locator("text=images.parquet")).to_be_visible()
    card = page.frame_locator("iframe.data-card")
    expect(card.locator("body")).to_contain_text(CARD["consent"])
    page.screenshot(path=str(results_dir / "release-detail.png"), full_page=True)
    expect(card.locator("h1")).to_contain_text("Data card")
    page.wait_for_timeout(500)  # the screenshot only: let the frame paint
    page.locator("iframe.data-card").screenshot(path=str(results_dir / "release-card.png"))
    release = Release.objects.get(project=project, version=1)
    assert release.status == Release.Status.PUBLISHED
    with page.expect_download() as download:
        page.click("text=Download the zip")
    with zipfile.ZipFile(download.value.path()) as bundle:
        names = bundle.namelist()
        top = names[0].split("/")[0]
        manifest = json.loads(bundle.read(f"{top}/manifest.json"))
        # Every file in the zip is the file the database recorded, byte for byte.
        for name in names:
            if not name.endswith("/"):
                recorded = release.manifest["files"][name.split("/", 1)[1]]
                assert hashlib.sha256(bundle.read(name)).hexdigest() == recorded["sha256"], name
        rows = list(csv.DictReader(io.TextIOWrapper(bundle.open(f"{top}/images.csv"), encoding="utf-8")))
        label_rows = list(csv.DictReader(io.TextIOWrapper(bundle.open(f"{top}/labels.csv"), encoding="utf-8")))
        card = bundle.read(f"{top}/data_card.md").decode()
    assert set(manifest["files"]) == set(release.manifest["files"]) - {"manifest.json"}
    assert {r["external_id"]: float(r["final_value"]) for r in rows} == {
        image.external_id: (3 + k + 3 + k + 4 + k) / 3 for k, image in enumerate(labelled["images"])
    }
    assert len(label_rows) == 9
    assert {r["labeler"] for r in label_rows} == {"L1", "L2", "L3"}
    assert all("lab" not in r["labeler"] for r in label_rows)
    assert CARD["consent"] in card
    assert page_errors == []
