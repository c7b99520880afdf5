"""The labeler's labeling page, end to end in headless Chromium.

A labeler signs in, labels a calibration phase with the keyboard (and a click),
goes back to change an answer, reaches the end and writes the reflection; the
database must then hold exactly what was answered. A second test cuts the
network during submits and checks each answer is stored exactly once.
"""

import json
import re

import pytest
from playwright.sync_api import expect

from labeling.models import Assignment, Label, LabelRevision, Reflection
from labeling.services.phases import calibration_configure, phase_open
from labeling.services.projects import project_create
from labeling.services.scales import scales_ensure_builtin
from tests.factories import MembershipFactory, UserFactory, make_image

pytestmark = pytest.mark.browser

PASSWORD = "pw-test-123"  # tests.factories.UserFactory
REVERSED_ORDER = list(range(10, 0, -1))  # shown darkest first: the page must follow the project's order
IMAGE_READY = """() => {
  const img = document.querySelector('#stage-canvas img');
  return !!img && img.complete && img.naturalWidth > 0 && document.getElementById('stage-state').hidden;
}"""
DISPLAY_URL = re.compile(r"/images/(\d+)/file/display/")


@pytest.fixture
def calibration(transactional_db):
    """A project of 6 images, 1 lead and 2 labelers, with calibration 1 open."""
    scales_ensure_builtin()  # live_server tests flush the database, built-in scales included
    lead = UserFactory(username="lead")
    project = project_create(
        name="Browser test",
        created_by=lead,  # also makes them the lead
        labels_per_image=2,
        skip_reasons=["no skin visible", "image unusable", "other"],
        tone_order=REVERSED_ORDER,
        instructions="<p>Look at the <strong>cheek</strong> in even light.</p>",
    )
    labelers = [
        MembershipFactory(project=project, user=UserFactory(username=f"labeler{i}"), pseudonym=f"L{i}") for i in (1, 2)
    ]
    colours = [
        (236, 208, 190),
        (214, 170, 140),
        (190, 140, 105),
        (160, 110, 80),
        (120, 80, 55),
        (80, 52, 38),
    ]
    images = [make_image(project, colour=c) for c in colours]
    cal1, _cal2 = calibration_configure(project=project, size=6, calibration_1_size=6, n_repeated=0, seed=1)
    phase_open(phase=cal1, labels_per_image=2)
    return {"project": project, "phase": cal1, "labeler": labelers[0], "images": images}


def sign_in(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)


def shown_image(page, previous: int | None = None) -> int:
    """The id of the image on screen once it is loaded (waits until it differs from ``previous``)."""
    page.wait_for_function(IMAGE_READY)
    if previous is not None:
        page.wait_for_function(
            "prev => !document.querySelector('#stage-canvas img').getAttribute('src').includes(`/images/${prev}/`)",
            arg=previous,
        )
        page.wait_for_function(IMAGE_READY)
    src = page.get_attribute("#stage-canvas img", "src")
    return int(DISPLAY_URL.search(src).group(1))


