"""Issue 13, audit log: every thing a lead or staff does to a project's data is recorded (who, when, what, from
where), readable by the project's leads (page and API), never editable, and kept when the project is deleted."""

import io
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.db import transaction

from labeling.models import AuditEntry, AuditImmutable, Label, Membership, Phase
from labeling.services import audit as audit_services
from labeling.services import project_lifecycle
from labeling.services import releases as release_services
from labeling.services.baselines import baseline_run_start
from labeling.services.data_manager import images_exclude, images_include
from labeling.services.imports import import_files
from labeling.services.labels import label_correct
from labeling.services.phases import phase_close, phase_reopen
from labeling.services.review_decisions import review_decide
from tests.factories import MembershipFactory, ProjectFactory, UserFactory, png_bytes
from tests.labeling.helpers import add_images, open_calibration_1, submit

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return Path(settings.MEDIA_ROOT)


def actions(project) -> list[str]:
    return list(AuditEntry.objects.filter(project_id=project.pk).order_by("id").values_list("action", flat=True))


def labelled(project, labelers, n=4):
    add_images(project, n)
    phase = open_calibration_1(project, size=n, cal1=n, labels_per_image=len(labelers))
    for m in labelers:
        for a in phase.assignments.filter(labeler=m):
            submit(phase, m, a.image_id, tones=[6])
    return phase


def test_what_a_lead_does_is_recorded_with_who_and_never_a_labelers_tones(project, lead, labelers):
    phase = labelled(project, labelers)
    label = Label.objects.filter(phase=phase).first()
    label_correct(label=label, user=lead, reason="obvious slip", tones=[3])
    image = project.images.first()
    images_exclude(project=project, images=[image], reason="blurred", user=lead)
    images_include(project=project, images=[image], user=lead, note="fine after all")
    phase_close(phase=phase)
    phase_reopen(phase=phase, user=lead, reason="two more images")
    review_decide(phase=phase, image=image, state="accepted", user=lead)
    baseline_run_start(project=project, user=lead)
    import_files(project=project, files=[("x.png", io.BytesIO(png_bytes(colour=(9, 99, 199))))], user=lead)

    recorded = actions(project)
    for name in (
        "project.create",
        "membership.add",
        "calibration.configure",
        "phase.open",
        "label.correct",
        "images.exclude",
        "images.include",
        "phase.close",
        "phase.reopen",
        "review.decide",
        "baseline.run",
        "import.images",
    ):
        assert name in recorded, name
    correction = AuditEntry.objects.get(project_id=project.pk, action="label.correct")
    assert (correction.user_id, correction.username) == (lead.pk, "lead")
    assert (correction.object_type, correction.object_id) == ("label", str(label.pk))
    assert correction.details == {
        "image_id": label.image_id,
        "labeler": label.labeler.pseudonym,
        "reason": "obvious slip",
    }
    # Labelers' answers are never in the log (the labels themselves are recorded elsewhere), nor profile fields.
    assert "tone" not in str(list(AuditEntry.objects.values_list("details", flat=True)))
    assert not AuditEntry.objects.filter(action__startswith="label.submit").exists()
    opened = AuditEntry.objects.get(project_id=project.pk, action="phase.open")
    assert sorted(opened.details["labelers"]) == sorted(m.pseudonym for m in labelers)
    assert AuditEntry.objects.get(project_id=project.pk, action="phase.reopen").details["reason"] == "two more images"


def test_releases_requested_published_and_cancelled_are_recorded(project, lead, labelers):
    labelled(project, labelers)
    rule = {"include": dict.fromkeys(release_services.CATEGORIES, True)}
    card = {name: f"The {name}." for name in release_services.CARD_FIELDS}
    release = release_services.release_request(project=project, user=lead, rule=rule, card_text=card)
    release_services.release_build(release)
    second = release_services.release_request(project=project, user=lead, rule=rule, card_text=card)
    release_services.release_cancel(second, user=lead)
    assert [a for a in actions(project) if a.startswith("release.")] == [
        "release.request",
        "release.publish",
        "release.request",
        "release.cancel",
    ]
    published = AuditEntry.objects.get(action="release.publish")
    assert (published.object_id, published.details["version"], published.username) == (str(release.pk), 1, "lead")


