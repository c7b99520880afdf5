import threading
import time
import uuid

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, OperationalError, connection, transaction

from labeling.models import Label, LabelRevision, Phase
from labeling.services.labels import label_correct, reflection_submit, relabel_request
from labeling.services.phases import phase_close, phase_get, phase_open
from labeling.services.review import review_candidates
from tests.labeling.helpers import add_images, label_all, open_calibration_1, submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def cal1(project, labelers):
    add_images(project, 5)
    return open_calibration_1(project, size=5, cal1=5)


def first_image(phase, labeler):
    return phase.assignments.filter(labeler=labeler).order_by("position").first().image_id


def test_submit_stores_value_and_what_the_labeler_saw(cal1, labelers):
    m = labelers[0]
    image_id = first_image(cal1, m)
    rev = submit(
        cal1,
        m,
        image_id,
        tones=[4, 3],
        uncertain=True,
        time_spent_ms=4200,
        tone_order=list(range(1, 11)),
        client_info={"devicePixelRatio": 2, "gamut": "p3"},
    )
    label = rev.label
    assert (label.tone_low, label.tone_high, label.value) == (3, 4, 3.5)
    assert label.uncertain and label.is_valid and label.n_revisions == 1
    assert rev.tone_order == list(range(1, 11)) and rev.client_info["devicePixelRatio"] == 2
    assert label.time_spent_ms == 4200


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"tones": [11]}, "not on this scale"),
        ({"tones": [0]}, "not on this scale"),
        ({"tones": [3, 5]}, "not adjacent"),
        ({"tones": [1, 2, 3]}, "one tone, or two"),
        ({"tones": []}, "Choose a tone"),
        ({"tones": [], "skip_reason": "bored"}, "Unknown skip reason"),
        ({"tones": [2], "skip_reason": "other"}, "no tone"),
        ({"tones": [2], "client_id": "not-a-uuid"}, "UUID"),
        ({"tones": [2], "time_spent_ms": -5}, "Out of range"),
        ({"tones": [2], "tone_order": [1, 2, 3]}, "every tone once"),
    ],
)
def test_bad_submissions_are_refused_with_a_reason(cal1, labelers, kwargs, message):
    m = labelers[0]
    with pytest.raises(ValidationError, match=message):
        submit(cal1, m, first_image(cal1, m), **kwargs)
    assert not Label.objects.exists()


def test_pairs_refused_when_project_asks_for_one_tone(cal1, labelers, project):
    project.allow_adjacent_pairs = False
    project.save()
    cal1 = Phase.objects.get(pk=cal1.pk)
    with pytest.raises(ValidationError, match="single tone"):
        submit(cal1, labelers[0], first_image(cal1, labelers[0]), tones=[3, 4])


def test_unassigned_image_and_closed_phase_are_refused(cal1, labelers, project):
    m = labelers[0]
    other_project_image = add_images(project, 1)[0]  # not in the phase
    with pytest.raises(PermissionDenied):
        submit(cal1, m, other_project_image.id)
    phase_close(phase=cal1)
    cal1.refresh_from_db()
    with pytest.raises(ValidationError, match="closed"):
        submit(cal1, m, first_image(cal1, m))


def test_resubmitting_the_same_client_id_stores_one_label(cal1, labelers):
    m = labelers[0]
    image_id = first_image(cal1, m)
    client_id = uuid.uuid4()
    r1 = submit(cal1, m, image_id, tones=[6], client_id=client_id)
    r2 = submit(cal1, m, image_id, tones=[6], client_id=client_id)
    assert r1.pk == r2.pk
    assert LabelRevision.objects.count() == 1 and Label.objects.count() == 1


def test_changing_an_answer_adds_a_revision_and_keeps_history(cal1, labelers):
    m = labelers[0]
    image_id = first_image(cal1, m)
    submit(cal1, m, image_id, tones=[6], time_spent_ms=1000)
    rev = submit(cal1, m, image_id, tones=[7], time_spent_ms=500)
    label = rev.label
    label.refresh_from_db()
    assert label.value == 7 and label.n_revisions == 2 and label.time_spent_ms == 1500
    assert list(label.revisions.values_list("number", "source", "tone_low")) == [
        (1, "labeler", 6),
        (2, "change", 7),
    ]


