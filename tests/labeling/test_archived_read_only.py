"""Issue 14: an archived project is read-only for every write, through the API and the pages alike (the refusal
is in the services), while reading, downloading published releases, unarchiving and deleting still work."""

import io
import uuid
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from labeling.models import (
    Assignment,
    EvaluationGate,
    EvaluationRun,
    Image,
    ImportBatch,
    Job,
    Label,
    LabelRevision,
    Membership,
    Phase,
    PhaseImage,
    Project,
    Reflection,
    Release,
    ReviewDecision,
    ToneExample,
)
from labeling.services import image_jobs, project_lifecycle
from labeling.services import phases as phase_services
from labeling.services import projects as project_services
from labeling.services import releases as release_services
from labeling.services.imports import import_files
from tests.factories import MembershipFactory, ProjectFactory, png_bytes
from tests.labeling.helpers import open_calibration_1, shared_world, submit

pytestmark = pytest.mark.django_db

CARD = {name: f"The {name}." for name in release_services.CARD_FIELDS}
INCLUDE = dict.fromkeys(release_services.CATEGORIES, True)


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    """The test's media folder: the world's files copied there (``shared_world(private_media=True)``), or
    empty."""
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return Path(settings.MEDIA_ROOT)


def _build_world():
    from tests.factories import make_lead

    return build_world(make_lead())


# A labelled project with a published release and a gate, built once for the module (a release build is
# most of its cost; tests.labeling.helpers.shared_world); each test archives its copy, with its own copy of
# the world's files (a test deletes the project).
_shared_world, world = shared_world("world", _build_world, private_media=True)


def build_world(lead):
    project = ProjectFactory(created_by=lead, name="Finished study")
    members = [MembershipFactory(project=project, pseudonym=f"L{i}") for i in range(1, 4)]
    files = [(f"img{i}.png", io.BytesIO(png_bytes(colour=(40 * i, 90, 60)))) for i in range(3)]
    import_files(project=project, files=files, user=lead)
    phase = open_calibration_1(project, size=3, cal1=3, labels_per_image=3)
    for m in members:
        for tone, a in enumerate(phase.assignments.filter(labeler=m).order_by("position"), start=3):
            submit(phase, m, a.image_id, tones=[tone])
    release = release_services.release_request(project=project, user=lead, rule={"include": INCLUDE}, card_text=CARD)
    release = release_services.release_build(release)
    assert release.status == Release.Status.PUBLISHED
    gate = EvaluationGate.objects.create(project=project, name="no severe", rules={"fail_on": ["severe"]})
    return {
        "project": project,
        "lead": lead,
        "members": members,
        "cal1": phase,
        "post": project.phases.get(kind=Phase.Kind.POST_CALIBRATION),
        "image": project.images.order_by("id").first(),
        "label": Label.objects.filter(phase=phase).order_by("id").first(),
        "release": release,
        "gate": gate,
    }


def snapshot(project: Project) -> dict:
    """Everything of the project a write could change (rows and their states)."""
    project.refresh_from_db()
    phases = project.phases.order_by("id")
    return {
        "project": (project.name, project.labels_per_image, project.baseline_parameters, project.archived_at),
        "phases": list(phases.values_list("kind", "status", "labels_per_image", "closed_at")),
        "members": list(project.memberships.values_list("user_id", "role", "pseudonym")),
        "accounts": get_user_model().objects.count(),
        "images": Image.objects.filter(project=project).count(),
        "imports": ImportBatch.objects.filter(project=project).count(),
        "phase_images": PhaseImage.objects.filter(phase__project=project).count(),
        "assignments": list(Assignment.objects.filter(phase__project=project).values_list("id", "done_at")),
        "labels": Label.objects.filter(phase__project=project).count(),
        "revisions": LabelRevision.objects.filter(label__phase__project=project).count(),
        "reflections": Reflection.objects.filter(phase__project=project).count(),
        "decisions": list(ReviewDecision.objects.filter(phase__project=project).values_list("image_id", "state")),
        "releases": list(project.releases.values_list("version", "status")),
        "evaluations": EvaluationRun.objects.filter(project=project).count(),
        "gates": list(project.evaluation_gates.values_list("name", flat=True)),
        "jobs": list(Job.objects.filter(project=project).values_list("id", "status")),
        "examples": ToneExample.objects.filter(project=project).count(),
    }


def _csv(name: str, text: str) -> io.BytesIO:
    f = io.BytesIO(text.encode())
    f.name = name
    return f