def test_labeler_labels_a_calibration_phase_with_the_keyboard(live_server, page, page_errors, calibration, results_dir):
    phase, labeler, project = (
        calibration["phase"],
        calibration["labeler"],
        calibration["project"],
    )
    sign_in(page, live_server, labeler.user.username)
    page.goto(f"{live_server.url}/phases/{phase.id}/label/")
    expect(page.locator("#progress-text")).to_have_text("0 of 6 images done")

    # Every tone, in the project's fixed order, with its number and name.
    tones = project.ordered_tones()
    assert [t.position for t in tones] == REVERSED_ORDER
    expect(page.locator(".swatch-number")).to_have_text([str(t.position) for t in tones])
    expect(page.locator(".swatch-name")).to_contain_text([t.name for t in tones])
    for t in tones[:3]:
        chip = page.locator(f'.swatch-button[data-position="{t.position}"] .swatch-chip')
        r, g, b = (int(t.hex_colour[i : i + 2], 16) for i in (1, 3, 5))
        expect(chip).to_have_css("background-color", f"rgb({r}, {g}, {b})")

    # The instructions panel opens and closes with I.
    page.keyboard.press("i")
    expect(page.locator("#instructions-panel")).to_be_visible()
    expect(page.locator("#instructions-panel strong")).to_have_text("cheek")
    page.keyboard.press("i")
    expect(page.locator("#instructions-panel")).to_be_hidden()

    answer = page.locator("#answer-value")
    # 1: a single tone, after zooming (keys and wheel), panning and resetting.
    img1 = shown_image(page)
    # Zoom and pan move the frame that holds the picture (and, for a person's box, its outline).
    style = lambda: page.get_attribute("#stage-canvas .stage-frame", "style")  # noqa: E731
    page.keyboard.press("Equal")
    assert "scale(1.25)" in style()
    page.keyboard.press("ArrowUp")
    assert "translate(0px, 60px) scale(1.25)" in style()
    page.keyboard.press("r")
    assert "translate(0px, 0px) scale(1)" in style()
    page.mouse.move(400, 300)
    page.mouse.wheel(0, -400)
    page.wait_for_function(
        "() => !document.querySelector('#stage-canvas .stage-frame').style.transform.endsWith('scale(1)')"
    )
    page.keyboard.press("r")
    page.keyboard.press("Digit3")
    expect(answer).to_contain_text("3")
    page.keyboard.press("Enter")

    # 2: an adjacent pair with Shift+digit; a non-adjacent pair is refused with a message.
    img2 = shown_image(page, img1)
    expect(page.locator("#progress-text")).to_have_text("1 of 6 images done")
    page.keyboard.press("Digit3")
    page.keyboard.press("Shift+Digit7")
    expect(page.locator("#toast")).to_contain_text("Only adjacent tones")
    expect(page.locator(".swatch-button[aria-pressed=true]")).to_have_count(1)
    page.keyboard.press("Shift+Digit4")
    expect(answer).to_have_text("Between 3 and 4")
    expect(page.locator(".swatch-button[aria-pressed=true]")).to_have_count(2)
    page.screenshot(path=str(results_dir / "label-page.png"))
    sizes = page.evaluate("() => [document.documentElement.scrollHeight, document.documentElement.scrollWidth]")
    assert sizes[0] <= 768 and sizes[1] <= 1366, f"the page scrolls at 1366x768: {sizes}"
    page.keyboard.press("Enter")

    # 3: uncertain.
    img3 = shown_image(page, img2)
    page.keyboard.press("Digit6")
    page.keyboard.press("u")
    expect(page.locator("#answer-flags")).to_contain_text("uncertain")
    page.keyboard.press("Enter")

    # 4: skipped with the second reason.
    img4 = shown_image(page, img3)
    page.keyboard.press("s")
    expect(page.locator("#skip-panel")).to_be_visible()
    page.keyboard.press("Digit2")
    expect(page.locator("#skip-panel")).to_be_hidden()
    expect(answer).to_have_text("Skipped: image unusable")
    page.keyboard.press("Enter")

    # 5: the tenth tone with 0.
    img5 = shown_image(page, img4)
    page.keyboard.press("Digit0")
    expect(answer).to_contain_text("10")
    page.keyboard.press("Enter")

    # Back twice to the skipped image, and change it to tone 7.
    img6 = shown_image(page, img5)
    page.keyboard.press("Backspace")
    assert shown_image(page, img6) == img5
    page.keyboard.press("Backspace")
    assert shown_image(page, img5) == img4
    expect(answer).to_have_text("Skipped: image unusable")
    expect(page.locator("#review-note")).to_be_visible()
    page.keyboard.press("Digit7")
    page.keyboard.press("Enter")
    assert shown_image(page, img4) == img5  # moved on to the next answer
    page.keyboard.press("Escape")  # back to the newest image
    assert shown_image(page, img5) == img6

    # 6: with the mouse.
    page.click('.swatch-button[data-position="8"]')
    expect(answer).to_contain_text("8")
    page.click("#submit-button")
    expect(page.locator("#complete-panel")).to_be_visible()
    expect(page.locator("#progress-text")).to_have_text("6 of 6 images done")
    expect(page.locator("#save-status")).to_have_attribute("data-state", "saved")
    page.screenshot(path=str(results_dir / "label-page-complete.png"))

    # The change shows as such when going back to it.
    for expected in (img6, img5, img4):
        page.keyboard.press("Backspace")
        page.wait_for_function(
            "id => document.querySelector('#stage-canvas img')?.getAttribute('src').includes(`/images/${id}/`)",
            arg=expected,
        )
    expect(page.locator("#review-note")).to_contain_text("Changed (revision 2)")
    expect(answer).to_contain_text("7")
    page.keyboard.press("Escape")
    expect(page.locator("#complete-panel")).to_be_visible()

    # The reflection: a server-side error is shown by its field and the answers are kept.
    page.click("#reflection-link")
    page.wait_for_url(f"**/phases/{phase.id}/reflection/")
    page.fill("#id_minutes_taken", "-5")
    page.fill("#id_unclear_instructions", "Whether to look at the forehead or the cheek.")
    page.check("input[name=biases_noticed][value=recency]")
    page.check("input[name=biases_noticed][value=background]")
    page.fill("#id_biases_other", "Strong make-up on one image.")
    page.fill("#id_mindfulness_plan", "Look at the swatches again after a run of dark tones.")
    page.click("main form button[type=submit]")
    expect(page.locator("#err_minutes_taken")).to_contain_text("Out of range")
    expect(page.locator("#id_unclear_instructions")).to_have_value("Whether to look at the forehead or the cheek.")
    expect(page.locator("input[name=biases_noticed][value=recency]")).to_be_checked()
    page.screenshot(path=str(results_dir / "reflection.png"), full_page=True)
    assert not Reflection.objects.exists()
    page.fill("#id_minutes_taken", "12")
    page.click("main form button[type=submit]")
    page.wait_for_url(lambda url: "/reflection/" not in url)

    # What is stored.
    labels = {lab.image_id: lab for lab in Label.objects.filter(phase=phase, labeler=labeler)}
    assert set(labels) == {img1, img2, img3, img4, img5, img6} == {i.id for i in calibration["images"]}
    assert (labels[img1].tone_low, labels[img1].tone_high, labels[img1].value) == (
        3,
        None,
        3.0,
    )
    assert (labels[img2].tone_low, labels[img2].tone_high, labels[img2].value) == (
        3,
        4,
        3.5,
    )
    assert labels[img3].uncertain is True and labels[img3].value == 6.0
    assert labels[img5].value == 10.0
    assert labels[img6].value == 8.0
    changed = labels[img4]
    assert (changed.value, changed.skip_reason, changed.n_revisions) == (7.0, "", 2)
    first, second = changed.revisions.order_by("number")
    assert (first.skip_reason, first.value, first.source) == (
        "image unusable",
        None,
        LabelRevision.Source.LABELER,
    )
    assert (second.value, second.source) == (7.0, LabelRevision.Source.CHANGE)
    assert all(labels[i].n_revisions == 1 for i in (img1, img2, img3, img5, img6))

    revisions = list(LabelRevision.objects.filter(label__labeler=labeler))
    assert len(revisions) == 7
    assert len({r.client_id for r in revisions}) == 7
    for r in revisions:
        assert r.time_spent_ms > 0
        assert r.tone_order == REVERSED_ORDER
        assert r.client_info["devicePixelRatio"] == 1
        assert r.client_info["innerWidth"] == 1366
        assert "colorGamut" in r.client_info and "colorDepth" in r.client_info
    assert not Label.objects.filter(phase=phase).exclude(labeler=labeler).exists()
    assert Assignment.objects.filter(phase=phase, labeler=labeler, done_at__isnull=True).count() == 0

    reflection = Reflection.objects.get(phase=phase, labeler=labeler)
    assert reflection.minutes_taken == 12
    assert sorted(reflection.biases_noticed) == ["background", "recency"]
    assert reflection.unclear_instructions == "Whether to look at the forehead or the cheek."
    assert reflection.biases_other == "Strong make-up on one image."
    assert reflection.mindfulness_plan.startswith("Look at the swatches")
    assert page_errors == []


