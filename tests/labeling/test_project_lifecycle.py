"""Issue 14, missing basics: a lead archives (hidden, read-only, reversible) and deletes a project (refused while
it has releases unless confirmed; nothing left behind: rows in one transaction, files after it commits)."""

import io
import uuid
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile

from labeling.models import (
    EvaluationRun,
    Image,
    ImageBaseline,
    Label,
    LabelRevision,
    Membership,
    Phase,
    Project,
    Release,
    ReleaseImage,
)
from labeling.services import project_lifecycle
from labeling.services import releases as release_services
from labeling.services.imports import import_files
from tests.factories import MembershipFactory, ProjectFactory, UserFactory, png_bytes
from tests.labeling.helpers import open_calibration_1, submit

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return Path(settings.MEDIA_ROOT)


def labelled_project(lead, name: str, *, n: int = 3, shift: int = 0) -> tuple[Project, Phase]:
    """A project with imported image files, three labelers' labels, a baseline overlay and an evaluation file."""
    project = ProjectFactory(created_by=lead, name=name)
    members = [MembershipFactory(project=project, pseudonym=f"L{i}") for i in range(1, 4)]
    files = [(f"{name}{i}.png", io.BytesIO(png_bytes(colour=(30 * i + shift, 90, 60)))) for i in range(n)]
    import_files(project=project, files=files, user=lead)
    phase = open_calibration_1(project, size=n, cal1=n, labels_per_image=3)
    for m in members:
        for tone, a in enumerate(phase.assignments.filter(labeler=m).order_by("position"), start=3):
            submit(phase, m, a.image_id, tones=[tone])
    image = project.images.first()
    ImageBaseline.objects.create(
        image=image,
        parameters={},
        parameters_hash="x",
        code_version="t",
        status=ImageBaseline.Status.OK,
        overlay=ContentFile(png_bytes(), name=f"{project.pk}/overlay-{name}.png"),
    )
    run = EvaluationRun.objects.create(project=project, name="model", status=EvaluationRun.Status.DONE)
    run.predictions.save(f"{project.pk}/results.csv", ContentFile(b"id,y\n"), save=True)
    return project, phase


def publish_release(project, lead) -> Release:
    release = release_services.release_request(
        project=project,
        user=lead,
        rule={"include": dict.fromkeys(release_services.CATEGORIES, True)},
        card_text={name: f"The {name}." for name in release_services.CARD_FIELDS},
    )
    release = release_services.release_build(release)
    assert release.status == "published"
    return release


def project_files(project_id: int, media_root: Path) -> list[Path]:
    folders = [media_root / "projects" / str(project_id), media_root / "releases" / str(project_id)]
    folders += [media_root / "evaluations" / str(project_id), media_root / "baselines" / str(project_id)]
    return [p for folder in folders if folder.exists() for p in folder.rglob("*") if p.is_file()]


def stored_names(project) -> list[str]:
    names = [n for row in project.images.values_list("original", "display", "thumbnail") for n in row if n]
    names += list(ImageBaseline.objects.filter(image__project=project).values_list("overlay", flat=True))
    return names


# --------------------------------------------------------------------------- delete


def test_delete_removes_every_row_and_file_and_nothing_of_another_project(
    lead, client_for, media_root, django_capture_on_commit_callbacks
):
    project, _ = labelled_project(lead, "gone")
    other, other_phase = labelled_project(lead, "kept", shift=7)
    publish_release(other, lead)
    names = stored_names(project)
    assert len(project_files(project.pk, media_root)) == 5 and len(names) == 4  # 3 originals, 1 overlay, 1 result
    other_files = project_files(other.pk, media_root) + [media_root / n for n in stored_names(other)]
    accounts = get_user_model().objects.count()
    pk = project.pk

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        r = client_for(lead).delete(f"/api/projects/{pk}/")
    assert r.status_code == 204
    # Rows go at once, files only once the transaction has committed.
    assert not Project.objects.filter(pk=pk).exists()
    assert all((media_root / n).exists() for n in names)
    for callback in callbacks:
        callback()
    assert project_files(pk, media_root) == []
    # No empty folder of the project either (images, releases, evaluations, baseline overlays).
    assert not [p for p in media_root.rglob("*") if p.is_dir() and p.name == str(pk) and p.parent != media_root]
    assert not any((media_root / n).exists() for n in names)

    assert not Image.objects.filter(project_id=pk).exists()
    assert not Membership.objects.filter(project_id=pk).exists()
    assert not Phase.objects.filter(project_id=pk).exists()
    assert not Label.objects.exclude(phase__project=other).exists()
    assert not LabelRevision.objects.exclude(label__phase__project=other).exists()
    assert not EvaluationRun.objects.filter(project_id=pk).exists()
    assert get_user_model().objects.count() == accounts  # accounts stay
    # The other project is whole.
    assert Label.objects.filter(phase=other_phase).count() == 9
    assert other.releases.count() == 1 and EvaluationRun.objects.filter(project=other).count() == 1
    assert other_files and all(p.exists() for p in other_files)


