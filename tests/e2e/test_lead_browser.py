"""Issue 14 in headless Chromium: a lead closes a phase (after reading what it means) and reopens it."""

import pytest
from playwright.sync_api import expect

from labeling.models import Phase, PhaseReopening
from labeling.services.projects import project_create
from labeling.services.scales import scales_ensure_builtin
from tests.factories import MembershipFactory, UserFactory
from tests.labeling.helpers import add_images, open_calibration_1

pytestmark = pytest.mark.browser
PASSWORD = "pw-test-123"


@pytest.fixture
def study(transactional_db):
    scales_ensure_builtin()
    lead = UserFactory(username="lead")
    project = project_create(name="Lead flows", created_by=lead, labels_per_image=2)
    labelers = [
        MembershipFactory(project=project, user=UserFactory(username=f"lab{i}"), pseudonym=f"L{i}") for i in (1, 2)
    ]
    images = add_images(project, 8)
    return {"project": project, "lead": lead, "labelers": labelers, "images": images}


def sign_in(page, live_server, username):
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")


def test_close_needs_confirmation_and_reopen_is_recorded(page, live_server, study, page_errors, results_dir):
    cal1 = open_calibration_1(study["project"], size=4, cal1=2, labels_per_image=2)
    sign_in(page, live_server, "lead")
    page.goto(f"{live_server.url}/phases/{cal1.id}/")
    page.click("#close-phase summary")
    box = page.locator("#close-phase .confirm-box")
    expect(box).to_contain_text("4 assignments will stay unfinished")
    expect(box).to_contain_text("L1: 2, L2: 2")
    page.screenshot(path=str(results_dir / "lead-close-confirm.png"), full_page=True)
    box.locator("button[type=submit]").click()
    expect(page.locator(".badge.closed")).to_be_visible()
    cal1.refresh_from_db()
    assert cal1.status == Phase.Status.CLOSED
    page.click("#reopen-phase summary")
    page.fill("#reopen-phase textarea[name=reason]", "Closed by mistake: L2 had not started")
    page.screenshot(path=str(results_dir / "lead-reopen.png"), full_page=True)
    page.click("#reopen-phase button[type=submit]")
    expect(page.locator(".badge.open")).to_be_visible()
    expect(page.locator("#reopenings")).to_contain_text("Closed by mistake: L2 had not started")
    cal1.refresh_from_db()
    assert cal1.status == Phase.Status.OPEN
    assert PhaseReopening.objects.get(phase=cal1).reopened_by == study["lead"]
    assert page_errors == []