def test_a_failed_submit_is_retried_and_stored_once(live_server, page, page_errors, calibration):
    phase, labeler = calibration["phase"], calibration["labeler"]
    network = {"down": True, "lose_next_response": False}
    posted = []  # (image, client_id) of every POST the page tried

    def labels_api(route):
        request = route.request
        if request.method != "POST":
            return route.continue_()
        body = json.loads(request.post_data)
        posted.append((body["image"], body["client_id"]))
        if network["down"]:
            return route.abort("internetdisconnected")  # never reaches the server
        if network["lose_next_response"]:
            network["lose_next_response"] = False
            route.fetch()  # the server stores the answer...
            return route.abort("connectionreset")  # ...but the page never hears back
        return route.continue_()

    page.route(f"**/api/phases/{phase.id}/labels/", labels_api)
    sign_in(page, live_server, labeler.user.username)
    page.goto(f"{live_server.url}/phases/{phase.id}/label/")

    # The first submit fails: the next image is shown anyway, the answer waits in localStorage.
    img1 = shown_image(page)
    page.keyboard.press("Digit2")
    page.keyboard.press("Enter")
    img2 = shown_image(page, img1)
    expect(page.locator("#save-status")).to_have_attribute("data-state", "retrying")
    expect(page.locator("#save-status")).to_contain_text("Offline")
    stored = page.evaluate(
        f"() => JSON.parse(localStorage.getItem('fairtone.pending.{labeler.user.username}.{phase.id}'))"
    )
    assert [e["payload"]["image"] for e in stored] == [img1]
    assert not Label.objects.filter(labeler=labeler).exists()

    # Back online, and even a reload does not lose it.
    network["down"] = False
    page.reload()
    assert shown_image(page) == img2
    expect(page.locator("#save-status")).to_have_attribute("data-state", "saved")
    expect(page.locator("#progress-text")).to_have_text("1 of 6 images done")

    # The server stores the next answer but the response is lost: the retry must not double it.
    network["lose_next_response"] = True
    page.keyboard.press("Digit5")
    page.keyboard.press("Enter")
    shown_image(page, img2)
    expect(page.locator("#save-status")).to_have_attribute("data-state", "saved", timeout=15_000)
    assert page.evaluate(f"() => localStorage.getItem('fairtone.pending.{labeler.user.username}.{phase.id}')") is None

    labels = {lab.image_id: lab for lab in Label.objects.filter(labeler=labeler)}
    assert set(labels) == {img1, img2}
    assert labels[img1].value == 2.0 and labels[img2].value == 5.0
    assert [lab.n_revisions for lab in labels.values()] == [1, 1]
    assert LabelRevision.objects.filter(label__labeler=labeler).count() == 2
    # Each answer kept its one client_id through every attempt, and each was tried more than once.
    for image in (img1, img2):
        attempts = [cid for img, cid in posted if img == image]
        assert len(attempts) >= 2
        assert len(set(attempts)) == 1
        assert LabelRevision.objects.get(label=labels[image]).client_id.hex == attempts[0].replace("-", "")
    assert page_errors == []