def test_delete_is_refused_while_releases_exist_unless_confirmed(lead, client_for, media_root):
    project, _ = labelled_project(lead, "released")
    release = publish_release(project, lead)
    api = client_for(lead)
    r = api.delete(f"/api/projects/{project.pk}/")
    assert r.status_code == 400 and "release" in r.json()["confirm"][0]
    assert Project.objects.filter(pk=project.pk).exists() and Release.objects.filter(pk=release.pk).exists()
    assert (media_root / "releases" / str(project.pk)).is_dir()
    r = api.delete(f"/api/projects/{project.pk}/?confirm=true")
    assert r.status_code == 204
    assert not Project.objects.filter(pk=project.pk).exists()
    assert not Release.objects.filter(pk=release.pk).exists()
    assert not ReleaseImage.objects.filter(release_id=release.pk).exists()


def test_delete_is_refused_while_a_release_is_being_built(lead):
    project, _ = labelled_project(lead, "busy")
    Release.objects.create(project=project, version=1, status=Release.Status.RUNNING)
    with pytest.raises(project_lifecycle.ValidationError):
        project_lifecycle.project_delete(project=project, user=lead, confirm=True)
    assert Project.objects.filter(pk=project.pk).exists()


def test_a_failed_delete_leaves_rows_and_files(lead, media_root, monkeypatch):
    project, _ = labelled_project(lead, "kept-after-error")
    before = sorted(project_files(project.pk, media_root))
    n_labels = Label.objects.filter(phase__project=project).count()

    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(Project.objects, "filter", broken)
    with pytest.raises(RuntimeError):
        project_lifecycle.project_delete(project=project, user=lead)
    monkeypatch.undo()
    assert Project.objects.filter(pk=project.pk).exists()
    assert Label.objects.filter(phase__project=project).count() == n_labels == 9
    assert sorted(project_files(project.pk, media_root)) == before


@pytest.mark.parametrize("role", [Membership.Role.LABELER, Membership.Role.REVIEWER])
def test_only_leads_archive_or_delete(lead, client_for, role):
    project, _ = labelled_project(lead, "guarded")
    other = MembershipFactory(project=project, role=role, pseudonym="X1").user
    api = client_for(other)
    assert api.delete(f"/api/projects/{project.pk}/?confirm=true").status_code == 403
    assert api.post(f"/api/projects/{project.pk}/archive/").status_code == 403
    assert Project.objects.get(pk=project.pk).archived_at is None
    stranger = client_for(UserFactory(username="stranger"))
    assert stranger.delete(f"/api/projects/{project.pk}/").status_code == 404


def test_the_delete_page_asks_for_the_name_and_the_releases(client, lead, media_root):
    project, _ = labelled_project(lead, "Pilot study")
    publish_release(project, lead)
    client.force_login(lead)
    page = client.get(f"/projects/{project.pk}/delete/")
    assert page.status_code == 200 and b"9 labels" in page.content and b"1 dataset release" in page.content
    url = f"/projects/{project.pk}/delete/"
    assert client.post(url, {"name": "pilot"}).status_code == 400
    r = client.post(url, {"name": "Pilot study"})
    assert r.status_code == 400 and b"release" in r.content
    assert Project.objects.filter(pk=project.pk).exists()
    r = client.post(url, {"name": "Pilot study", "confirm_releases": "yes"})
    assert r.status_code == 302 and r["Location"] == "/"
    assert not Project.objects.filter(pk=project.pk).exists()


