"""Issue 14, the lead's workflow: closing with a confirmation, reopening with a recorded reason."""

import pytest

from labeling.models import Phase, PhaseReopening
from labeling.services.phases import phase_close, phase_close_summary, phase_get, phase_open, phase_reopen
from tests.labeling.helpers import add_images, label_all, open_calibration_1

pytestmark = pytest.mark.django_db


def test_close_summary_counts_unfinished_assignments(project, labelers):
    add_images(project, 6)
    cal1 = open_calibration_1(project, labels_per_image=2)
    label_all(cal1, labelers[0])
    summary = phase_close_summary(cal1)
    assert summary["n_unfinished"] == 12 - cal1.assignments.filter(labeler=labelers[0]).count()
    assert labelers[0].pseudonym not in summary["unfinished_by_labeler"]
    assert sum(summary["unfinished_by_labeler"].values()) == summary["n_unfinished"]


def test_reopen_is_recorded_and_only_before_the_next_phase_starts(project, labelers, lead):
    add_images(project, 6)
    cal1 = open_calibration_1(project, size=4, cal1=2, labels_per_image=2)
    phase_close(phase=cal1)
    with pytest.raises(Exception, match="Say why"):
        phase_reopen(phase=cal1, user=lead, reason="  ")
    phase_reopen(phase=cal1, user=lead, reason="Closed by mistake")
    cal1.refresh_from_db()
    assert cal1.status == Phase.Status.OPEN and cal1.closed_at is None
    reopening = PhaseReopening.objects.get(phase=cal1)
    assert reopening.reason == "Closed by mistake" and reopening.reopened_by == lead and reopening.closed_at
    with pytest.raises(Exception, match="not closed"):
        phase_reopen(phase=cal1, user=lead, reason="again")
    phase_close(phase=cal1)
    phase_open(phase=phase_get(project, Phase.Kind.CALIBRATION_2))
    with pytest.raises(Exception, match="Calibration 2 has already started"):
        phase_reopen(phase=cal1, user=lead, reason="too late")


def test_reopen_api(project, labelers, lead, client_for):
    add_images(project, 6)
    cal1 = open_calibration_1(project, size=4, cal1=2, labels_per_image=2)
    api = client_for(lead)
    summary = api.get(f"/api/phases/{cal1.id}/close-summary/").json()
    assert summary == {
        "n_unfinished": 4,
        "unfinished_by_labeler": {"L1": 1, "L2": 1, "L3": 1, "L4": 1},
        "can_reopen_after_close": True,
    }
    assert api.post(f"/api/phases/{cal1.id}/close/").status_code == 200
    assert api.post(f"/api/phases/{cal1.id}/reopen/", {}, format="json").json() == {
        "reason": ["This field is required."]
    }
    for bad in ([1], {"reason": 5 * "x" * 1000}, "nonsense"):
        assert api.post(f"/api/phases/{cal1.id}/reopen/", bad, format="json").status_code == 400
    answer = api.post(f"/api/phases/{cal1.id}/reopen/", {"reason": "One labeler was ill"}, format="json")
    assert answer.status_code == 200
    body = answer.json()
    assert body["status"] == "open" and body["reopenings"][0]["reason"] == "One labeler was ill"
    assert body["reopenings"][0]["reopened_by"] == lead.username
    assert api.post(f"/api/phases/{cal1.id}/reopen/", {"reason": "x"}, format="json").json() == {
        "detail": "Calibration 1 is open, not closed."
    }
    labeler_api = client_for(labelers[0].user)
    assert labeler_api.post(f"/api/phases/{cal1.id}/reopen/", {"reason": "x"}, format="json").status_code == 403


def test_phase_page_confirms_close_and_reopens(project, labelers, lead, client):
    add_images(project, 6)
    cal1 = open_calibration_1(project, size=4, cal1=2, labels_per_image=2)
    client.force_login(lead)
    page = client.get(f"/phases/{cal1.id}/").content.decode()
    assert "4 assignments will stay unfinished" in page.replace("</strong>", "").replace(
        '<strong id="n-unfinished">', ""
    )
    # Without the confirmation nothing closes.
    client.post(f"/phases/{cal1.id}/", {"action": "close"})
    cal1.refresh_from_db()
    assert cal1.status == Phase.Status.OPEN
    client.post(f"/phases/{cal1.id}/", {"action": "close", "confirm": "yes"})
    cal1.refresh_from_db()
    assert cal1.status == Phase.Status.CLOSED
    answer = client.post(f"/phases/{cal1.id}/", {"action": "reopen", "reason": ""}, follow=True)
    assert "Say why the phase is reopened" in answer.content.decode()
    client.post(f"/phases/{cal1.id}/", {"action": "reopen", "reason": "Mis-click"})
    cal1.refresh_from_db()
    assert cal1.status == Phase.Status.OPEN
    assert "Mis-click" in client.get(f"/phases/{cal1.id}/").content.decode()


