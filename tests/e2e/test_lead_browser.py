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


def test_lead_picks_the_calibration_set_by_clicking(page, live_server, study, page_errors, results_dir):
    from labeling.services.phases import calibration_current

    project = study["project"]
    sign_in(page, live_server, "lead")
    page.goto(f"{live_server.url}/projects/{project.id}/calibration/")
    page.check("input[name=method][value=manual]")
    tiles = page.locator("#picker-grid .thumb")
    expect(tiles).to_have_count(8)
    picked = [img.external_id for img in study["images"][:6]]
    for external_id in picked:
        page.click(f"#picker-grid .thumb[data-external-id='{external_id}']")
    expect(page.locator("#picked-count")).to_have_text("6 images picked.")
    expect(page.locator("#picker-grid .thumb.picked")).to_have_count(6)
    # Unpicking by a second click, and finding by id.
    page.click(f"#picker-grid .thumb[data-external-id='{picked[-1]}']")
    expect(page.locator("#picked-count")).to_have_text("5 images picked.")
    page.fill("#picker-search", picked[0])
    expect(tiles).to_have_count(1)
    # Too few images for statistics: the warning shows before choosing.
    page.fill("input[name=calibration_1_size]", "3")
    expect(page.locator("#calibration-warnings")).to_contain_text("can repeat at most the 3 images")
    page.fill("input[name=n_repeated]", "3")
    expect(page.locator("#calibration-warnings")).to_be_visible()
    expect(page.locator("#calibration-warnings")).to_contain_text("too little data")
    page.check("input[name=every_labeler]")
    page.screenshot(path=str(results_dir / "lead-calibration-pick.png"), full_page=True)
    page.check("input[name=accept_too_few]")
    page.click("#calibration-form button[type=submit]")
    expect(page.locator("#current-set")).to_be_visible()
    current = calibration_current(project)
    assert current["method"] == "manual" and current["every_labeler"]
    assert [i.external_id for i in current["calibration_1"] + current["rest"]] == sorted(picked[:3]) + sorted(
        picked[3:5]
    )
    for external_id in picked[:5]:
        expect(page.locator(f"#current-set [data-external-id='{external_id}']")).to_be_visible()
    page.screenshot(path=str(results_dir / "lead-calibration-current.png"), full_page=True)
    assert page_errors == []


def test_review_resolves_an_item_and_the_labeler_sees_the_reason(browser, live_server, study, page_errors, results_dir):
    from labeling.models import Label, ReviewDecision
    from labeling.services.phases import calibration_configure, phase_close, phase_get, phase_open
    from tests.labeling.helpers import submit

    project, (lab1, lab2) = study["project"], study["labelers"]
    calibration_configure(project=project, size=3, calibration_1_size=3, n_repeated=0, seed=5)
    cal1 = phase_open(phase=phase_get(project, Phase.Kind.CALIBRATION_1), labels_per_image=2)
    third = MembershipFactory(project=project, user=UserFactory(username="lab3"), pseudonym="L3")
    for a in cal1.assignments.select_related("labeler"):
        submit(cal1, a.labeler, a.image_id, tones=[4])
    phase_close(phase=cal1)
    for kind in (Phase.Kind.CALIBRATION_2, Phase.Kind.MAIN):
        phase = phase_get(project, kind)
        phase.status = Phase.Status.CLOSED
        phase.save()
    post = phase_open(phase=phase_get(project, Phase.Kind.POST_CALIBRATION), labeler_ids=[lab1.id, lab2.id, third.id])
    image_id = cal1.assignments.filter(labeler=lab1).first().image_id
    label = Label.objects.get(phase=cal1, image_id=image_id, labeler=lab1)
    label.uncertain = True  # listed by the review: an uncertain label
    label.save()

    lead_page = browser.new_context(viewport={"width": 1366, "height": 900}).new_page()
    lead_page.on("pageerror", lambda exc: page_errors.append(str(exc)))
    sign_in(lead_page, live_server, "lead")
    lead_page.goto(f"{live_server.url}/phases/{post.id}/review/")
    card = lead_page.locator(f"section.review[data-image='{image_id}']")
    expect(card.locator(".review-state")).to_have_text("to review")
    # An adjacent pair is offered as a correction.
    expect(card.locator("form.correction select[name=tones] option[value='4+5']").first).to_be_attached()
    relabel = card.locator("form.relabel")
    relabel.locator(f"input[name=labeler_ids][value='{lab1.id}']").check()
    relabel.locator("input[name=reason]").fill("The left half is in shadow: look at the forehead")
    relabel.locator("button[type=submit]").click()
    expect(relabel.locator(".status")).to_have_text("saved")
    card.locator("form.decision input[name=note]").fill("sent back to L1")
    card.locator("form.decision button[value=resolved]").click()
    expect(card.locator(".review-state")).to_have_text("resolved")
    expect(lead_page.locator("#n-resolved")).to_have_text("1")
    expect(lead_page.locator("#n-decided")).to_have_text("1")
    lead_page.screenshot(path=str(results_dir / "lead-review-resolved.png"), full_page=True)
    assert ReviewDecision.objects.get(phase=post, image_id=image_id).state == "resolved"

    labeler_page = browser.new_context(viewport={"width": 1366, "height": 768}).new_page()
    labeler_page.on("pageerror", lambda exc: page_errors.append(str(exc)))
    sign_in(labeler_page, live_server, "lab1")
    labeler_page.goto(f"{live_server.url}/phases/{post.id}/label/")
    note = labeler_page.locator("#review-note")
    expect(note).to_contain_text("Sent back to you for relabeling")
    expect(note).to_contain_text("The left half is in shadow: look at the forehead")
    # A warning goes as soon as its problem is fixed, and never covers the image.
    labeler_page.keyboard.press("Enter")
    toast = labeler_page.locator("#toast")
    expect(toast).to_contain_text("Choose a tone")
    stage, box = labeler_page.locator("#stage").bounding_box(), toast.bounding_box()
    assert box["x"] >= stage["x"] + stage["width"] or box["y"] >= stage["y"] + stage["height"]
    labeler_page.screenshot(path=str(results_dir / "labeler-relabel-reason.png"))
    labeler_page.keyboard.press("4")
    expect(toast).to_be_hidden()
    assert page_errors == []