def test_a_client_id_cannot_be_reused_by_another_labeler(cal1, labelers):
    client_id = uuid.uuid4()
    submit(cal1, labelers[0], first_image(cal1, labelers[0]), client_id=client_id)
    with pytest.raises(ValidationError, match="another submission"):
        submit(cal1, labelers[1], first_image(cal1, labelers[1]), client_id=client_id)


def test_revisions_are_constrained_in_the_database(cal1, labelers):
    label = submit(cal1, labelers[0], first_image(cal1, labelers[0])).label
    bad = [
        {"tone_low": 3, "tone_high": 5, "source": "labeler"},  # non-adjacent pair not from an import
        {"tone_low": None, "tone_high": None, "skip_reason": ""},  # neither tone nor skip
        {"tone_low": 4, "tone_high": 3, "source": "import"},  # high below low
    ]
    for n, fields in enumerate(bad, start=10):
        with pytest.raises(IntegrityError), transaction.atomic():
            LabelRevision.objects.create(label=label, number=n, client_id=uuid.uuid4(), **fields)
    # An imported invalid pair is allowed (and flagged by review).
    LabelRevision.objects.create(
        label=label, number=20, client_id=uuid.uuid4(), tone_low=3, tone_high=5, source="import"
    )


def test_correction_is_a_new_revision_with_reason(cal1, labelers, lead):
    label = submit(cal1, labelers[0], first_image(cal1, labelers[0]), tones=[2]).label
    with pytest.raises(ValidationError, match="why"):
        label_correct(label=label, user=lead, reason=" ", tones=[5])
    rev = label_correct(label=label, user=lead, reason="obvious slip: 2 for a deep tone", tones=[8])
    label.refresh_from_db()
    assert label.value == 8 and rev.source == "correction" and rev.author == lead
    assert label.revisions.get(number=1).tone_low == 2


def test_review_finds_outliers_skips_and_uncertain(cal1, labelers):
    image_id = cal1.phase_images.first().image_id
    for m, tones in zip(labelers, [[3], [3], [4], [8]]):
        submit(cal1, m, image_id, tones=tones)
    other = cal1.phase_images.exclude(image_id=image_id).first().image_id
    submit(cal1, labelers[0], other, tones=[], skip_reason="no skin visible")
    submit(cal1, labelers[1], other, tones=[5], uncertain=True)
    report = review_candidates(cal1)
    by_image = {c["image_id"]: c for c in report["candidates"]}
    assert any("far from every other" in r for r in by_image[image_id]["reasons"])
    assert any("L4" in r for r in by_image[image_id]["reasons"])
    reasons = " ".join(by_image[other]["reasons"])
    assert "skipped" in reasons and "uncertain" in reasons


def test_relabel_request_adds_a_revision_to_the_original_label(project, labelers, lead):
    add_images(project, 3)
    cal1 = open_calibration_1(project, size=3, cal1=3)
    for m in labelers:
        label_all(cal1, m, tone=4)
    phase_close(phase=cal1)
    for kind in ("calibration_2", "main"):
        phase = phase_get(project, kind)
        if phase.phase_images.exists():
            phase = phase_open(phase=phase)
            for m in labelers:
                label_all(phase, m)
        else:
            Phase.objects.filter(pk=phase.pk).update(status="closed")
            continue
        phase_close(phase=phase)
    post = phase_open(phase=phase_get(project, "post_calibration"))
    image = cal1.phase_images.first().image
    with pytest.raises(ValidationError, match="why"):
        relabel_request(image=image, labelers=[labelers[0]], reason="", user=lead)
    [assignment] = relabel_request(image=image, labelers=[labelers[0]], reason="look again at the neck", user=lead)
    assert assignment.kind == "relabel"
    rev = submit(post, labelers[0], image.id, tones=[6])
    original = Label.objects.get(phase=cal1, image=image, labeler=labelers[0])
    assert rev.label_id == original.id and rev.source == "relabel" and rev.reason == "look again at the neck"
    original.refresh_from_db()
    assert original.value == 6 and original.n_revisions == 2


def test_reflection_only_for_calibration_participants(cal1, labelers, project):
    r = reflection_submit(
        phase=cal1,
        labeler=labelers[0],
        minutes_taken=30,
        biases_noticed=["background", "recency"],
        mindfulness_plan="look at the neck, not the background",
    )
    assert r.biases_noticed == ["background", "recency"]
    with pytest.raises(ValidationError, match="Choose among"):
        reflection_submit(phase=cal1, labeler=labelers[0], biases_noticed=["astrology"])
    main = phase_get(project, "main")
    with pytest.raises(ValidationError, match="calibration"):
        reflection_submit(phase=main, labeler=labelers[0])


