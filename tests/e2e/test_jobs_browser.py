"""Issue 14: after an upload the lead finds its background work (display images, baselines) on the jobs page."""

import pytest
from playwright.sync_api import expect

from labeling.services.projects import project_create
from labeling.services.scales import scales_ensure_builtin
from tests.factories import UserFactory, png_bytes

pytestmark = pytest.mark.browser


def test_an_upload_appears_on_the_jobs_page_with_its_progress(
    page, live_server, transactional_db, tmp_path, page_errors
):
    scales_ensure_builtin()
    lead = UserFactory(username="lead")
    project = project_create(name="Upload study", created_by=lead)
    files = []
    for i, colour in enumerate([(150, 110, 90), (90, 60, 40)]):
        path = tmp_path / f"p{i}.png"
        path.write_bytes(png_bytes(colour))
        files.append(str(path))
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", "lead")
    page.fill("input[name=password]", "pw-test-123")
    page.click("button[type=submit]")
    page.goto(f"{live_server.url}/projects/{project.id}/import/")
    page.set_input_files("#upload-form input[name=files]", files)
    page.click("#upload-form button[type=submit]")
    page.wait_for_url("**/imports/*/")

    page.click(f'nav.topnav a[href="/projects/{project.id}/jobs/"]')
    row = page.locator("#jobs tbody tr").first
    expect(row).to_contain_text("display images and baselines")
    # In-process the job is done when the upload answers; with a worker the page refreshes itself until it is.
    expect(row.locator(".badge")).to_have_text("Done", timeout=60_000)
    expect(row.locator("td.num").nth(0)).to_have_text("2")
    row.locator("td a").first.click()
    expect(page.locator("#job-done")).to_have_text("2")
    expect(page.locator("main")).to_contain_text("Runs")
    assert page_errors == []
