"""Issue 13 in headless Chromium: a lead erases a subject from the image page's link, confirms by typing the
subject's id, lands on the audit log with the erasure as its newest entry, and the release made before says so."""

import pytest
from playwright.sync_api import expect

from labeling.models import Image, Subject
from labeling.services import releases as release_services
from labeling.services.projects import project_create
from labeling.services.scales import scales_ensure_builtin
from tests.factories import MembershipFactory, UserFactory
from tests.labeling.helpers import add_images, label_all, open_calibration_1

pytestmark = pytest.mark.browser
PASSWORD = "pw-test-123"


@pytest.fixture
def released(transactional_db, jobs_here):
    scales_ensure_builtin()
    lead = UserFactory(username="lead")
    project = project_create(name="Body scans", created_by=lead, labels_per_image=2)
    members = [
        MembershipFactory(project=project, user=UserFactory(username=f"lab{i}"), pseudonym=f"L{i}") for i in (1, 2)
    ]
    add_images(project, 4, subjects=2)
    phase = open_calibration_1(project, size=4, cal1=4, labels_per_image=2)
    for m in members:
        label_all(phase, m, tone=4)
    release = release_services.release_request(
        project=project,
        user=lead,
        rule={"include": dict.fromkeys(release_services.CATEGORIES, True)},
        card_text={name: f"The {name}." for name in release_services.CARD_FIELDS},
    )
    assert release_services.release_build(release).status == "published"  # built on commit; this returns it
    return {"project": project, "image": Image.objects.filter(subject__external_id="S0").first()}


def sign_in(page, live_server, username):
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")


def test_a_lead_erases_a_subject_and_sees_it_in_the_audit_log(page, live_server, released, page_errors, results_dir):
    project, image = released["project"], released["image"]
    sign_in(page, live_server, "lead")
    page.goto(f"{live_server.url}/images/{image.pk}/")
    page.locator("#erase-subject").click()
    expect(page.locator("h1")).to_have_text("Erase subject S0")
    expect(page.locator("#erase-counts")).to_contain_text("2 image(s)")
    expect(page.locator("main")).to_contain_text("v1 (2 rows")
    page.screenshot(path=str(results_dir / "erase-confirm.png"), full_page=True)
    page.fill("input[name=reason]", "the person asked on 1 December")
    page.fill("input[name=confirm]", "S0")
    page.get_by_role("button", name="Erase subject S0").click()
    expect(page).to_have_url(f"{live_server.url}/projects/{project.pk}/audit/")
    first = page.locator("#audit tbody tr").first
    expect(first).to_have_attribute("data-action", "subject.erase")
    expect(first).to_contain_text("lead")
    expect(first).to_contain_text('"subject": "S0"')
    expect(first).to_contain_text("127.0.0.1")
    expect(page.locator("body")).to_contain_text("Subject S0 erased: 2 image(s)")
    page.screenshot(path=str(results_dir / "erase-audit.png"), full_page=True)
    assert not Subject.objects.filter(project=project, external_id="S0").exists()
    page.goto(f"{live_server.url}/projects/{project.pk}/releases/1/")
    expect(page.locator(".erasure-notice").first).to_contain_text("Subject S0 was erased on")
    expect(page.locator("main")).to_contain_text("download with an erasure notice added")
    page.screenshot(path=str(results_dir / "erase-release-notice.png"), full_page=True)
    assert page_errors == []
    # The data card as downloaded (an attachment: fetched with the session, then shown as a browser would open
    # the saved file): the notice is the first thing on the page, above the card's title.
    card = page.request.get(f"{live_server.url}/api/projects/{project.pk}/releases/1/files/data_card.html")
    assert card.ok and card.headers["x-erasure-notice"] == "1"
    page.set_content(card.text())
    notice = page.locator(".fairtone-erasure-notice")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("Subject S0 was erased on")
    expect(notice).not_to_contain_text("the person asked")  # the erasure's reason stays in the app
    assert notice.bounding_box()["y"] < page.locator("h1").bounding_box()["y"]
    page.screenshot(path=str(results_dir / "erase-card-notice.png"))