def test_memberships_added_changed_and_deactivated(project, lead):
    member = MembershipFactory(project=project, user=UserFactory(username="ann"), pseudonym="L9", gender="f")
    member.role = Membership.Role.REVIEWER
    member.save()
    member.is_active = False
    member.save()
    entries = AuditEntry.objects.filter(project_id=project.pk, object_type="membership", object_id=str(member.pk))
    assert list(entries.order_by("id").values_list("action", flat=True)) == [
        "membership.add",
        "membership.role",
        "membership.deactivate",
    ]
    assert entries.get(action="membership.role").details == {"pseudonym": "L9", "old": "labeler", "new": "reviewer"}
    assert "gender" not in str(list(entries.values_list("details", flat=True)))


def test_an_action_that_fails_leaves_no_entry(project, lead, labelers):
    phase = labelled(project, labelers)
    before = AuditEntry.objects.count()
    with pytest.raises(ValidationError):
        phase_reopen(phase=phase, user=lead, reason="not closed yet")
    with pytest.raises(RuntimeError), transaction.atomic():
        phase_close(phase=phase)
        raise RuntimeError("rolled back")
    assert AuditEntry.objects.count() == before


def test_entries_are_never_changed_or_deleted(project, lead):
    entry = AuditEntry.objects.filter(project_id=project.pk).first()
    entry.action = "forged"
    with pytest.raises(AuditImmutable):
        entry.save()
    with pytest.raises(AuditImmutable):
        entry.delete()
    with pytest.raises(AuditImmutable):
        AuditEntry.objects.filter(pk=entry.pk).update(action="forged")
    with pytest.raises(AuditImmutable):
        AuditEntry.objects.all().delete()
    with pytest.raises(AuditImmutable), transaction.atomic():
        AuditEntry.objects.bulk_update([entry], ["action"])
    assert AuditEntry.objects.get(pk=entry.pk).action == "project.create"


def test_the_database_refuses_to_change_or_delete_an_entry(project, lead):
    """Raw SQL past the app (another program, a bug, a console): the migration's triggers refuse it, on SQLite
    and on PostgreSQL alike (CI runs this on both). Adding entries stays allowed."""
    from django.db import IntegrityError, connection

    entry = AuditEntry.objects.filter(project_id=project.pk).first()
    table = AuditEntry._meta.db_table
    attempts = [
        (f"UPDATE {table} SET action = %s WHERE id = %s", ["forged", entry.pk]),
        (f"UPDATE {table} SET details = %s", ["{}"]),
        (f"DELETE FROM {table} WHERE id = %s", [entry.pk]),
        (f"DELETE FROM {table}", []),
    ]
    for sql, params in attempts:
        with pytest.raises(IntegrityError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, params)
    assert AuditEntry.objects.get(pk=entry.pk).action == "project.create"
    n = AuditEntry.objects.count()
    # Statements that touch no entry are not refused (no row, no trigger), and adding stays open.
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE id = %s", [-1])
    audit_services.audit(project, "test.after", user=lead)
    assert AuditEntry.objects.count() == n + 1


def test_the_admin_shows_the_log_read_only(client, project):
    staff = UserFactory(username="root", is_staff=True, is_superuser=True)
    client.force_login(staff)
    entry = AuditEntry.objects.filter(project_id=project.pk).first()
    assert client.get("/admin/labeling/auditentry/").status_code == 200
    assert client.get("/admin/labeling/auditentry/add/").status_code == 403
    assert client.post(f"/admin/labeling/auditentry/{entry.pk}/delete/", {"post": "yes"}).status_code == 403
    page = client.post(f"/admin/labeling/auditentry/{entry.pk}/change/", {"action": "forged"})
    assert page.status_code == 403 or b"forged" not in page.content
    assert AuditEntry.objects.get(pk=entry.pk).action == "project.create"