def _png(name: str) -> io.BytesIO:
    f = io.BytesIO(png_bytes(colour=(1, 2, 3)))
    f.name = name
    return f


def _close_cal1(w):
    phase_services.phase_close(phase=w["cal1"])


def _decide(w):
    from labeling.services.review_decisions import review_decide

    review_decide(phase=w["post"], image=w["image"], state="accepted", user=w["lead"])


def _open_post(w):
    """Calibration 1 closed, the post-calibration phase open: a relabel request would go through."""
    phase_services.phase_close(phase=w["cal1"])
    Phase.objects.filter(pk=w["post"].pk).update(status=Phase.Status.OPEN)


# (what, who sends it: "lead" or a labeler index, what to set up before archiving, the request)
WRITES = [
    ("settings", "lead", None, lambda w: ("patch", f"/api/projects/{w['project'].pk}/", {"name": "Renamed"})),
    (
        "add a member",
        "lead",
        None,
        lambda w: (
            "post",
            f"/api/projects/{w['project'].pk}/members/",
            {"username": "newbie", "password": "a-long-pw-1"},
        ),
    ),
    (
        "import images",
        "lead",
        None,
        lambda w: ("post", f"/api/projects/{w['project'].pk}/imports/", {"files": [_png("new.png")]}, "multipart"),
    ),
    (
        "choose the calibration set",
        "lead",
        None,
        lambda w: ("post", f"/api/projects/{w['project'].pk}/calibration/", {"size": 2, "calibration_1_size": 1}),
    ),
    ("close a phase", "lead", None, lambda w: ("post", f"/api/phases/{w['cal1'].pk}/close/", {})),
    (
        "reopen a phase",
        "lead",
        _close_cal1,
        lambda w: ("post", f"/api/phases/{w['cal1'].pk}/reopen/", {"reason": "one more labeler"}),
    ),
    (
        "open a phase",
        "lead",
        _close_cal1,
        lambda w: ("post", f"/api/phases/{w['project'].phases.get(kind='calibration_2').pk}/open/", {}),
    ),
    (
        "labels per image",
        "lead",
        None,
        lambda w: ("post", f"/api/phases/{w['cal1'].pk}/labels-per-image/", {"labels_per_image": 3}),
    ),
    (
        "submit a label",
        0,
        None,
        lambda w: (
            "post",
            f"/api/phases/{w['cal1'].pk}/labels/",
            {"client_id": str(uuid.uuid4()), "image": w["image"].pk, "tones": [8]},
        ),
    ),
    (
        "answer the reflection",
        0,
        None,
        lambda w: ("put", f"/api/phases/{w['cal1'].pk}/reflection/", {"unclear_instructions": "none"}),
    ),
    (
        "import labels",
        "lead",
        None,
        lambda w: (
            "post",
            f"/api/phases/{w['cal1'].pk}/labels-import/",
            {"file": _csv("labels.csv", f"image_id,labeler,tones\n{w['image'].external_id},L1,4\n")},
            "multipart",
        ),
    ),
    (
        "correct a label",
        "lead",
        None,
        lambda w: ("post", f"/api/labels/{w['label'].pk}/corrections/", {"tones": [6], "reason": "looked again"}),
    ),
    (
        "send back for relabeling",
        "lead",
        _open_post,
        lambda w: (
            "post",
            f"/api/images/{w['image'].pk}/relabel/",
            {"labeler_ids": [w["members"][0].pk], "reason": "too dark"},
        ),
    ),
    (
        "decide on the review",
        "lead",
        None,
        lambda w: (
            "post",
            f"/api/phases/{w['post'].pk}/review-decisions/",
            {"image": w["image"].pk, "state": "resolved"},
        ),
    ),
    (
        "withdraw a review decision",
        "lead",
        _decide,
        lambda w: ("post", f"/api/phases/{w['post'].pk}/review-decisions/", {"image": w["image"].pk, "state": "open"}),
    ),
    (
        "a data manager bulk action",
        "lead",
        None,
        lambda w: (
            "post",
            f"/api/projects/{w['project'].pk}/data/bulk/",
            {"action": "accept", "image_ids": [w["image"].pk]},
        ),
    ),
    (
        "compute baselines",
        "lead",
        None,
        lambda w: (
            "post",
            f"/api/projects/{w['project'].pk}/baselines/run/",
            {"parameters": {"min_skin_fraction": 0.2}},
        ),
    ),
    (
        "make a release",
        "lead",
        None,
        lambda w: (
            "post",
            f"/api/projects/{w['project'].pk}/releases/",
            {"include": INCLUDE, "card_text": CARD},
        ),
    ),
    (
        "score a model",
        "lead",
        None,
        lambda w: (
            "post",
            f"/api/projects/{w['project'].pk}/evaluations/",
            {
                "file": _csv("results.csv", "external_id,error\n" + "".join(f"img{i},0.{i}\n" for i in range(3))),
                "release": w["release"].version,
                "name": "model A",
                "min_matched": 3,
            },
            "multipart",
        ),
    ),
    (
        "add a gate",
        "lead",
        None,
        lambda w: (
            "post",
            f"/api/projects/{w['project'].pk}/evaluation-gates/",
            {"name": "strict", "rules": {"fail_on": ["significant"]}},
        ),
    ),
    (
        "remove a gate",
        "lead",
        None,
        lambda w: ("delete", f"/api/projects/{w['project'].pk}/evaluation-gates/{w['gate'].pk}/", None),
    ),
]