@pytest.mark.django_db(transaction=True)
def test_parallel_submits_of_the_same_label_store_one(project, labelers):
    """Two threads submit the same client id at once: one label, one revision."""
    add_images(project, 2)
    cal1 = open_calibration_1(project, size=2, cal1=2)
    m = labelers[0]
    image_id = first_image(cal1, m)
    client_id = uuid.uuid4()
    barrier = threading.Barrier(2)
    results, errors = [], []

    def worker():
        # In-memory SQLite (the test database) refuses a second writer at once instead of
        # waiting ('database is locked'); a client resends the same client id, so do the same
        # there. PostgreSQL must not need it.
        attempts = 50 if connection.vendor == "sqlite" else 1
        try:
            barrier.wait()
            for attempt in range(attempts):
                try:
                    results.append(submit(cal1, m, image_id, tones=[5], client_id=client_id).pk)
                    break
                except OperationalError:
                    if attempt == attempts - 1:
                        raise
                    time.sleep(0.02)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    # Both sends answer with the one revision stored for that client id.
    assert len(results) == 2 and len(set(results)) == 1
    assert LabelRevision.objects.filter(client_id=client_id).count() == 1
    assert Label.objects.filter(image_id=image_id, labeler=m).count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_labelers_in_parallel_do_not_get_in_each_others_way(project, labelers):
    add_images(project, 6)
    cal1 = open_calibration_1(project, size=6, cal1=6)
    errors = []

    def worker(m):
        # In-memory SQLite (the test database) locks whole tables without waiting; a
        # client retries a failed submit, so do the same there. PostgreSQL must not need it.
        attempts = 50 if connection.vendor == "sqlite" else 1
        try:
            for attempt in range(attempts):
                try:
                    label_all(cal1, m, tone=3)
                    break
                except OperationalError:
                    if attempt == attempts - 1:
                        raise
                    time.sleep(0.02)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(m,)) for m in labelers[:2]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for m in labelers[:2]:
        assert cal1.assignments.filter(labeler=m, done_at__isnull=True).count() == 0
        assert Label.objects.filter(phase=cal1, labeler=m).count() == 6


def test_first_answer_rows_are_complete_on_every_database(cal1, labelers):
    """A first answer (one SQL statement on PostgreSQL, ORM elsewhere) stores complete rows."""
    from labeling.models import Assignment

    m = labelers[0]
    image_id = first_image(cal1, m)
    client_id = uuid.uuid4()
    rev = submit(
        cal1,
        m,
        image_id,
        tones=[7, 6],
        uncertain=True,
        time_spent_ms=1234,
        client_id=client_id,
        tone_order=list(range(10, 0, -1)),
        client_info={"colorGamut": "p3"},
    )
    label = Label.objects.get(pk=rev.label.pk)
    stored = LabelRevision.objects.get(pk=rev.pk)
    assignment = Assignment.objects.get(phase=cal1, labeler=m, image_id=image_id)
    assert (label.phase_id, label.image_id, label.labeler_id, label.assignment_id) == (
        cal1.id,
        image_id,
        m.id,
        assignment.id,
    )
    assert (label.tone_low, label.tone_high, label.value, label.uncertain, label.skip_reason) == (6, 7, 6.5, True, "")
    assert (label.is_valid, label.n_revisions, label.time_spent_ms, label.is_repeat) == (True, 1, 1234, False)
    assert label.created_at is not None and label.updated_at is not None
    assert (stored.number, stored.client_id, stored.source, stored.author_id) == (1, client_id, "labeler", m.user_id)
    assert stored.tone_order == list(range(10, 0, -1)) and stored.client_info == {"colorGamut": "p3"}
    assert assignment.done_at is not None
    # The object returned matches what was stored.
    assert (rev.number, rev.label.value, rev.label.id) == (1, 6.5, label.id)
    # A skip through the same path.
    other = cal1.assignments.filter(labeler=m, done_at__isnull=True).first().image_id
    skipped = Label.objects.get(pk=submit(cal1, m, other, tones=[], skip_reason="image unusable").label.pk)
    assert (skipped.tone_low, skipped.value, skipped.skip_reason) == (None, None, "image unusable")