def test_new_project_form_defaults_to_monk_and_a_name_is_enough(client, lead):
    import re

    from labeling.models import Project, Scale

    client.force_login(lead)
    page = client.get("/projects/new/").content.decode()
    selected = re.search(r'<option value="(\d+)" selected>([^<]*)</option>', page)
    monk = Scale.objects.get(kind="monk", is_builtin=True)
    assert selected and int(selected.group(1)) == monk.pk, "Monk is the scale a new project starts with"
    # What the browser sends when the lead types a name only: the form's initial values.
    r = client.post(
        "/projects/new/",
        {"name": "Just a name", "scale": selected.group(1), "labels_per_image": 4, "skip_reasons": "no skin visible"},
    )
    assert r.status_code == 302
    assert Project.objects.get(name="Just a name").scale == monk


def test_member_form_messages_are_plain_words(client, project, lead, labelers):
    client.force_login(lead)
    already = client.post(
        f"/projects/{project.id}/members/", {"username": labelers[0].user.username, "role": "labeler"}
    ).content.decode()
    assert f"{labelers[0].user.username} is already a member of this project." in already
    unknown = client.post(
        f"/projects/{project.id}/members/", {"username": "nobody", "password": "short", "role": "labeler"}
    ).content.decode()
    assert "No account is called “nobody”" in unknown
    for page in (already, unknown):
        assert "user:" not in page and "password:" not in page and "username:" not in page


def test_calibration_defaults_fit_the_project_and_are_accepted(project, labelers, lead, client):
    from labeling.services.phases import calibration_current, calibration_defaults

    assert calibration_defaults(13) == {"size": 10, "calibration_1_size": 5, "n_repeated": 5}
    assert calibration_defaults(100_000) == {"size": 59, "calibration_1_size": 30, "n_repeated": 30}
    assert calibration_defaults(3) == {"size": 3, "calibration_1_size": 2, "n_repeated": 2}
    images = add_images(project, 13)
    client.force_login(lead)
    page = client.get(f"/projects/{project.id}/calibration/").content.decode()
    assert "seed 000" not in page and "(59" not in page and ": 59" not in page
    assert 'name="size" value="10"' in page and 'name="n_repeated" value="5"' in page
    # The form's own defaults are accepted as they are.
    r = client.post(
        f"/projects/{project.id}/calibration/",
        {"method": "random", "size": 10, "calibration_1_size": 5, "n_repeated": 5, "seed": ""},
    )
    assert r.status_code == 302
    current = calibration_current(project)
    assert current["size"] == 10 and len(current["calibration_1"]) == 5 and len(current["repeated"]) == 5
    # A revisit shows the current set (each image by its own id) and starts from its numbers.
    page = client.get(f"/projects/{project.id}/calibration/").content.decode()
    assert "The current set" in page
    for image in current["calibration_1"]:
        assert f'data-external-id="{image.external_id}"' in page
    assert f'name="seed" value="{current["seed"]}"' in page
    assert images


def test_calibration_warns_before_a_choice_that_makes_statistics_impossible(project, labelers, lead, client):
    from labeling.models import Phase

    add_images(project, 13)
    client.force_login(lead)
    small = {"method": "random", "size": 4, "calibration_1_size": 2, "n_repeated": 0}
    page = client.post(f"/projects/{project.id}/calibration/", small).content.decode()
    assert "too little data" in page and "Choose it anyway" in page
    assert not Phase.objects.get(project=project, kind="calibration_1").phase_images.exists()
    r = client.post(f"/projects/{project.id}/calibration/", {**small, "accept_too_few": "on"})
    assert r.status_code == 302
    assert Phase.objects.get(project=project, kind="calibration_1").phase_images.count() == 2
    # Plain words for numbers that do not fit together, next to their field.
    page = client.post(
        f"/projects/{project.id}/calibration/",
        {"method": "random", "size": 8, "calibration_1_size": 4, "n_repeated": 6},
    ).content.decode()
    assert "Calibration 2 can repeat at most the 4 images of calibration 1." in page