@pytest.mark.parametrize(("what", "who", "prepare", "request_for"), WRITES, ids=[w[0] for w in WRITES])
def test_every_write_is_refused_on_an_archived_project_and_changes_nothing(
    world, client_for, what, who, prepare, request_for
):
    if prepare is not None:
        prepare(world)
    project = world["project"]
    project_lifecycle.project_archive(project=project, user=world["lead"])
    before = snapshot(project)
    method, url, data, *fmt = request_for(world)
    user = world["lead"] if who == "lead" else world["members"][who].user
    r = getattr(client_for(user), method)(url, data, format=fmt[0] if fmt else "json")
    assert r.status_code in (400, 409), (what, r.status_code, r.content[:300])
    text = str(r.json())
    assert "This project is archived" in text and "unarchive it" in text, (what, text)
    assert snapshot(project) == before, what


def test_the_same_write_goes_through_once_unarchived(world, client_for):
    """The refusal is the archive's, not the request's: unarchived, the same requests succeed."""
    project = world["project"]
    project_lifecycle.project_archive(project=project, user=world["lead"])
    api = client_for(world["lead"])
    url = f"/api/phases/{world['post'].pk}/review-decisions/"
    assert api.post(url, {"image": world["image"].pk, "state": "resolved"}, format="json").status_code == 400
    project_lifecycle.project_unarchive(project=project, user=world["lead"])
    assert api.post(url, {"image": world["image"].pk, "state": "resolved"}, format="json").status_code == 200
    assert api.post(f"/api/phases/{world['cal1'].pk}/close/", {}, format="json").status_code == 200


def test_reads_downloads_unarchive_and_delete_still_work(world, client_for, client):
    project, release = world["project"], world["release"]
    project_lifecycle.project_archive(project=project, user=world["lead"])
    api = client_for(world["lead"])
    pk = project.pk
    for url in (
        f"/api/projects/{pk}/",
        f"/api/projects/{pk}/images/",
        f"/api/projects/{pk}/data/",
        f"/api/projects/{pk}/members/",
        f"/api/projects/{pk}/phases/",
        f"/api/projects/{pk}/jobs/",
        f"/api/projects/{pk}/releases/",
        f"/api/projects/{pk}/releases/{release.version}/",
        f"/api/projects/{pk}/evaluations/",
        f"/api/projects/{pk}/evaluation-gates/",
        f"/api/projects/{pk}/consensus/",
        f"/api/phases/{world['cal1'].pk}/progress/",
        f"/api/phases/{world['post'].pk}/review/",
        f"/api/labels/{world['label'].pk}/revisions/",
    ):
        assert api.get(url).status_code == 200, url
    # A published release's files still download.
    r = api.get(f"/api/projects/{pk}/releases/{release.version}/files/images.parquet")
    assert r.status_code == 200 and b"".join(r.streaming_content)[:4] == b"PAR1"
    # A labeler still reads their own answers.
    assert client_for(world["members"][0].user).get(f"/api/phases/{world['cal1'].pk}/labels/").status_code == 200
    # The lead's pages answer, with the banner, and the settings page offers unarchive and delete.
    client.force_login(world["lead"])
    for url in (
        f"/projects/{pk}/",
        f"/projects/{pk}/data/",
        f"/phases/{world['cal1'].pk}/",
        f"/projects/{pk}/releases/",
    ):
        page = client.get(url)
        assert page.status_code == 200 and b"project-archived" in page.content, url
        assert b"This project is archived" in page.content, url
    settings_page = client.get(f"/projects/{pk}/settings/").content.decode()
    assert "Unarchive" in settings_page and "Delete the project" in settings_page
    assert api.post(f"/api/projects/{pk}/unarchive/").status_code == 200
    assert api.post(f"/api/projects/{pk}/archive/").status_code == 200
    assert api.delete(f"/api/projects/{pk}/?confirm=true").status_code == 204
    assert not Project.objects.filter(pk=pk).exists()


