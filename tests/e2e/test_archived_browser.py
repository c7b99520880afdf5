"""Issue 14 in headless Chromium: an archived project's pages say so and hide the button of every change, while
its data stays in view and unarchiving stays one click away."""

import pytest
from playwright.sync_api import expect

from labeling.services.project_lifecycle import project_archive
from labeling.services.projects import project_create
from labeling.services.scales import scales_ensure_builtin
from tests.factories import MembershipFactory, UserFactory
from tests.labeling.helpers import add_images, open_calibration_1

pytestmark = pytest.mark.browser
PASSWORD = "pw-test-123"


@pytest.fixture
def archived(transactional_db):
    scales_ensure_builtin()
    lead = UserFactory(username="lead")
    project = project_create(name="Finished study", created_by=lead, labels_per_image=2)
    for i in (1, 2):
        MembershipFactory(project=project, user=UserFactory(username=f"lab{i}"), pseudonym=f"L{i}")
    add_images(project, 4)
    phase = open_calibration_1(project, size=4, cal1=2, labels_per_image=2)
    project_archive(project=project, user=lead)
    return {"project": project, "phase": phase}


def sign_in(page, live_server, username):
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")


def test_an_archived_projects_pages_hide_every_change(page, live_server, archived, page_errors, results_dir):
    project, phase = archived["project"], archived["phase"]
    sign_in(page, live_server, "lead")
    page.goto(f"{live_server.url}/phases/{phase.pk}/")
    expect(page.locator(".archived-banner")).to_contain_text("This project is archived")
    page.screenshot(path=str(results_dir / "archived-phase.png"), full_page=True)
    for button in page.locator("main form:not([method=get]) button").all():
        expect(button).to_be_hidden()
    expect(page.locator("#close-phase")).to_be_hidden()  # the folded confirmation, not only its button
    # The data manager's table stays, its bulk actions go.
    page.goto(f"{live_server.url}/projects/{project.pk}/data/")
    expect(page.locator("table.dm")).to_be_visible()
    for button in page.locator("#dm-table button").all():
        expect(button).to_be_hidden()
    expect(page.locator("form[method=get] button[type=submit]").first).to_be_visible()  # filtering still works
    # The settings page: saving hidden, unarchiving offered.
    page.goto(f"{live_server.url}/projects/{project.pk}/settings/")
    expect(page.get_by_role("button", name="Save")).to_be_hidden()
    page.get_by_role("button", name="Unarchive").click()
    expect(page.locator(".archived-banner")).to_have_count(0)
    page.goto(f"{live_server.url}/phases/{phase.pk}/")
    expect(page.locator("#close-phase summary")).to_be_visible()
    assert page_errors == []