def test_calibration_by_external_ids_and_every_labeler(project, labelers, lead, client, client_for):
    from labeling.models import Phase
    from labeling.services.phases import phase_get, phase_open

    images = add_images(project, 12)
    client.force_login(lead)
    picked = [i.external_id for i in images[:6]]
    page = client.post(
        f"/projects/{project.id}/calibration/",
        {
            "method": "manual",
            "external_ids": "nope_1\n" + ", ".join(picked),
            "calibration_1_size": 3,
            "accept_too_few": "on",
        },
    ).content.decode()
    assert "No image of this project has the id nope_1." in page
    r = client.post(
        f"/projects/{project.id}/calibration/",
        {
            "method": "manual",
            "external_ids": "\n".join(picked),
            "calibration_1_size": 3,
            "n_repeated": 3,
            "every_labeler": "on",
            "accept_too_few": "on",
        },
    )
    assert r.status_code == 302
    cal1 = phase_get(project, Phase.Kind.CALIBRATION_1)
    assert cal1.selection_method == "manual" and cal1.every_labeler
    assert set(cal1.phase_images.values_list("image__external_id", flat=True)) == set(picked[:3])
    api = client_for(lead)
    r = api.post(f"/api/projects/{project.id}/calibration/", {"external_ids": ["nope"]}, format="json")
    assert r.status_code == 400 and r.json() == {"external_ids": ["No image of this project has the id nope."]}
    r = api.post(
        f"/api/projects/{project.id}/calibration/",
        {"external_ids": picked, "calibration_1_size": 3, "n_repeated": 3, "every_labeler": True},
        format="json",
    )
    assert r.status_code == 200 and r.json()[0]["every_labeler"] is True
    cal1 = phase_open(phase=cal1, labels_per_image=2)
    # Every labeler labels every calibration image, whatever labels-per-image says.
    assert cal1.assignments.count() == 3 * len(labelers) and cal1.labels_per_image == len(labelers)
    # The API searches images by their own ids.
    found = api.get(f"/api/projects/{project.id}/images/", {"search": picked[0]}).json()
    assert [r["external_id"] for r in found["results"]] == [picked[0]]


def test_consensus_table_and_tone_examples_name_images_by_their_own_id(project, labelers, lead, client, client_for):
    from tests.labeling.helpers import submit

    images = add_images(project, 6)
    cal1 = open_calibration_1(project, labels_per_image=2)
    for a in cal1.assignments.all():
        submit(cal1, a.labeler, a.image_id, tones=[4])
    client.force_login(lead)
    page = client.get(f"/projects/{project.id}/consensus/images/?phase={cal1.id}").content.decode()
    for image in images:
        assert f"<span>{image.external_id}</span>" in page
        assert f"/images/{image.id}/file/thumbnail/" in page
    body = client_for(lead).get(f"/api/projects/{project.id}/consensus/images/?phase={cal1.id}").json()
    assert {r["external_id"] for r in body["results"]} == {i.external_id for i in images}
    tone = project.ordered_tones()[0]
    r = client.post(f"/projects/{project.id}/examples/", {f"tone_{tone.position}": f"{images[0].external_id}, nope"})
    assert "Not in this project: nope" in r.content.decode()
    client.post(f"/projects/{project.id}/examples/", {f"tone_{tone.position}": images[0].external_id})
    page = client.get(f"/projects/{project.id}/examples/").content.decode()
    assert f'data-external-id="{images[0].external_id}"' in page and f"<span>{images[0].external_id}</span>" in page


def test_an_empty_reflection_is_refused_unless_explicitly_skipped(project, labelers, lead, client, client_for):
    from labeling.models import Reflection

    add_images(project, 6)
    cal1 = open_calibration_1(project, labels_per_image=2)
    labeler = labelers[0]
    client.force_login(labeler.user)
    empty = {"minutes_taken": "", "unclear_instructions": "  ", "biases_other": "", "mindfulness_plan": ""}
    page = client.post(f"/phases/{cal1.id}/reflection/", empty).content.decode()
    assert "Answer at least one question" in page
    assert not Reflection.objects.filter(phase=cal1, labeler=labeler).exists()
    r = client.post(f"/phases/{cal1.id}/reflection/", {**empty, "skip": "yes"}, follow=True)
    assert "you skipped the reflection" in r.content.decode()
    assert Reflection.objects.filter(phase=cal1, labeler=labeler).exists()
    assert "You skipped the reflection" in client.get(f"/phases/{cal1.id}/reflection/").content.decode()
    client.force_login(lead)
    assert '<span class="badge">skipped</span>' in client.get(f"/phases/{cal1.id}/").content.decode()
    api = client_for(labelers[1].user)
    assert api.put(f"/api/phases/{cal1.id}/reflection/", {}, format="json").status_code == 400
    r = api.put(f"/api/phases/{cal1.id}/reflection/", {"skipped": True}, format="json")
    assert r.status_code == 200 and r.json()["skipped"] is True
    r = api.put(f"/api/phases/{cal1.id}/reflection/", {"mindfulness_plan": "Look at the cheek"}, format="json")
    assert r.status_code == 200 and r.json()["skipped"] is False