def test_a_deleted_projects_entries_stay_with_its_name(lead):
    project = ProjectFactory(created_by=lead, name="Gone soon")
    pk = project.pk
    project_lifecycle.project_archive(project=project, user=lead)
    project_lifecycle.project_unarchive(project=project, user=lead)
    project_lifecycle.project_delete(project=project, user=lead)
    kept = AuditEntry.objects.filter(project_id=pk)
    assert {"project.create", "project.archive", "project.unarchive", "project.delete"} <= set(
        kept.values_list("action", flat=True)
    )
    assert set(kept.values_list("project_name", flat=True)) == {"Gone soon"}


def test_the_api_records_the_token_user_and_the_client_address_from_trusted_proxies_only(
    project, lead, labelers, client_for, settings
):
    phase = labelled(project, labelers)
    api = client_for(lead)
    answer = api.post(f"/api/phases/{phase.pk}/close/", REMOTE_ADDR="10.0.0.7", HTTP_X_FORWARDED_FOR="6.6.6.6")
    assert answer.status_code == 200
    closed = AuditEntry.objects.get(project_id=project.pk, action="phase.close")
    # NUM_PROXIES = 0: a client's own X-Forwarded-For is never believed.
    assert (closed.username, closed.origin) == ("lead", "10.0.0.7")
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    answer = api.post(
        f"/api/phases/{phase.pk}/reopen/",
        {"reason": "one more"},
        format="json",
        REMOTE_ADDR="10.0.0.1",
        HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.9",
    )
    assert answer.status_code == 200, answer.content
    reopened = AuditEntry.objects.get(project_id=project.pk, action="phase.reopen")
    assert (reopened.username, reopened.origin) == ("lead", "203.0.113.9")


def test_a_page_action_records_the_signed_in_lead(client, project, lead, labelers):
    phase = labelled(project, labelers)
    client.force_login(lead)
    client.post(f"/phases/{phase.pk}/", {"action": "close", "confirm": "yes"}, REMOTE_ADDR="192.0.2.5")
    phase.refresh_from_db()
    assert phase.status == Phase.Status.CLOSED
    closed = AuditEntry.objects.get(project_id=project.pk, action="phase.close")
    assert (closed.username, closed.origin) == ("lead", "192.0.2.5")
    images_exclude(project=project, images=list(project.images.all()[:1]), reason="r", user=None)
    # Outside a request and with no user named: the system, no address.
    entry = AuditEntry.objects.get(project_id=project.pk, action="images.exclude")
    assert (entry.user_id, entry.username, entry.origin) == (None, "", "")


def test_api_lists_filters_and_paginates_for_leads_only(project, lead, labelers, client_for):
    phase = labelled(project, labelers)
    phase_close(phase=phase)
    api = client_for(lead)
    answer = api.get(f"/api/projects/{project.pk}/audit/")
    assert answer.status_code == 200
    body = answer.json()
    assert body["count"] == AuditEntry.objects.filter(project_id=project.pk).count()
    first = body["results"][0]
    assert set(first) == {"id", "created_at", "user", "action", "object_type", "object_id", "details", "origin"}
    assert first["action"] == "phase.close"
    only = api.get(f"/api/projects/{project.pk}/audit/", {"action": "phase."}).json()
    assert {r["action"] for r in only["results"]} == {"phase.open", "phase.close"}
    by_lead = api.get(f"/api/projects/{project.pk}/audit/", {"user": "lead"}).json()
    assert by_lead["count"] >= 1 and {r["user"]["username"] for r in by_lead["results"]} == {"lead"}
    by_id = api.get(f"/api/projects/{project.pk}/audit/", {"user": str(lead.pk)}).json()
    assert by_id["count"] == by_lead["count"]
    assert client_for(labelers[0].user).get(f"/api/projects/{project.pk}/audit/").status_code == 403
    other = UserFactory(username="other-lead")
    assert client_for(other).get(f"/api/projects/{project.pk}/audit/").status_code == 404
    assert api.put(f"/api/projects/{project.pk}/audit/", {}).status_code == 405


