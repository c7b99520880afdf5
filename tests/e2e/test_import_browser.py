"""A lead uploads photos in the browser and reads the per-file report."""

import pytest
from playwright.sync_api import expect

from labeling.services.projects import project_create
from labeling.services.scales import scales_ensure_builtin
from tests.factories import UserFactory, png_bytes

pytestmark = pytest.mark.browser


def test_upload_reports_each_file(page, live_server, transactional_db, tmp_path, page_errors):
    scales_ensure_builtin()
    lead = UserFactory(username="lead")
    project = project_create(name="Upload test", created_by=lead)
    good = tmp_path / "good.png"
    good.write_bytes(png_bytes((150, 110, 90)))
    (tmp_path / "copy.png").write_bytes(good.read_bytes())
    (tmp_path / "fake.jpg").write_bytes(b"GIF89a but truncated")
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", "lead")
    page.fill("input[name=password]", "pw-test-123")
    page.click("button[type=submit]")
    page.goto(f"{live_server.url}/projects/{project.id}/import/")
    page.set_input_files(
        "#upload-form input[name=files]", [str(tmp_path / n) for n in ("good.png", "copy.png", "fake.jpg")]
    )
    page.click("#upload-form button[type=submit]")
    page.wait_for_url("**/imports/*/")
    table = page.locator("table")
    expect(table).to_contain_text("good.png")
    expect(page.locator("tr", has_text="copy.png")).to_contain_text("Skipped as duplicate")
    expect(page.locator("tr", has_text="fake.jpg")).to_contain_text("Rejected")
    assert project.images.count() == 1
    assert page_errors == []
