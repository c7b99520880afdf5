"""Issue 23 in headless Chromium: a lead gives an uploaded photo its subject and attributes on the image page."""

import pytest
from playwright.sync_api import expect

from labeling.models import AuditEntry, Image
from labeling.services.projects import project_create
from labeling.services.scales import scales_ensure_builtin
from tests.factories import UserFactory, make_image

pytestmark = pytest.mark.browser
PASSWORD = "pw-test-123"


@pytest.fixture
def photo(transactional_db):
    scales_ensure_builtin()
    lead = UserFactory(username="lead")
    project = project_create(name="Attributes", created_by=lead, labels_per_image=2)
    return make_image(project, colour=(180, 120, 90), name="street.png")


def test_the_lead_edits_the_subject_and_attributes_on_the_image_page(
    page, live_server, photo, page_errors, results_dir
):
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", "lead")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.goto(f"{live_server.url}/images/{photo.id}/")
    page.click("#edit-attributes summary")
    form = page.locator("#edit-attributes form")
    form.locator("input[name=subject_id]").fill("P17")
    form.locator("textarea[name=subject_attributes]").fill("gender: woman\nbody_shape 0.4")
    form.locator("button[type=submit]").click()
    # The mistake (no colon) is shown next to its field; nothing saved.
    expect(page.locator("#edit-attributes")).to_contain_text("Line 2: write “name: value”")
    assert Image.objects.get(pk=photo.pk).subject_id is None
    page.screenshot(path=str(results_dir / "image-attributes-error.png"), full_page=True)
    page.locator("#edit-attributes textarea[name=subject_attributes]").fill("gender: woman\nbody_shape: 0.4")
    page.locator("#edit-attributes textarea[name=attributes]").fill("pose: frontal")
    page.locator("#edit-attributes button[type=submit]").click()
    expect(page.locator(".messages")).to_contain_text("Saved: subject_id")
    expect(page.locator("dl.kv")).to_contain_text("P17")
    expect(page.locator("dl.kv")).to_contain_text("body_shape")
    page.screenshot(path=str(results_dir / "image-attributes-saved.png"), full_page=True)
    image = Image.objects.select_related("subject").get(pk=photo.pk)
    assert image.subject.external_id == "P17"
    assert image.subject.attributes == {"gender": "woman", "body_shape": 0.4} and image.attributes == {
        "pose": "frontal"
    }
    assert AuditEntry.objects.filter(action="image.attributes", object_id=str(photo.pk)).count() == 1
    assert page_errors == []
