"""A lead's post-calibration review, end to end in headless Chromium.

Calibration 1 has been labelled with one clear outlier; the lead opens the review
page of the post-calibration phase, records a correction with a reason and sends
another image back to a labeler. The database must keep every revision.
"""

import uuid

import pytest
from playwright.sync_api import expect

from labeling.models import Assignment, Label, LabelRevision
from labeling.services.labels import label_submit
from labeling.services.phases import calibration_configure, phase_close, phase_get, phase_open
from labeling.services.projects import project_create
from labeling.services.scales import scales_ensure_builtin
from tests.factories import MembershipFactory, UserFactory, make_image

pytestmark = pytest.mark.browser
PASSWORD = "pw-test-123"


@pytest.fixture
def reviewed(transactional_db):
    scales_ensure_builtin()
    lead = UserFactory(username="lead")
    project = project_create(name="Review test", created_by=lead, labels_per_image=3)
    labelers = [
        MembershipFactory(project=project, user=UserFactory(username=f"lab{i}"), pseudonym=f"L{i}") for i in (1, 2, 3)
    ]
    images = [make_image(project, colour=(200 - 30 * i, 150 - 20 * i, 120 - 15 * i)) for i in range(3)]
    cal1, _ = calibration_configure(project=project, size=3, calibration_1_size=3, n_repeated=0, seed=5)
    cal1 = phase_open(phase=cal1)
    answers = {0: [3, 3, 9], 1: [5, 5, 6], 2: [7, 7, 7]}  # image 0: L3's 9 is an outlier
    for k, image in enumerate(images):
        for m, tone in zip(labelers, answers[k]):
            label_submit(phase=cal1, labeler=m, image_id=image.id, client_id=uuid.uuid4(), tones=[tone])
    phase_close(phase=cal1)
    for kind in ("calibration_2", "main"):
        phase = phase_get(project, kind)
        phase.status = "closed"
        phase.save()
    post = phase_open(phase=phase_get(project, "post_calibration"))
    return {"project": project, "post": post, "labelers": labelers, "images": images, "cal1": cal1}


def test_lead_corrects_an_outlier_and_sends_an_image_back(page, live_server, reviewed, page_errors, results_dir):
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", "lead")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.goto(f"{live_server.url}/phases/{reviewed['post'].id}/review/")
    outlier_image = reviewed["images"][0]
    card = page.locator(f"section.review[data-image='{outlier_image.id}']")
    expect(card).to_contain_text("L3's 9 is far from every other label")
    label = Label.objects.get(image=outlier_image, labeler=reviewed["labelers"][2])
    form = card.locator(f"form.correction[data-label='{label.id}']")
    form.locator("select[name=tones]").select_option("3")
    form.locator("input[name=reason]").fill("9 is a slip: the face is clearly light")
    form.locator("button[type=submit]").click()
    expect(form.locator(".status")).to_have_text("saved")
    # A correction without a reason is refused by the browser's own validation (required field).
    second = reviewed["images"][1]
    relabel = page.locator(f"form.relabel[data-image='{second.id}']")
    if relabel.count() == 0:  # image 1 may not be listed (5, 5, 6 is near consensus): use image 0's form
        relabel = card.locator("form.relabel")
        second = outlier_image
    relabel.locator(f"input[name=labeler_ids][value='{reviewed['labelers'][0].id}']").check()
    relabel.locator("input[name=reason]").fill("please look again at the neck")
    relabel.locator("button[type=submit]").click()
    expect(relabel.locator(".status")).to_have_text("saved")
    page.screenshot(path=str(results_dir / "review-page.png"), full_page=True)
    assert page_errors == []

    label.refresh_from_db()
    assert label.value == 3 and label.n_revisions == 2
    revisions = list(label.revisions.order_by("number").values_list("source", "tone_low", "reason"))
    assert revisions == [("labeler", 9, ""), ("correction", 3, "9 is a slip: the face is clearly light")]
    assert LabelRevision.objects.get(label=label, number=2).author.username == "lead"
    request = Assignment.objects.get(phase=reviewed["post"], image=second, labeler=reviewed["labelers"][0])
    assert request.kind == "relabel" and request.request_reason == "please look again at the neck"
