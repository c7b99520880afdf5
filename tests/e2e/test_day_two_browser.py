"""Issue 23's minor items on the pages, in headless Chromium: buttons that send a request are disabled while it
runs (upload, label import, correct, send back, accept, resolve); the data manager says how many images a bulk
action changes and asks before more than a page; the releases page does not overflow with long ids and names an
open phase; the consensus tables beside their plots are not cut; at phone width the top bar fits; a skip
message goes with its image after Backspace.

Screenshots: test-results/day-two-*.png (and /tmp/day-two-*.png).
"""

import re
import shutil
import uuid

import pytest
from playwright.sync_api import expect

from labeling.models import ImageExclusion, Label, Phase
from labeling.services.labels import label_submit
from labeling.services.phases import calibration_configure, phase_close, phase_get, phase_open
from labeling.services.projects import project_create
from labeling.services.scales import scales_ensure_builtin
from tests.e2e.test_labeling_browser import IMAGE_READY, sign_in
from tests.e2e.test_review_browser import reviewed  # noqa: F401  (a fixture: a review with one outlier)
from tests.factories import MembershipFactory, UserFactory, png_bytes
from tests.labeling.helpers import add_images

pytestmark = pytest.mark.browser


def save(page, results_dir, name: str, full_page: bool = False) -> None:
    path = results_dir / f"day-two-{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    shutil.copy(path, f"/tmp/day-two-{name}.png")


class Held:
    """POST requests to ``pattern`` held until released: what a page shows while a request runs."""

    def __init__(self, page, pattern: str):
        self.routes = []
        self.n = 0  # POST requests held so far
        page.route(pattern, self._handle)

    def _handle(self, route):
        if route.request.method == "POST":
            self.n += 1
            self.routes.append(route)
        else:
            route.continue_()

    def release(self):
        while self.routes:
            self.routes.pop(0).continue_()


def wait_held(page, held: Held, n: int = 1) -> None:
    page.wait_for_function("() => true")  # let Playwright dispatch the route
    for _ in range(50):
        if held.n >= n:
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"{held.n} request(s) held, expected {n}")


@pytest.fixture
def team(transactional_db):
    scales_ensure_builtin()
    lead = UserFactory(username="lead")
    project = project_create(name="Day two", created_by=lead, labels_per_image=2)
    labelers = [
        MembershipFactory(project=project, user=UserFactory(username=f"lab{i}"), pseudonym=f"L{i}") for i in (1, 2, 3)
    ]
    return {"project": project, "lead": lead, "labelers": labelers}


def test_upload_and_label_import_buttons_are_disabled_while_they_run(
    page, live_server, team, tmp_path, page_errors, results_dir
):
    project = team["project"]
    sign_in(page, live_server, "lead")
    (tmp_path / "a.png").write_bytes(png_bytes((150, 110, 90)))
    page.goto(f"{live_server.url}/projects/{project.id}/import/")
    held = Held(page, "**/api/projects/*/imports/")
    page.set_input_files("#upload-form input[name=files]", str(tmp_path / "a.png"))
    button = page.locator("#upload-form button[type=submit]")
    button.click()
    wait_held(page, held)
    expect(button).to_be_disabled()
    button.click(force=True)  # a second click while it runs sends nothing
    page.wait_for_timeout(300)
    assert len(held.routes) == 1
    save(page, results_dir, "upload-busy")
    held.release()
    page.wait_for_url("**/imports/*/")
    assert project.images.count() == 1

    # Label import on an open phase: disabled while the file is imported, enabled again after.
    add_images(project, 2)
    phase = open_calibration_1(project)
    page.goto(f"{live_server.url}/phases/{phase.id}/")
    held = Held(page, "**/labels-import/")
    image = project.images.order_by("id").first()
    (tmp_path / "labels.csv").write_text(f"image_id;labeler;tones\n{image.external_id};L1;4\n")
    page.set_input_files("#labels-import input[name=file]", str(tmp_path / "labels.csv"))
    button = page.locator("#labels-import button[type=submit]")
    button.click()
    wait_held(page, held)
    expect(button).to_be_disabled()
    held.release()
    expect(page.locator("#labels-import-report")).to_contain_text("1 imported, 0 rejected")
    expect(button).to_be_enabled()
    assert Label.objects.filter(phase=phase).count() == 1
    assert page_errors == []


def open_calibration_1(project):
    calibration_configure(project=project, size=3, calibration_1_size=3, n_repeated=0, seed=2)
    return phase_open(phase=phase_get(project, "calibration_1"), labels_per_image=2)


