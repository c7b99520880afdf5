"""Round trip: a release made with its images imports into a new project, and the consensus statistics
recomputed there equal those of the project it came from."""

import io
import json
import zipfile

import numpy as np
import pytest
from django.core.exceptions import ValidationError

from labeling.models import Image, Label, LabelRevision, Membership, Phase, Subject
from labeling.services import releases as svc
from labeling.services.consensus import phase_summary_compute
from labeling.services.labels import label_correct
from labeling.services.phases import phase_get
from labeling.services.projects import project_create
from tests.factories import MembershipFactory, UserFactory
from tests.labeling.helpers import add_images
from tests.labeling.test_releases import CARD, INCLUDE_ALL, put

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def eager(monkeypatch, settings, tmp_path):
    from tests.labeling.helpers import run_tasks_here

    run_tasks_here(monkeypatch)
    settings.MEDIA_ROOT = str(tmp_path / "media")


@pytest.fixture
def source():
    """30 images of 10 subjects, four labelers, every phase, with pairs, skips, uncertainty, a correction."""
    lead = UserFactory(username="lead")
    project = project_create(name="Source study", created_by=lead)
    team = [
        MembershipFactory(project=project, user=UserFactory(username=f"person{i}"), pseudonym=f"L{i}")
        for i in range(1, 5)
    ]
    images = add_images(project, 30, subjects=10)
    for i, subject in enumerate(Subject.objects.filter(project=project).order_by("external_id")):
        subject.attributes = {"gender": ["woman", "man", "non-binary"][i % 3], "age": 20 + 3 * i, "mean": "clash"}
        subject.save()
    rng = np.random.default_rng(11)
    p = {kind: phase_get(project, kind) for kind in Phase.ORDER}
    truth = rng.integers(2, 10, len(images))

    def label(phase, image, member, repeat=False):
        roll = rng.random()
        tone = int(np.clip(truth[images.index(image)] + rng.integers(-1, 2), 1, 10))
        if roll < 0.05:
            return put(phase, image, member, [], skip="too dark", repeat=repeat)
        if roll < 0.15 and tone < 10:
            return put(phase, image, member, [tone, tone + 1], repeat=repeat, uncertain=roll < 0.1)
        return put(phase, image, member, [tone], repeat=repeat)

    for image in images[:8]:
        for m in team:
            label(p["calibration_1"], image, m)
    for image in images[:3]:  # calibration 2 repeats three calibration-1 images
        for m in team:
            label(p["calibration_2"], image, m, repeat=True)
    for image in images[8:16]:
        for m in team:
            label(p["calibration_2"], image, m)
    for image in images[16:]:
        for m in team[: 3 + int(rng.random() < 0.5)]:
            label(p["main"], image, m)
    corrected = Label.objects.filter(phase=p["main"], skip_reason="").first()
    label_correct(label=corrected, user=lead, reason="looked again in daylight", tones=[10])
    return {"project": project, "lead": lead, "phases": p}


def release_zip(project, lead, **rule):
    release = svc.release_request(
        project=project, user=lead, rule={"include": INCLUDE_ALL, **rule}, card_text=CARD, with_images=True
    )
    release = svc.release_build(release)
    assert release.status == "published", release.error
    return svc.release_zip_path(release).read_bytes()


def named(value, pseudonym, key=None):
    """``value`` with membership ids replaced by pseudonyms (keys ``labeler``, ``labelers``, ``labeler_id``)."""
    if isinstance(value, dict):
        return {k: named(v, pseudonym, k) for k, v in value.items()}
    if isinstance(value, list):
        return [named(v, pseudonym, key) for v in value]
    if key in ("labeler", "labelers", "labeler_id") and isinstance(value, int):
        return pseudonym[value]
    return value


def summaries(project):
    """Each phase's consensus summary and per-image table, labelers by pseudonym, images by external id."""
    pseudonym = dict(Membership.objects.filter(project=project).values_list("id", "pseudonym"))
    out = {}
    for phase in project.phases.order_by("id"):
        summary, images = phase_summary_compute(phase, n_tones=project.scale.tones.count())
        summary.pop("phase")  # its id and status (the restored phases are closed)
        table = images["table"]
        external = dict(Image.objects.filter(id__in=table.index).values_list("id", "external_id"))
        out[phase.kind] = (
            named(summary, pseudonym),
            table.rename(index=external).sort_index().to_dict(),
            [pseudonym[i] for i in images["labeler_ids"].tolist()],
        )
    return out