def test_data_manager_filters_sorts_and_a_bulk_action(page, live_server, study, page_errors, results_dir):
    from labeling.models import ReviewDecision
    from tests.labeling.helpers import submit

    project, lab2 = study["project"], study["labelers"][1]
    cal1 = open_calibration_1(project, size=6, cal1=6, labels_per_image=2)
    first = cal1.phase_images.order_by("image__external_id").first().image
    for a in cal1.assignments.select_related("labeler"):
        submit(cal1, a.labeler, a.image_id, tones=[8 if (a.image_id == first.id and a.labeler == lab2) else 3])
    sign_in(page, live_server, "lead")
    page.goto(f"{live_server.url}/projects/{project.id}/")
    page.click("nav >> text=Data")
    expect(page.locator("#dm-count")).to_have_text("8 images")
    page.select_option("select[name=near_consensus]", "false")
    page.click("#dm-filters button[type=submit]")
    expect(page.locator("#dm-count")).to_have_text("1 image")
    row = page.locator(f"tr[data-external-id='{first.external_id}']")
    expect(row).to_contain_text("L1 ✓")
    expect(row.locator("img")).to_be_visible()
    page.click("a:has-text('Reset')")
    page.click("th a:has-text('Labels')")  # ascending: unlabelled images first
    page.click("th a:has-text('Labels')")  # descending
    expect(page.locator("tbody tr").first).to_contain_text("2")
    page.screenshot(path=str(results_dir / "lead-data-manager.png"), full_page=True)
    page.select_option("select[name=phase]", str(cal1.id))
    page.fill("input[name=search]", first.external_id)
    page.click("#dm-filters button[type=submit]")
    expect(page.locator("#dm-count")).to_have_text("1 image")
    page.check(f"input[name=image_ids][value='{first.id}']")
    page.select_option("select[name=action]", "accept")
    page.fill("#dm-bulk input[name=reason]", "checked by eye")
    page.click("#dm-bulk button[type=submit]")
    expect(page.locator(".messages")).to_contain_text("1 image(s) marked accepted as labelled.")
    expect(page.locator(f"tr[data-external-id='{first.external_id}'] td.dm-review")).to_have_text("accepted")
    assert ReviewDecision.objects.get(image=first).note == "checked by eye"
    assert page_errors == []


def test_data_manager_excludes_images_with_a_reason_and_filters_them(
    page, live_server, study, page_errors, results_dir
):
    from labeling.models import ImageExclusion

    project = study["project"]
    a, b = sorted(study["images"], key=lambda i: i.external_id)[:2]
    sign_in(page, live_server, "lead")
    page.goto(f"{live_server.url}/projects/{project.id}/data/")
    expect(page.locator("#dm-count")).to_have_text("8 images")
    for image in (a, b):
        page.check(f"input[name=image_ids][value='{image.id}']")
    page.select_option("#dm-action", "exclude")
    # No reason: the page asks for one before anything is sent.
    page.click("#dm-bulk button[type=submit]")
    assert page.locator("#dm-reason").evaluate("el => el.validity.valueMissing") is True
    assert not ImageExclusion.objects.exists()
    page.fill("#dm-reason", "Consent withdrawn by the subject")
    page.click("#dm-bulk button[type=submit]")
    expect(page.locator(".messages")).to_contain_text("2 image(s) excluded from the dataset.")
    for image in (a, b):
        cell = page.locator(f"tr[data-external-id='{image.external_id}'] td.dm-dataset")
        expect(cell.locator(".badge.excluded")).to_have_text("excluded")
        expect(cell).to_contain_text("Consent withdrawn by the subject")
    page.select_option("select[name=excluded]", "true")
    page.click("#dm-filters button[type=submit]")
    expect(page.locator("#dm-count")).to_have_text("2 images")
    page.screenshot(path=str(results_dir / "lead-data-manager-excluded.png"), full_page=True)
    # Include one again: it leaves the "excluded" filter; its exclusion stays recorded.
    page.check(f"input[name=image_ids][value='{b.id}']")
    page.select_option("#dm-action", "include")
    page.click("#dm-bulk button[type=submit]")
    expect(page.locator(".messages")).to_contain_text("1 image(s) included again in the dataset.")
    expect(page.locator("#dm-count")).to_have_text("1 image")
    expect(page.locator(f"tr[data-external-id='{a.external_id}'] .badge.excluded")).to_be_visible()
    page.select_option("select[name=excluded]", "false")
    page.click("#dm-filters button[type=submit]")
    expect(page.locator("#dm-count")).to_have_text("7 images")
    expect(page.locator(f"tr[data-external-id='{b.external_id}'] td.dm-dataset")).to_have_text("included")
    assert ImageExclusion.objects.filter(image=b, included_at__isnull=False).count() == 1
    assert list(ImageExclusion.objects.filter(included_at__isnull=True).values_list("image_id", flat=True)) == [a.id]
    assert page_errors == []
