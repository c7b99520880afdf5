"""Issue 14 in headless Chromium: the consensus dashboard opens on a summary; every section is a click away."""

import pytest
from playwright.sync_api import expect

from labeling.services.projects import project_create
from labeling.services.scales import scales_ensure_builtin
from tests.factories import MembershipFactory, UserFactory
from tests.labeling.helpers import add_images, open_calibration_1, submit

pytestmark = pytest.mark.browser
PASSWORD = "pw-test-123"


@pytest.fixture
def labelled(transactional_db):
    scales_ensure_builtin()
    lead = UserFactory(username="lead")
    project = project_create(name="Consensus summary", created_by=lead, labels_per_image=3)
    labelers = [
        MembershipFactory(project=project, user=UserFactory(username=f"lab{i}"), pseudonym=f"L{i}") for i in (1, 2, 3)
    ]
    add_images(project, 8)
    cal1 = open_calibration_1(project, size=8, cal1=8, labels_per_image=3)
    for k, m in enumerate(labelers):
        for n, a in enumerate(cal1.assignments.filter(labeler=m).order_by("image_id")):
            # L3 labels two tones deeper than the others on every image.
            submit(cal1, m, a.image_id, tones=[min(10, 2 + n % 6 + (2 if k == 2 else 0))])
    return project


def test_dashboard_opens_on_a_summary_and_sections_fold(page, live_server, labelled, page_errors, results_dir):
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", "lead")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.goto(f"{live_server.url}/projects/{labelled.id}/consensus/")
    summary = page.locator("#summary")
    expect(summary).to_be_visible()
    expect(summary).to_contain_text("Krippendorff's alpha, ordinal")
    expect(summary).to_contain_text("Labeler bias beyond chance: L3")
    # The details are folded: the page is short until the lead opens a section.
    height = page.evaluate("document.body.scrollHeight")
    assert height < 2000, height
    labelers = page.locator("details.fold", has_text="Labelers in")
    expect(labelers.locator("table").first).to_be_hidden()
    page.screenshot(path=str(results_dir / "consensus-summary.png"), full_page=True)
    labelers.locator("summary").click()
    expect(labelers.locator("table").first).to_be_visible()
    expect(labelers.locator("table").first).to_contain_text("L3")
    page.screenshot(path=str(results_dir / "consensus-section-open.png"), full_page=True)
    # Issue 12: every rate has its 95% interval; 8 images are too few to read most rates.
    side = page.locator("details.fold", has_text="Phases side by side")
    side.locator("summary").click()
    table = side.locator("table").first
    expect(table).to_contain_text("Pairs of labels that agree exactly")
    expect(table).to_contain_text("too little data: n=8, 95% interval")
    expect(table).to_contain_text("Range ≥ 3 tones (share of images with 2+ labels)")
    expect(side).to_contain_text("clustered by image")
    page.screenshot(path=str(results_dir / "consensus-intervals.png"), full_page=True)
    assert page_errors == []