@pytest.mark.usefixtures("coefficients_from_few_images")
def test_a_release_with_images_imports_into_a_new_project_with_equal_consensus(source, tmp_path):
    project, lead = source["project"], source["lead"]
    data = release_zip(project, lead)
    target = project_create(name="Restored study", created_by=lead)
    result = svc.release_import(project=target, fileobj=io.BytesIO(data), user=lead)
    assert result["images"] == 30 and result["labelers"] == 4
    assert result["labels"] == Label.objects.filter(phase__project=project).count()
    # Images, subjects and their attributes come back under their own names.
    assert sorted(target.images.values_list("external_id", flat=True)) == sorted(
        project.images.values_list("external_id", flat=True)
    )
    for subject in Subject.objects.filter(project=project):
        restored = Subject.objects.get(project=target, external_id=subject.external_id)
        assert restored.attributes == subject.attributes
        assert sorted(restored.images.values_list("external_id", flat=True)) == sorted(
            subject.images.values_list("external_id", flat=True)
        )
    # Labelers by pseudonym only, on accounts that cannot sign in.
    restored = Membership.objects.filter(project=target, role="labeler")
    assert sorted(restored.values_list("pseudonym", flat=True)) == ["L1", "L2", "L3", "L4"]
    assert not any(m.user.has_usable_password() for m in restored)
    assert not restored.filter(user__username__startswith="person").exists()
    # The corrected label comes back with its corrected value, as one imported revision.
    assert (
        Label.objects.filter(phase__project=target, tone_low=10, tone_high=None).count()
        == Label.objects.filter(phase__project=project, tone_low=10, tone_high=None).count()
    )
    assert set(LabelRevision.objects.filter(label__phase__project=target).values_list("source", flat=True)) == {
        "import"
    }
    # Every statistic of every phase is the same.
    before, after = summaries(project), summaries(target)
    assert before.keys() == after.keys()
    for kind in before:
        assert after[kind] == before[kind], kind
    assert (
        before["main"][0]["agreement"]["alpha"]["ordinal"]["value"] is not None
    )  # real statistics, not "too little data"
    # A release of the restored project has the same final labels.
    again = release_zip(target, lead)

    def finals(blob):
        with zipfile.ZipFile(io.BytesIO(blob)) as z:
            top = z.namelist()[0].split("/")[0]
            rows = [json.loads(line) for line in z.read(f"{top}/images.jsonl").splitlines()]
        return {r["external_id"]: (r["final_value"], r["n_labels"], r["near_consensus"]) for r in rows}

    assert finals(again) == finals(data)


def test_importing_a_release_refuses_what_it_cannot_restore_and_keeps_nothing(source):
    project, lead = source["project"], source["lead"]
    labels_only = svc.release_build(
        svc.release_request(project=project, user=lead, rule={"include": INCLUDE_ALL}, card_text=CARD)
    )
    target = project_create(name="Restored", created_by=lead)
    with pytest.raises(ValidationError, match="labels-only release"):
        svc.release_import(
            project=target, fileobj=io.BytesIO(svc.release_zip_path(labels_only).read_bytes()), user=lead
        )
    with pytest.raises(ValidationError, match="not a readable zip"):
        svc.release_import(project=target, fileobj=io.BytesIO(b"not a zip"), user=lead)
    other = io.BytesIO()
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("photos/a.txt", "hello")
    with pytest.raises(ValidationError, match="not a FairTone release"):
        svc.release_import(project=target, fileobj=io.BytesIO(other.getvalue()), user=lead)
    data = release_zip(project, lead)
    with pytest.raises(ValidationError, match="already has images"):
        svc.release_import(project=project, fileobj=io.BytesIO(data), user=lead)
    # A release whose labels point at an image missing from imagefolder/: refused whole.
    broken = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(broken, "w") as dst:
        dropped = None
        for info in src.infolist():
            name = info.filename
            if "/imagefolder/" in name and not name.endswith("metadata.jsonl") and dropped is None:
                dropped = name
                continue
            dst.writestr(info, src.read(name))
    with pytest.raises(ValidationError, match="imagefolder/"):
        svc.release_import(project=target, fileobj=io.BytesIO(broken.getvalue()), user=lead)
    assert not target.images.exists()
    assert not Label.objects.filter(phase__project=target).exists()
    assert not Membership.objects.filter(project=target, role="labeler").exists()


def test_the_release_import_command_makes_the_project_or_nothing(source, tmp_path):
    from django.core.management import CommandError, call_command

    from labeling.models import Project

    project, lead = source["project"], source["lead"]
    path = tmp_path / "release.zip"
    path.write_bytes(release_zip(project, lead))
    out = io.StringIO()
    call_command("release_import", str(path), name="Restored", lead="lead", stdout=out)
    restored = Project.objects.get(name="Restored")
    assert f"Project #{restored.pk} Restored: 30 images, 4 labelers" in out.getvalue()
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"PK not really")
    with pytest.raises(CommandError, match="not a readable zip"):
        call_command("release_import", str(bad), name="Broken", lead="lead")
    assert not Project.objects.filter(name="Broken").exists()
    with pytest.raises(CommandError, match="No user"):
        call_command("release_import", str(path), name="Other", lead="nobody")