def test_pages_refuse_too_and_say_why(world, client):
    """The pages go through the same services: a phase closed from its page is refused with the message."""
    project = world["project"]
    project_lifecycle.project_archive(project=project, user=world["lead"])
    client.force_login(world["lead"])
    r = client.post(f"/phases/{world['cal1'].pk}/", {"action": "close", "confirm": "yes"}, follow=True)
    assert b"This project is archived" in r.content
    assert Phase.objects.get(pk=world["cal1"].pk).status == Phase.Status.OPEN
    r = client.post(f"/projects/{project.pk}/examples/", {"tone_3": world["image"].external_id})
    assert b"This project is archived" in r.content and not ToneExample.objects.filter(project=project).exists()
    r = client.post(f"/projects/{project.pk}/evaluations/gates/{world['gate'].pk}/delete/", follow=True)
    assert b"This project is archived" in r.content and EvaluationGate.objects.filter(pk=world["gate"].pk).exists()
    jobs = set(Job.objects.filter(project=project).values_list("id", "status"))
    # Both baseline buttons (compute the missing ones; a run with new parameters) answer without a run.
    r = client.post(f"/projects/{project.pk}/baselines/run/", {"only_without_current": "1"}, follow=True)
    assert r.status_code == 200
    r = client.post(f"/projects/{project.pk}/baselines/run/", {"min_skin_fraction": "0.2"}, follow=True)
    assert b"This project is archived" in r.content
    job = Job.objects.filter(project=project, kind=Job.Kind.DERIVATIVES).first()
    r = client.post(f"/projects/{project.pk}/jobs/{job.pk}/retry/", follow=True)
    assert r.status_code == 200
    assert set(Job.objects.filter(project=project).values_list("id", "status")) == jobs


def test_work_asked_for_before_archiving_writes_nothing_after(world, django_capture_on_commit_callbacks):
    """A release requested (or an import job retried, a baseline recompute) before the archive: its worker
    publishes nothing into the archived project, and the lead's retries are refused."""
    project, lead = world["project"], world["lead"]
    with django_capture_on_commit_callbacks(execute=False):
        release = release_services.release_request(
            project=project, user=lead, rule={"include": INCLUDE}, card_text=CARD
        )
    project_lifecycle.project_archive(project=project, user=lead)
    release = release_services.release_build(release)
    assert release.status == Release.Status.FAILED and "archived" in release.error
    assert release_services.release_zip_path(release) is None
    run = EvaluationRun.objects.create(project=project, release=world["release"], name="queued before")
    from labeling.services import evaluations as evaluation_services

    run = evaluation_services.evaluation_run(run)
    assert run.status == EvaluationRun.Status.FAILED and "archived" in run.error
    job = Job.objects.filter(project=project, kind=Job.Kind.DERIVATIVES).first()
    with pytest.raises(project_lifecycle.ValidationError, match="archived"):
        image_jobs.image_job_retry(job=job)
    with pytest.raises(project_lifecycle.ValidationError, match="archived"):
        project_services.tone_examples_set(project=project, tone_position=3, external_ids=[world["image"].external_id])
    from django.core.management import call_command

    out = io.StringIO()
    call_command("baselines_recompute", stdout=out)
    assert f"project {project.pk}: archived, skipped" in out.getvalue()
    assert not Job.objects.filter(project=project, kind=Job.Kind.BASELINE).exists()


def test_an_archived_membership_is_still_listed_but_cannot_change(world):
    project = world["project"]
    project_lifecycle.project_archive(project=project, user=world["lead"])
    other = get_user_model().objects.create_user(username="someone", password="x" * 12)
    with pytest.raises(project_lifecycle.ValidationError, match="archived"):
        project_services.membership_add(project=project, user=other)
    assert not Membership.objects.filter(project=project, user=other).exists()