def test_label_page_words_for_a_closed_phase(project, labelers, client):
    add_images(project, 6)
    cal1 = open_calibration_1(project, labels_per_image=2)
    client.force_login(labelers[0].user)
    assert "While the phase is open you can still go back" in client.get(f"/phases/{cal1.id}/label/").content.decode()
    phase_close(phase=cal1)
    page = client.get(f"/phases/{cal1.id}/label/").content.decode()
    assert "While the phase is open" not in page and "This phase is closed" in page


@pytest.fixture
def post_review(project, labelers):
    """Calibration 1 labelled with one outlier (L3's 9 on image 0); every later phase closed but post-calibration."""
    from tests.labeling.helpers import submit

    images = add_images(project, 3)
    from labeling.services.phases import calibration_configure

    calibration_configure(project=project, size=3, calibration_1_size=3, n_repeated=0, seed=5)
    cal1 = phase_open(phase=phase_get(project, Phase.Kind.CALIBRATION_1), labels_per_image=3, labeler_ids=None)
    answers = {0: [3, 3, 9], 1: [5, 5, 5], 2: [7, 7, 7]}
    for k, image in enumerate(images):
        done = [a.labeler for a in cal1.assignments.filter(image=image).select_related("labeler")]
        for m, tone in zip(done, answers[k], strict=False):
            submit(cal1, m, image.id, tones=[tone])
    phase_close(phase=cal1)
    for kind in (Phase.Kind.CALIBRATION_2, Phase.Kind.MAIN):
        phase = phase_get(project, kind)
        phase.status = Phase.Status.CLOSED
        phase.save()
    post = phase_open(phase=phase_get(project, Phase.Kind.POST_CALIBRATION))
    return {"post": post, "images": images, "cal1": cal1}


def test_review_states_progress_and_pair_corrections(project, labelers, lead, client_for, post_review):
    from labeling.models import Label
    from labeling.services.labels import relabel_request

    post, image = post_review["post"], post_review["images"][0]
    api = client_for(lead)
    report = api.get(f"/api/phases/{post.id}/review/").json()
    assert report["n_candidates"] == 1 and report["progress"]["open"] == 1
    candidate = report["candidates"][0]
    assert candidate["state"] == "open" and candidate["external_id"] == image.external_id
    # A correction to an adjacent pair.
    outlier = Label.objects.get(image=image, tone_low=9)
    r = api.post(
        f"/api/labels/{outlier.id}/corrections/", {"tones": [3, 4], "reason": "between 3 and 4"}, format="json"
    )
    assert r.status_code == 201 and (r.json()["tone_low"], r.json()["tone_high"]) == (3, 4)
    # Sent back: waiting, then answered.
    relabel_request(image=image, labelers=[outlier.labeler], reason="look at the neck", user=lead)
    assert api.get(f"/api/phases/{post.id}/review/").json()["progress"]["waiting_relabel"] == 1
    # Decisions, with bad input refused in plain words.
    url = f"/api/phases/{post.id}/review-decisions/"
    assert api.post(url, {"image": image.id, "state": "maybe"}, format="json").status_code == 400
    assert api.post(url, {"image": 10**9, "state": "resolved"}, format="json").status_code == 400
    assert api.post(url, {"state": "resolved"}, format="json").status_code == 400
    progress = api.post(url, {"image": image.id, "state": "resolved", "note": "fixed"}, format="json").json()
    assert progress["resolved"] == 1 and progress["decided"] == 1 and progress["fraction_decided"] == 1.0
    report = api.get(f"/api/phases/{post.id}/review/").json()
    assert report["candidates"][0]["decision"]["note"] == "fixed"
    progress = api.post(url, {"image": image.id, "state": "open"}, format="json").json()
    assert progress["decided"] == 0 and progress["waiting_relabel"] == 1
    assert (
        client_for(labelers[0].user).post(url, {"image": image.id, "state": "resolved"}, format="json").status_code
        == 403
    )


def test_a_relabelling_labeler_sees_the_reason(project, labelers, lead, client_for, post_review):
    from labeling.models import Label
    from labeling.services.labels import relabel_request

    post, image = post_review["post"], post_review["images"][0]
    outlier = Label.objects.get(image=image, tone_low=9)
    relabel_request(image=image, labelers=[outlier.labeler], reason="look at the neck", user=lead)
    body = client_for(outlier.labeler.user).get(f"/api/phases/{post.id}/next/").json()
    assert body["current"]["kind"] == "relabel" and body["current"]["request_reason"] == "look at the neck"
