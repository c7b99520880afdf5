"""Issue 13, item 10 in headless Chromium: the pages satisfy their Content-Security-Policy.

Every page is served with a policy that allows only this app's own scripts (``labeling.middleware``);
the browser reports anything it refuses on the console, and the shared ``page`` fixture counts such a
report as a page error. This test walks the lead's and the labeler's pages, and the API docs.
"""

import pytest

from labeling.services.projects import project_create
from labeling.services.scales import scales_ensure_builtin
from tests.factories import MembershipFactory, UserFactory
from tests.labeling.helpers import add_images, open_calibration_1

# The CSP walk (~13 s): the slow tier, which CI runs and ``bin/test --fast`` skips (issue 24).
pytestmark = [pytest.mark.browser, pytest.mark.slow]
PASSWORD = "pw-test-123"


@pytest.fixture
def world(transactional_db):
    scales_ensure_builtin()
    lead = UserFactory(username="lead")
    project = project_create(name="CSP", created_by=lead, labels_per_image=1)
    labeler = MembershipFactory(project=project, user=UserFactory(username="lab1"), pseudonym="L1")
    add_images(project, 4)
    phase = open_calibration_1(project, size=4, cal1=4, labels_per_image=1)
    return {"project": project, "phase": phase, "lead": lead, "labeler": labeler}


def sign_in(page, live_server, username):
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")


def test_pages_load_nothing_the_policy_refuses(page, live_server, world, page_errors):
    project, phase = world["project"], world["phase"]
    # Ten pages, some computing a dashboard on first visit: on a loaded 2-core machine one can take
    # longer than the fixture's 10 s.
    page.set_default_navigation_timeout(30_000)
    response = page.goto(f"{live_server.url}/login/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    sign_in(page, live_server, "lead")
    for path in (
        "/",
        f"/projects/{project.id}/",
        f"/projects/{project.id}/images/",
        f"/projects/{project.id}/members/",
        f"/projects/{project.id}/calibration/",
        f"/phases/{phase.id}/",
        f"/projects/{project.id}/baselines/",
        f"/projects/{project.id}/baselines/compare/",
        f"/projects/{project.id}/releases/",
        "/api/docs/",
    ):
        r = page.goto(f"{live_server.url}{path}")
        assert r.status < 500, path
        page.wait_for_load_state("networkidle")
    # The comparison's checkbox submits its form without an inline handler.
    page.goto(f"{live_server.url}/projects/{project.id}/baselines/compare/")
    box = page.locator("input[type=checkbox][name=exclude_flagged]")
    with page.expect_navigation():
        box.click()
    assert "exclude_flagged=" in page.url
    page.context.clear_cookies()
    sign_in(page, live_server, "lab1")
    page.goto(f"{live_server.url}/phases/{phase.id}/label/")
    page.wait_for_selector("img", state="attached")
    page.wait_for_load_state("networkidle")
    assert page_errors == []