# --------------------------------------------------------------------------- archive


def test_archive_hides_the_project_and_makes_it_read_only_until_unarchived(lead, client_for, labelers):
    project, phase = labelled_project(lead, "archived", n=3)
    m = MembershipFactory(project=project, pseudonym="L9")
    api = client_for(lead)
    r = api.post(f"/api/projects/{project.pk}/archive/")
    assert r.status_code == 200 and r.json()["archived_at"]
    # Out of the default list, in ?archived=true, still readable by id.
    assert project.pk not in [p["id"] for p in api.get("/api/projects/").json()["results"]]
    assert [p["id"] for p in api.get("/api/projects/?archived=true").json()["results"]] == [project.pk]
    assert api.get(f"/api/projects/{project.pk}/").status_code == 200
    # Read-only: no imports, no labels, no settings or phase changes.
    files = {"files": [io.BytesIO(png_bytes(colour=(1, 2, 3)))]}
    files["files"][0].name = "new.png"
    r = api.post(f"/api/projects/{project.pk}/imports/", files, format="multipart")
    assert r.status_code == 400 and "archived" in str(r.json())
    assert project.images.count() == 3
    image_id = phase.phase_images.first().image_id
    n_labels = Label.objects.filter(phase=phase).count()
    with pytest.raises(project_lifecycle.ValidationError):
        submit(phase, m, image_id, tones=[4])
    r = api.patch(f"/api/projects/{project.pk}/", {"name": "renamed"}, format="json")
    assert r.status_code == 400
    assert Label.objects.filter(phase=phase).count() == n_labels
    # Unarchived: listed and writable again.
    assert api.post(f"/api/projects/{project.pk}/unarchive/").json()["archived_at"] is None
    assert project.pk in [p["id"] for p in api.get("/api/projects/").json()["results"]]
    assert api.patch(f"/api/projects/{project.pk}/", {"name": "renamed"}, format="json").status_code == 200


def test_an_archived_projects_labelers_cannot_submit_through_the_api(lead, client_for):
    project, phase = labelled_project(lead, "closed-shop", n=3)
    labeler = project.memberships.get(pseudonym="L1")
    assignment = phase.assignments.filter(labeler=labeler).first()
    n_revisions = LabelRevision.objects.filter(label__labeler=labeler).count()
    project_lifecycle.project_archive(project=project, user=lead)
    # Going back to change an answer is refused too.
    payload = {"client_id": str(uuid.uuid4()), "image": assignment.image_id, "tones": [8]}
    r = client_for(labeler.user).post(f"/api/phases/{phase.pk}/labels/", payload, format="json")
    assert r.status_code == 400 and "archived" in str(r.json())
    assert LabelRevision.objects.filter(label__labeler=labeler).count() == n_revisions
    project_lifecycle.project_unarchive(project=project, user=lead)
    payload["client_id"] = str(uuid.uuid4())
    r = client_for(labeler.user).post(f"/api/phases/{phase.pk}/labels/", payload, format="json")
    assert r.status_code in (200, 201)
    assert LabelRevision.objects.filter(label__labeler=labeler).count() == n_revisions + 1


def test_the_home_page_lists_archived_projects_apart(client, lead):
    active = ProjectFactory(created_by=lead, name="Active study")
    old = ProjectFactory(created_by=lead, name="Old study")
    project_lifecycle.project_archive(project=old, user=lead)
    client.force_login(lead)
    html = client.get("/").content.decode()
    assert "Active study" in html and "Archived projects (1)" in html
    assert html.index("Old study") > html.index("Archived projects (1)") > html.index(active.name)
    settings_page = client.get(f"/projects/{old.pk}/settings/").content.decode()
    assert "Unarchive" in settings_page
    r = client.post(f"/projects/{old.pk}/unarchive/")
    assert r.status_code == 302
    old.refresh_from_db()
    assert old.archived_at is None