def test_the_page_lists_filters_and_paginates_for_leads_only(client, project, lead, labelers):
    for i in range(60):
        audit_services.audit(project, "test.entry", ("thing", i), user=lead, n=i)
    client.force_login(lead)
    page = client.get(f"/projects/{project.pk}/audit/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Audit log" in text and "test.entry" in text and "Page 1 of 2" in text
    filtered = client.get(f"/projects/{project.pk}/audit/", {"action": "project.create"}).content.decode()
    assert "Page 1 of 1" in filtered and "thing 59" not in filtered
    assert "page=2" in text
    client.force_login(labelers[0].user)
    assert client.get(f"/projects/{project.pk}/audit/").status_code == 404
    editor = UserFactory(username="editor")
    editor.user_permissions.add(Permission.objects.get(codename="change_auditentry"))
    client.force_login(editor)
    assert client.get(f"/projects/{project.pk}/audit/").status_code == 404


def test_hostile_filters_answer_an_empty_page_not_an_error(project, lead, client_for, client):
    api = client_for(lead)
    for user in ("9" * 5000, "99999999999999999999", "١٢", "lead' OR 1=1"):
        answer = api.get(f"/api/projects/{project.pk}/audit/", {"user": user, "action": user})
        assert answer.status_code == 200 and answer.json()["count"] == 0
    client.force_login(lead)
    assert client.get(f"/projects/{project.pk}/audit/", {"user": "9" * 5000, "page": "x"}).status_code == 200


def test_an_evaluation_run_is_recorded(project, lead):
    from labeling.models import EvaluationRun

    run = EvaluationRun.objects.create(project=project, name="model A", created_by=lead)
    entry = AuditEntry.objects.get(project_id=project.pk, action="evaluation.create")
    assert (entry.object_id, entry.details) == (str(run.pk), {"name": "model A", "release": None})


def test_what_staff_change_in_the_admin_is_recorded_without_values(client, project, labelers):
    staff = UserFactory(username="root", is_staff=True, is_superuser=True)
    client.force_login(staff)
    member = labelers[0]
    answer = client.post(
        f"/admin/labeling/membership/{member.pk}/change/",
        {
            "project": project.pk,
            "user": member.user_id,
            "role": "labeler",
            "pseudonym": member.pseudonym,
            "expertise": "",
            "region_of_upbringing": "somewhere secret",
            "gender": "",
            "is_active": "on",
        },
        REMOTE_ADDR="198.51.100.4",
    )
    assert answer.status_code == 302, answer.content[:2000]
    entry = AuditEntry.objects.get(project_id=project.pk, action="admin.change")
    assert (entry.username, entry.origin, entry.object_type) == ("root", "198.51.100.4", "membership")
    assert "region" in entry.details["change"].lower() and "somewhere secret" not in str(entry.details)


def test_gates_and_tone_examples_are_recorded(project, lead):
    from labeling.services.evaluations import gate_create, gate_delete
    from labeling.services.projects import tone_examples_set

    image = add_images(project, 1)[0]
    tone_examples_set(project=project, tone_position=3, external_ids=[image.external_id])
    gate = gate_create(project, lead, "strict", {"fail_on": ["significant"]})
    gate_delete(project, gate.pk)
    gate_delete(project, gate.pk)  # nothing left to delete: no entry
    assert [a for a in actions(project) if a.startswith(("gate.", "examples."))] == [
        "examples.set",
        "gate.create",
        "gate.delete",
    ]