def test_correct_send_back_and_decide_are_disabled_while_they_run(
    page,
    live_server,
    reviewed,  # noqa: F811
    page_errors,
    results_dir,
):
    sign_in(page, live_server, "lead")
    page.goto(f"{live_server.url}/phases/{reviewed['post'].id}/review/")
    image = reviewed["images"][0]
    card = page.locator(f"section.review[data-image='{image.id}']")
    label = Label.objects.get(image=image, labeler=reviewed["labelers"][2])

    held = Held(page, "**/corrections/")
    form = card.locator(f"form.correction[data-label='{label.id}']")
    form.locator("select[name=tones]").select_option("3")
    form.locator("input[name=reason]").fill("a slip")
    form.locator("button[type=submit]").click()
    wait_held(page, held)
    expect(form.locator("button[type=submit]")).to_be_disabled()
    form.locator("button[type=submit]").click(force=True)
    page.wait_for_timeout(300)
    assert len(held.routes) == 1
    held.release()
    expect(form.locator(".status")).to_have_text("saved")
    expect(form.locator("button[type=submit]")).to_be_enabled()

    held = Held(page, "**/relabel/")
    relabel = card.locator("form.relabel")
    relabel.locator(f"input[name=labeler_ids][value='{reviewed['labelers'][0].id}']").check()
    relabel.locator("input[name=reason]").fill("look again")
    relabel.locator("button[type=submit]").click()
    wait_held(page, held)
    expect(relabel.locator("button[type=submit]")).to_be_disabled()
    held.release()
    expect(relabel.locator(".status")).to_have_text("saved")

    held = Held(page, "**/review-decisions/")
    decision = card.locator("form.decision")
    accept, resolve = decision.locator("button[value=accepted]"), decision.locator("button[value=resolved]")
    accept.click()
    wait_held(page, held)
    expect(accept).to_be_disabled()
    expect(resolve).to_be_disabled()
    save(page, results_dir, "review-busy")
    held.release()
    expect(card).to_have_attribute("data-state", "accepted")
    expect(resolve).to_be_enabled()
    resolve.click()
    wait_held(page, held, 2)
    expect(resolve).to_be_disabled()
    held.release()
    expect(card).to_have_attribute("data-state", "resolved")
    assert page_errors == []


def test_a_bulk_action_says_how_many_and_asks_before_more_than_a_page(
    page, live_server, team, page_errors, results_dir
):
    project = team["project"]
    images = add_images(project, 61)
    for i, image in enumerate(images):
        image.external_id = f"face_{i:03d}"
        image.save()
    sign_in(page, live_server, "lead")
    page.goto(f"{live_server.url}/projects/{project.id}/data/?search=face_")
    will = page.locator("#dm-will-change")
    expect(will).to_have_text("no image chosen")
    page.locator("input[name=image_ids]").nth(0).check()
    page.locator("input[name=image_ids]").nth(1).check()
    expect(will).to_have_text("will change 2 images")
    page.select_option("#dm-action", "exclude")
    page.fill("#dm-reason", "blurred")
    dialogs, answers = [], []  # the questions asked; whether to say yes to the next one

    def on_dialog(dialog):
        dialogs.append(dialog.message)
        dialog.accept() if answers and answers.pop(0) else dialog.dismiss()

    page.on("dialog", on_dialog)
    page.click("#dm-apply")
    expect(page.locator(".messages")).to_contain_text("2 image(s) excluded")
    assert dialogs == []  # two images: no question
    # Every match (61, more than a page of 50): the number is said, and asked before.
    page.select_option("#dm-scope", "all")
    expect(will).to_have_text("will change 61 images")
    page.select_option("#dm-action", "exclude")
    page.fill("#dm-reason", "blurred")
    save(page, results_dir, "bulk-count")
    page.click("#dm-apply")
    page.wait_for_timeout(500)
    assert len(dialogs) == 1 and "this changes 61 images, more than a page (50)" in dialogs[0]
    assert ImageExclusion.objects.filter(included_at__isnull=True).count() == 2  # dismissed: nothing changed
    answers.append(True)
    page.click("#dm-apply")
    expect(page.locator(".messages")).to_contain_text("59 image(s) excluded")
    assert ImageExclusion.objects.filter(included_at__isnull=True).count() == 61
    assert page_errors == []


def test_the_releases_page_holds_long_ids_and_names_an_open_phase(page, live_server, team, page_errors, results_dir):
    project = team["project"]
    images = add_images(project, 60)
    for i, image in enumerate(images):
        image.external_id = f"street_scene_{i:03d}_" + "x" * 60  # no whitespace to break at
        image.save()
    calibration_configure(project=project, size=4, calibration_1_size=4, n_repeated=0, seed=2)
    phase_open(phase=phase_get(project, "calibration_1"), labels_per_image=2)
    sign_in(page, live_server, "lead")
    page.goto(f"{live_server.url}/projects/{project.id}/releases/")
    expect(page.locator("#open-phase-calibration_1")).to_contain_text("Calibration 1 is still open (8 assignments")
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 1366, f"the releases page is {width} px wide"
    cell = page.locator("#category-no_labels td.examples")
    box = cell.bounding_box()
    assert box["x"] + box["width"] <= 1366
    save(page, results_dir, "releases", full_page=True)
    assert page_errors == []


@pytest.fixture
def retest(team):
    """Calibration 1 of 16 images (8 repeated in calibration 2) labelled by three labelers, L3 two tones deeper."""
    project, labelers = team["project"], team["labelers"]
    add_images(project, 24)
    cal1, cal2 = calibration_configure(project=project, size=24, calibration_1_size=16, n_repeated=8, seed=4)
    for phase in (cal1, cal2):
        phase = phase_open(phase=phase, labels_per_image=3)
        for k, m in enumerate(labelers):
            for n, a in enumerate(phase.assignments.filter(labeler=m).order_by("image_id")):
                tone = min(
                    10, 2 + (a.image_id % 7) + (2 if k == 2 else 0) + (n % 2 if phase.kind == "calibration_2" else 0)
                )
                label_submit(phase=phase, labeler=m, image_id=a.image_id, client_id=uuid.uuid4(), tones=[tone])
        phase_close(phase=phase)
    return project


def test_the_consensus_tables_beside_their_plots_are_not_cut(page, live_server, retest, page_errors, results_dir):
    sign_in(page, live_server, "lead")
    cal2 = Phase.objects.get(project=retest, kind="calibration_2")
    page.goto(f"{live_server.url}/projects/{retest.id}/consensus/?phase={cal2.id}")
    for section, table in (
        ("Test-retest (calibration 1", "#test-retest"),
        ("Agreement per tone band in", "#bias-bands"),
    ):
        fold = page.locator("details.fold", has=page.locator(":scope > summary", has_text=section))
        fold.locator(":scope > summary").click()
        expect(page.locator(table)).to_be_visible()
        cut = page.evaluate(
            f"() => {{ const t = document.querySelector('{table}'); return [t.scrollWidth, t.clientWidth]; }}"
        )
        assert cut[0] <= cut[1] + 1, f"{table} is cut: {cut[0]} px wide in {cut[1]} px"
    save(page, results_dir, "consensus", full_page=True)
    assert page_errors == []


def test_at_phone_width_the_top_bar_fits(browser, live_server, team, page_errors, results_dir):
    project = team["project"]
    add_images(project, 3)
    cal1 = open_calibration_1(project)
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    page = context.new_page()
    page.on("pageerror", lambda exc: page_errors.append(str(exc)))
    sign_in(page, live_server, "lead")
    page.goto(f"{live_server.url}/projects/{project.id}/")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    nav = page.locator(".topnav")
    assert nav.bounding_box()["x"] + nav.bounding_box()["width"] <= 390
    assert page.locator(".topbar").bounding_box()["height"] < 100  # two lines: brand and account, navigation
    # The last link is reached by scrolling the navigation itself, not the page.
    page.locator(".topnav a", has_text="Audit").scroll_into_view_if_needed()
    expect(page.locator(".topnav a", has_text="Audit")).to_be_in_viewport()
    assert page.evaluate("() => window.scrollX") == 0
    save(page, results_dir, "phone-project")
    page.context.clear_cookies()
    sign_in(page, live_server, "lab1")
    page.goto(f"{live_server.url}/phases/{cal1.id}/label/")
    page.wait_for_function(IMAGE_READY)
    assert page.locator(".topbar").bounding_box()["height"] < 100
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    save(page, results_dir, "phone-labeling")
    context.close()
    assert page_errors == []


def test_a_skip_message_goes_with_its_image_after_backspace(page, live_server, team, page_errors):
    project = team["project"]
    add_images(project, 3)
    cal1 = open_calibration_1(project)
    sign_in(page, live_server, "lab1")
    page.goto(f"{live_server.url}/phases/{cal1.id}/label/")
    page.wait_for_function(IMAGE_READY)
    first = page.get_attribute("#stage-canvas img", "src")
    page.keyboard.press("Digit4")
    page.keyboard.press("Enter")
    page.wait_for_function(
        f"() => !document.querySelector('#stage-canvas img').getAttribute('src').includes('{first}')"
    )
    page.wait_for_function(IMAGE_READY)
    page.keyboard.press("s")
    page.keyboard.press("Digit1")
    toast = page.locator("#toast")
    expect(toast).to_contain_text(re.compile("Skip: .*Press Enter to submit"))
    page.keyboard.press("Backspace")
    page.wait_for_function(f"() => document.querySelector('#stage-canvas img').getAttribute('src') === '{first}'")
    # At once, not when its timer (2.6 s) ends.
    assert page.evaluate("() => document.getElementById('toast').hidden")
    # A message about the saving (not about one image) stays when the image changes.
    page.keyboard.press("Escape")
    page.wait_for_function(IMAGE_READY)
    expect(page.locator("#answer-value")).to_contain_text("Skipped")  # the draft is kept
    assert page_errors == []
