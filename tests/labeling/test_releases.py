"""Dataset releases: the finalisation rule, readiness, the release files, immutability, failures, access."""

import csv
import errno
import io
import json
import uuid
import zipfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from labeling.models import (
    Assignment,
    ImageBaseline,
    Job,
    Label,
    LabelRevision,
    Membership,
    Phase,
    Release,
    ReleaseImage,
    ReleaseImmutable,
    Subject,
)
from labeling.services import baselines as baseline_services
from labeling.services import releases as svc
from labeling.services.labels import label_correct
from labeling.services.phases import phase_get
from labeling.services.releases import build as build_module
from labeling.services.releases.tables import RETEST_STATS
from labeling.services.review import review_candidates
from tests.card_texts import card_texts_for_tests
from tests.factories import MembershipFactory, UserFactory
from tests.labeling.helpers import add_images

#: Texts the tests look for stay explicit (consent in the card, the dates croissant.json reads, the licence
#: it maps to SPDX); every other required field gets its own text.
CARD = card_texts_for_tests(
    consent="Every person photographed agreed in writing.",
    collection_time_frame="2024-03-01 to 2024-06-30",
    licence="CC BY 4.0",
)
INCLUDE_ALL = dict.fromkeys(svc.CATEGORIES, True)
SECRET_NAMES = ("ann.secret", "bob.secret", "cy.secret", "dee.secret")


@pytest.fixture(autouse=True)
def eager(monkeypatch):
    """Build releases in this process even when a broker is configured (CI's real-worker run): these tests
    never commit, so a worker could not see their rows; tests/test_real_services.py covers the worker."""
    from tests.labeling.helpers import run_tasks_here

    run_tasks_here(monkeypatch)


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return Path(settings.MEDIA_ROOT)


def make_team(project):
    """Four labelers whose usernames and e-mails must never reach a release file."""
    return [
        MembershipFactory(
            project=project,
            user=UserFactory(username=name, email=f"{name}@example.org"),
            pseudonym=f"L{i}",
        )
        for i, name in enumerate(SECRET_NAMES, start=1)
    ]


@pytest.fixture
def team(project):
    return make_team(project)


def put(phase, image, labeler, tones, *, repeat=False, skip="", uncertain=False):
    """A label with one revision, written directly (the rule is tested, not the labeling flow)."""
    low = tones[0] if tones else None
    high = tones[1] if len(tones) > 1 else None
    value = None if low is None else (float(low) if high is None else ((low + high) / 2 if high == low + 1 else None))
    label = Label.objects.create(
        phase=phase,
        image=image,
        labeler=labeler,
        is_repeat=repeat,
        tone_low=low,
        tone_high=high,
        value=value,
        uncertain=uncertain,
        skip_reason=skip,
        is_valid=high is None or high == low + 1,
        time_spent_ms=1500,
    )
    LabelRevision.objects.create(
        label=label,
        number=1,
        client_id=uuid.uuid4(),
        tone_low=low,
        tone_high=high,
        value=value,
        uncertain=uncertain,
        skip_reason=skip,
        time_spent_ms=1500,
        tone_order=[10, 9, 8, 7, 6, 5, 4, 3, 2, 1],
        client_info={"screen": "1920x1080", "dpr": 2},
    )
    return label


def phases_of(project):
    return {kind: phase_get(project, kind) for kind in Phase.ORDER}


def finals(project, **rule):
    """image id -> final value (None without one) under ``rule``."""
    out = {}
    for chunk in svc.release_chunks(project, svc.rule_clean(rule)):
        for i, row in enumerate(chunk.images):
            value = chunk.final["final_value"][i]
            out[row[0]] = None if np.isnan(value) else float(value)
    return out


def good_baseline(image):
    parameters = baseline_services.baseline_parameters_effective(image.project)
    return ImageBaseline.objects.create(
        image=image,
        parameters=parameters,
        parameters_hash=baseline_services.baseline_parameters_hash(parameters),
        code_version=baseline_services.BASELINE_CODE_VERSION,
        status=ImageBaseline.Status.OK,
        ita_median=41.5,
        albedo=0.31,
        albedo_normalized=0.36,
        ita_class="intermediate",
        flags=[],
    )


@pytest.fixture
def study(project, team, media):
    return build_study(project, team)


def build_study(project, team):
    """Eight images of four subjects labelled in every phase (labels written directly)."""
    images = add_images(project, 8, subjects=4)
    for i, subject in enumerate(Subject.objects.filter(project=project).order_by("external_id")):
        subject.attributes = {"gender": ["woman", "man"][i % 2], "age": 30 + i, "sha256": "clash"}
        subject.save()
    p = phases_of(project)
    # Calibration 1: images 0, 1; calibration 2 repeats image 0 (never counted) and adds 2, 3; main 4-7.
    for image, tones in ((images[0], (3, 4, 5)), (images[1], (6, 6, 7))):
        for m, t in zip(team, tones, strict=False):
            put(p["calibration_1"], image, m, [t])
    for m in team[:3]:
        put(p["calibration_2"], images[0], m, [9], repeat=True)
    for image, tones in ((images[2], (2, 2, 3)), (images[3], (5, 5, 5))):
        for m, t in zip(team, tones, strict=False):
            put(p["calibration_2"], image, m, [t])
    for image, tones in (
        (images[4], (2, 2, 6)),
        (images[5], (4, 4, 5)),
        (images[6], (3, 3, 5, 5)),
        (images[7], (7, 8, 8)),
    ):
        for m, t in zip(team, tones, strict=False):
            put(p["main"], image, m, [t])
    for image in images:
        good_baseline(image)
    return {"project": project, "images": images, "phases": p, "team": team}


def make_release(project, user, *, include=None, with_images=False, **rule):
    release = svc.release_request(
        project=project,
        user=user,
        rule={"include": include or INCLUDE_ALL, **rule},
        card_text=CARD,
        with_images=with_images,
    )
    return svc.release_build(release)


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


# --------------------------------------------------------------------------- the finalisation rule


def test_counted_labels_latest_phase_no_repeats_a_labeler_once():
    # image 0: a calibration-1 label, a calibration-2 repeat; image 1: main x2 and post-calibration; the
    # same labeler (7) in main and post-calibration for image 1.
    image = np.array([0, 0, 1, 1, 1])
    labeler = np.array([5, 5, 6, 7, 7])
    rank = np.array([0, 1, 2, 2, 3])
    repeat = np.array([False, True, False, False, False])
    latest = svc.counted_labels(image, labeler, rank, repeat, 2, "latest")
    assert latest.tolist() == [True, False, False, False, True]
    chosen = svc.counted_labels(image, labeler, rank, repeat, 2, ["main", "post_calibration"])
    assert chosen.tolist() == [False, False, True, False, True]  # labeler 7 once, with the latest phase
    assert svc.counted_labels(image, labeler, rank, repeat, 2, ["calibration_2"]).tolist() == [False] * 5


def test_outlier_images_follow_the_review_rule_per_image_and_phase():
    from labeling.services.releases.finalise import outlier_images
    from metrics.agreement import outlier_labels

    rng = np.random.default_rng(7)
    n = 400
    image = rng.integers(0, 60, n)
    rank = rng.integers(0, 4, n)
    values = rng.integers(1, 11, n) + rng.choice([0.0, 0.5], n)
    values[rng.random(n) < 0.1] = np.nan
    repeat = rng.random(n) < 0.1
    expected = np.zeros(60, dtype=bool)
    for i in range(60):
        for r in range(3):  # the post-calibration phase (rank 3) is not reviewed
            group = (image == i) & (rank == r) & ~repeat
            if outlier_labels(values[group]).any():
                expected[i] = True
    assert outlier_images(image, rank, values, repeat, 60).tolist() == expected.tolist()


def test_final_values_follow_the_phase_choice_repeats_corrections_and_aggregation(study, lead):
    project, images, p, team = study["project"], study["images"], study["phases"], study["team"]
    # A fresh post-calibration label of image 4 by L4 (who never labelled it).
    put(p["post_calibration"], images[4], team[3], [5])
    latest = finals(project)
    assert latest[images[0].id] == pytest.approx(4.0)  # the repeats (9, 9, 9) never count
    assert latest[images[4].id] == pytest.approx(5.0)  # latest phase only: post-calibration
    both = finals(project, phases=["main", "post_calibration"])
    assert both[images[4].id] == pytest.approx((2 + 2 + 6 + 5) / 4)
    assert finals(project, phases=["main"])[images[4].id] == pytest.approx(10 / 3)
    assert finals(project, phases=["calibration_2"])[images[0].id] is None  # only repeats there
    # Aggregations and the mode's tie rule: image 6 has 3, 3, 5, 5 (mean 4).
    assert finals(project, aggregation="median")[images[4].id] == 5.0
    assert finals(project, phases=["main"], aggregation="median")[images[4].id] == 2.0
    assert finals(project, aggregation="mode", tie="lower")[images[6].id] == 3.0
    assert finals(project, aggregation="mode", tie="higher")[images[6].id] == 5.0
    assert finals(project, aggregation="mode", tie="nearest_mean")[images[6].id] == 3.0
    # A lead's correction counts (the label's current revision).
    label = Label.objects.get(phase=p["main"], image=images[4], labeler=team[2])
    label_correct(label=label, user=lead, reason="slip: 6 for a light tone", tones=[2])
    assert finals(project, phases=["main"])[images[4].id] == pytest.approx(2.0)


def test_rule_validation_names_each_bad_field():
    with pytest.raises(ValidationError) as bad:
        svc.rule_clean(
            {"phases": ["main", "final"], "aggregation": "max", "tie": "random", "include": {"blurry": False}}
        )
    fields = bad.value.message_dict
    assert "final" in fields["phases"][0] and set(fields) >= {"aggregation", "tie", "include"}
    with pytest.raises(ValidationError, match="Say whether"):
        svc.rule_clean({"include": {"no_labels": False}}, explicit=True)
    with pytest.raises(ValidationError) as missing:
        svc.card_text_clean({**CARD, "licence": " ", "consent": ""})
    assert set(missing.value.message_dict) == {"card_text.licence", "card_text.consent"}


def test_card_texts_for_tests_fill_every_required_field_from_card_fields():
    """The tests' and benches' card (``tests.card_texts``) follows CARD_FIELDS: every required field has a
    text of its own, the explicit ones as given; a name that is not a field is refused."""
    texts = card_texts_for_tests(consent="Given.")
    assert set(texts) == set(svc.CARD_REQUIRED) and texts["consent"] == "Given."
    assert len(set(texts.values())) == len(texts)
    assert svc.card_text_clean(texts)  # accepted: nothing required is missing
    with pytest.raises(KeyError, match="colour"):
        card_texts_for_tests(colour="blue")


# --------------------------------------------------------------------------- readiness


def test_readiness_counts_each_category_with_examples(project, team, media, lead):
    images = add_images(project, 6)
    p = phases_of(project)
    no_labels, one_label, spread, fine, relabel, no_baseline = images
    put(p["main"], one_label, team[0], [4])
    for m, t in zip(team, (2, 2, 6), strict=False):
        put(p["main"], spread, m, [t])
    for image in (fine, relabel, no_baseline):
        for m, t in zip(team, (4, 4, 5), strict=False):
            put(p["main"], image, m, [t])
    Assignment.objects.create(
        phase=p["post_calibration"],
        labeler=team[0],
        image=relabel,
        position=1,
        kind=Assignment.Kind.RELABEL,
        request_reason="look again",
    )
    for image in images[:-1]:
        good_baseline(image)
    report = svc.release_readiness(project, {})
    counts = {name: c["count"] for name, c in report["categories"].items()}
    assert counts == {
        "no_labels": 1,
        "too_few_labels": 1,
        "no_near_consensus": 1,
        "open_relabels": 1,
        "outliers": 1,
        "no_baseline": 1,
        "excluded_by_lead": 0,
    }
    examples = {name: [e["image_id"] for e in c["examples"]] for name, c in report["categories"].items()}
    assert examples["no_labels"] == [no_labels.id]
    assert examples["too_few_labels"] == [one_label.id]
    assert examples["no_near_consensus"] == examples["outliers"] == [spread.id]
    assert examples["open_relabels"] == [relabel.id]
    assert examples["no_baseline"] == [no_baseline.id]
    assert report["categories"]["no_labels"]["examples"][0]["external_id"] == no_labels.external_id
    reviewed = review_candidates(p["post_calibration"])["candidates"]
    assert [c["image_id"] for c in reviewed if any("far from every other" in r for r in c["reasons"])] == [spread.id]
    # Defaults exclude no labels, too few labels and open relabels: 3 images out.
    assert report["n_excluded"] == 3 and report["n_included"] == 3
    assert svc.release_readiness(project, {"min_valid_labels": 1})["categories"]["too_few_labels"]["count"] == 0


def test_excluded_images_carry_their_reasons_into_the_release(study, lead, media):
    project, images = study["project"], study["images"]
    ImageBaseline.objects.filter(image=images[4]).delete()
    include = {**INCLUDE_ALL, "no_near_consensus": False, "outliers": False, "no_baseline": False}
    release = make_release(project, lead, include=include)
    assert release.status == Release.Status.PUBLISHED, release.error
    rows = {int(r["image_id"]): r for r in read_csv(svc.release_dir(release) / "images.csv")}
    assert rows[images[4].id]["excluded"] == "true"
    assert rows[images[4].id]["excluded_reason"] == "no_near_consensus;outliers;no_baseline"
    assert rows[images[5].id]["excluded"] == "false" and rows[images[5].id]["excluded_reason"] == ""
    stored = ReleaseImage.objects.get(release=release, image=images[4])
    assert stored.excluded_reason == "no_near_consensus;outliers;no_baseline"
    assert release.summary["excluded_by_reason"]["no_baseline"] == 1
    assert release.summary["included"] == release.summary["images"] - release.summary["excluded"]


# --------------------------------------------------------------------------- the files


def test_release_files_match_the_database(study, lead, media):
    project, images, p = study["project"], study["images"], study["phases"]
    release = make_release(project, lead, with_images=True)
    assert release.status == Release.Status.PUBLISHED, release.error
    root = svc.release_dir(release)
    for table in ("images", "labels", "labelers"):
        for fmt in ("csv", "jsonl", "parquet"):
            assert (root / f"{table}.{fmt}").is_file()
    image_rows = read_csv(root / "images.csv")
    label_rows = read_csv(root / "labels.csv")
    assert len(image_rows) == project.images.count() == release.summary["images"]
    assert len(label_rows) == Label.objects.filter(phase__project=project).count() == release.summary["labels"]
    assert pq.read_table(root / "images.parquet").num_rows == len(image_rows)
    # One image's final value is the mean of its counted labels' values in the database.
    values = Label.objects.filter(image=images[7], phase=p["main"]).values_list("value", flat=True)
    row = next(r for r in image_rows if int(r["image_id"]) == images[7].id)
    assert float(row["final_value"]) == pytest.approx(sum(values) / len(values))
    assert row["final_tone"] == "8" and row["final_tone_name"] == "MST 8"
    assert float(row["ita"]) == 41.5 and row["ita_class"] == "intermediate" and row["baseline_flags"] == "[]"
    # Every subject attribute is a column, typed; a clash with a fixed column is prefixed.
    schema = pq.read_schema(root / "images.parquet")
    assert str(schema.field("age").type) == "double" and str(schema.field("gender").type) == "string"
    assert "subject_sha256" in schema.names and row["sha256"] == images[7].sha256
    # The repeats are listed, never counted; revisions' facts are there.
    repeats = [r for r in label_rows if r["is_repeat"] == "true"]
    assert repeats and all(r["counted"] == "false" for r in repeats)
    first = label_rows[0]
    assert first["tone_order"] == "[10,9,8,7,6,5,4,3,2,1]" and json.loads(first["display"])["dpr"] == 2
    assert first["revision_id"] == str(LabelRevision.objects.get(label_id=int(first["label_id"])).id)
    # The imagefolder, the data card and the manifest with every file's checksum; the zip beside.
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["release"]["version"] == 1 and manifest["release"]["counts"] == release.summary
    for path, info in manifest["files"].items():
        assert (root / path).is_file() and info["bytes"] == (root / path).stat().st_size
    # + metadata and README; the excluded images in their own split, with its own metadata.
    n_excluded = release.summary["excluded"]
    folder_files = [p for p in manifest["files"] if p.startswith("imagefolder/")]
    assert len(folder_files) == len(images) + 2 + (1 if n_excluded else 0)
    assert len([p for p in folder_files if p.startswith("imagefolder/excluded/")]) == n_excluded + (
        1 if n_excluded else 0
    )
    assert {"data_card.md", "data_card.html", "data_card.json", "croissant.json"} <= set(manifest["files"])
    archive = svc.release_zip_path(release)
    assert archive.name == f"fairtone-{project.name.lower().replace(' ', '-')}-v1.zip"
    with zipfile.ZipFile(archive) as zf:
        assert f"{archive.stem}/manifest.json" in zf.namelist()
    job = Job.objects.get(pk=release.job_id)
    assert job.kind == Job.Kind.EXPORT and job.status == Job.Status.DONE and job.done == job.total == 8


def test_release_files_name_labelers_by_pseudonym_only(study, lead, media):
    release = make_release(study["project"], lead, with_images=True)
    root = svc.release_dir(release)
    blobs = [path.read_bytes() for path in root.rglob("*") if path.is_file()]
    with zipfile.ZipFile(svc.release_zip_path(release)) as zf:
        blobs += [zf.read(name) for name in zf.namelist()]
    for secret in (*SECRET_NAMES, "example.org", "lead@"):
        needle = secret.encode()
        if secret == "example.org":  # the contacts card text names a team address; no person's
            needle = b"secret@example.org"
        assert not any(needle in blob for blob in blobs), secret
    labelers = read_csv(root / "labelers.csv")
    assert [r["labeler"] for r in labelers] == ["L1", "L2", "L3", "L4"]
    assert {r["profile_shared"] for r in labelers} == {"false"} and {r["gender"] for r in labelers} == {""}


def test_the_labelers_table_gives_each_retest_statistic_with_its_interval(study, lead, media):
    """Every retest rate and coefficient of labelers.parquet carries its 95% interval (the consensus services'
    test-retest, as the card shows it), even where the value itself is withheld as too uncertain."""
    from labeling.services.consensus import test_retest_compute

    release = make_release(study["project"], lead)
    rows = {r["labeler"]: r for r in pq.read_table(svc.release_dir(release) / "labelers.parquet").to_pylist()}
    pseudonym = dict(Membership.objects.filter(project=study["project"]).values_list("id", "pseudonym"))
    blocks = {pseudonym[b["labeler"]]: b for b in test_retest_compute(study["project"])["per_labeler"]}
    assert blocks, "the study has calibration-2 repeats"
    for name, block in blocks.items():
        row = rows[name]
        assert row["retest_n"] == block["n"]
        for stat in RETEST_STATS:
            low, high = row[f"retest_{stat}_ci_low"], row[f"retest_{stat}_ci_high"]
            assert (row[f"retest_{stat}"], low, high) == (block[stat]["value"], block[stat]["low"], block[stat]["high"])
            if stat in ("exact", "within_one"):  # a share has its Wilson interval from one image on
                assert low is not None and high is not None, (name, stat)
            if low is not None:  # a kappa or a mean shift needs more than one image for one
                assert low <= high, (name, stat)
            if row[f"retest_{stat}"] is not None:
                assert low <= row[f"retest_{stat}"] <= high
    for name in set(rows) - set(blocks):  # no repeat: no statistic and no interval
        assert all(rows[name][f"retest_{stat}_ci_low"] is None for stat in RETEST_STATS)


def test_profile_fields_appear_only_for_labelers_who_agreed_to_share_them(study, lead, media):
    first, second = study["team"][:2]
    for member, shared in ((first, True), (second, False)):
        member.gender, member.region_of_upbringing, member.expertise = "woman", "West Africa", "nurse"
        member.share_profile = shared
        member.save()
    release = make_release(study["project"], lead)
    rows = {r["labeler"]: r for r in pq.read_table(svc.release_dir(release) / "labelers.parquet").to_pylist()}
    assert rows["L1"]["profile_shared"] is True
    assert (rows["L1"]["gender"], rows["L1"]["region_of_upbringing"], rows["L1"]["expertise"]) == (
        "woman",
        "West Africa",
        "nurse",
    )
    assert rows["L2"]["profile_shared"] is False
    assert (rows["L2"]["gender"], rows["L2"]["region_of_upbringing"], rows["L2"]["expertise"]) == (None, None, None)


def test_the_same_release_written_twice_is_byte_identical(study, lead, media, tmp_path):
    release = make_release(study["project"], lead, with_images=True)
    first = svc.release_write(release, tmp_path / "one")
    second = svc.release_write(release, tmp_path / "two")
    assert first["files"] == second["files"]
    assert first["files"] == release.manifest["files"]
    for path in first["files"]:
        assert (tmp_path / "one" / path).read_bytes() == (tmp_path / "two" / path).read_bytes()


def test_metrics_report_reads_the_released_images_table(study, lead, media, tmp_path):
    from metrics.__main__ import main

    release = make_release(study["project"], lead)
    images = pq.read_table(svc.release_dir(release) / "images.parquet").to_pandas()
    predictions = tmp_path / "preds.csv"
    predictions.write_text(
        "image_id,error\n" + "".join(f"{i},{0.1 * n:.1f}\n" for n, i in enumerate(images["image_id"]))
    )
    code = main(
        [
            "report",
            "--attributes",
            str(svc.release_dir(release) / "images.parquet"),
            "--predictions",
            str(predictions),
            "--on",
            "image_id",
            "--error",
            "error",
            "--skin-tone",
            "final_value",
            "--gender",
            "gender",
            "--out",
            str(tmp_path / "report"),
            "--no-progress",
        ]
    )
    assert code == 0
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["inputs"]["n_samples"] == len(images)


# --------------------------------------------------------------------------- immutability and diffs


def test_a_published_release_never_changes_and_the_next_one_shows_the_move(study, lead, media):
    project, images, p, team = study["project"], study["images"], study["phases"], study["team"]
    v1 = make_release(project, lead)
    before = {path: (svc.release_dir(v1) / path).read_bytes() for path in v1.manifest["files"]}
    label = Label.objects.get(phase=p["main"], image=images[7], labeler=team[0])
    label_correct(label=label, user=lead, reason="a deep tone read as light", tones=[2])
    v1.refresh_from_db()
    with pytest.raises(ReleaseImmutable):
        v1.save()
    for path, data in before.items():
        assert (svc.release_dir(v1) / path).read_bytes() == data
    v2 = make_release(project, lead)
    assert v2.version == 2 and v2.previous_id == v1.id
    assert (svc.release_dir(v2) / "images.csv").read_bytes() != before["images.csv"]
    diff = svc.release_diff(v1, v2)
    assert diff["counts"]["moved"] == 1
    assert diff["moved"][0] == {
        "image_id": images[7].id,
        "external_id": images[7].external_id,
        "from": 8,
        "to": 6,
        "from_value": pytest.approx(23 / 3),
        "to_value": pytest.approx(6.0),
    }
    assert diff["counts"]["added"] == diff["counts"]["removed"] == 0


# --------------------------------------------------------------------------- failures, retries, cancel


def test_a_failing_write_fails_the_release_with_a_clear_message_and_no_files(study, lead, media, monkeypatch):
    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(build_module, "zip_write", full_disk)
    release = make_release(study["project"], lead)
    assert release.status == Release.Status.FAILED
    assert release.error == "Could not write the release files: No space left on device"
    job = Job.objects.get(pk=release.job_id)
    assert job.status == Job.Status.FAILED and job.message == release.error
    directory = media / "releases" / str(study["project"].pk)
    assert not directory.exists() or list(directory.iterdir()) == []
    assert not release.release_images.exists()


def test_a_retried_build_starts_again_and_removes_the_old_temporary_files(study, lead, media):
    release = svc.release_request(
        project=study["project"], user=lead, rule={"include": INCLUDE_ALL}, card_text=CARD, with_images=False
    )
    stale = media / "releases" / str(study["project"].pk) / "1.tmp-deadbeef"
    stale.mkdir(parents=True)
    (stale / "images.csv").write_text("half a file")
    Release.objects.filter(pk=release.pk).update(status=Release.Status.RUNNING)  # a worker died mid-way
    release = svc.release_build(release)
    assert release.status == Release.Status.PUBLISHED
    assert sorted(e.name for e in stale.parent.iterdir()) == [svc.release_zip_path(release).name, "v1"]
    assert release.release_images.count() == 8
    assert svc.release_build(release).status == Release.Status.PUBLISHED  # a second run changes nothing
    assert release.release_images.count() == 8


def test_cancelling_stops_the_build_between_chunks(study, lead, media, monkeypatch):
    monkeypatch.setattr("labeling.services.releases.finalise.CHUNK_IMAGES", 3)
    release = svc.release_request(
        project=study["project"], user=lead, rule={"include": INCLUDE_ALL}, card_text=CARD, with_images=False
    )
    real = build_module.image_table

    def cancel_during_the_first_chunk(*args, **kwargs):
        svc.release_cancel(release, user=lead)
        return real(*args, **kwargs)

    monkeypatch.setattr(build_module, "image_table", cancel_during_the_first_chunk)
    release = svc.release_build(release)
    assert release.status == Release.Status.CANCELLED
    assert Job.objects.get(pk=release.job_id).status == Job.Status.CANCELLED
    directory = media / "releases" / str(study["project"].pk)
    assert list(directory.iterdir()) == []
    with pytest.raises(ValidationError, match="queued or running"):
        svc.release_cancel(release)


def test_a_build_beats_between_its_chunks_and_stages(study, lead, media, monkeypatch, settings):
    """Issue 13, item 1: the job's heartbeat moves while the build works, not only at its start."""
    monkeypatch.setattr("labeling.services.releases.finalise.CHUNK_IMAGES", 3)  # 8 images: 3 chunks
    settings.FAIRTONE = {**settings.FAIRTONE, "JOB_HEARTBEAT_SECONDS": 0}  # every beat is written
    release = svc.release_request(
        project=study["project"], user=lead, rule={"include": INCLUDE_ALL}, card_text=CARD, with_images=False
    )
    seen = []
    real = build_module.image_table

    def record_the_heartbeat(*args, **kwargs):
        seen.append(Job.objects.get(pk=release.job_id).heartbeat_at)
        return real(*args, **kwargs)

    monkeypatch.setattr(build_module, "image_table", record_the_heartbeat)
    release = svc.release_build(release)
    assert release.status == Release.Status.PUBLISHED
    job = Job.objects.get(pk=release.job_id)
    assert len(seen) == 3 and None not in seen
    assert seen == sorted(seen) and len(set(seen)) == 3  # a new heartbeat at each chunk
    assert job.heartbeat_at > seen[-1] >= job.started_at  # and after the last one (the card, the zip)


def test_a_build_whose_worker_died_is_failed_once_its_heartbeat_is_stale_and_can_be_made_again(
    study, lead, media, settings
):
    from datetime import timedelta

    from django.utils import timezone

    from labeling.services import jobs as job_services

    settings.FAIRTONE = {**settings.FAIRTONE, "JOB_STALE_MINUTES": 3}
    project = study["project"]
    release = svc.release_request(project=project, user=lead, rule={"include": INCLUDE_ALL}, card_text=CARD)
    # The worker started the build, beat once, then died (SIGKILL): nothing more happens.
    now = timezone.now()
    Release.objects.filter(pk=release.pk).update(status=Release.Status.RUNNING)
    Job.objects.filter(pk=release.job_id).update(status=Job.Status.RUNNING, started_at=now, heartbeat_at=now)
    assert job_services.jobs_sweep(now=now + timedelta(minutes=3) - timedelta(seconds=30))["abandoned"] == 0
    assert Release.objects.get(pk=release.pk).status == Release.Status.RUNNING
    # Long before the build's four-hour time limit: the heartbeat is stale.
    assert job_services.job_deadline_seconds(Job.Kind.EXPORT) > 3600
    assert job_services.jobs_sweep(now=now + timedelta(minutes=3, seconds=1))["abandoned"] == 1
    release.refresh_from_db()
    job = Job.objects.get(pk=release.job_id)
    assert release.status == Release.Status.FAILED and job.status == Job.Status.FAILED
    assert job.finished_at is not None
    for text in (release.error, job.message):
        assert "no heartbeat from its worker for 3 minutes, more than the 3 allowed" in text
        assert "the worker was lost" in text and "start the release again" in text
    # Retryable: the release is made again, and a late task of the failed one publishes nothing.
    assert svc.release_build(release).status == Release.Status.FAILED
    again = svc.release_build(
        svc.release_request(project=project, user=lead, rule={"include": INCLUDE_ALL}, card_text=CARD)
    )
    assert again.status == Release.Status.PUBLISHED


def test_two_requests_at_once_give_one_release(study, lead):
    project = study["project"]
    first = svc.release_request(project=project, user=lead, rule={"include": INCLUDE_ALL}, card_text=CARD)
    with pytest.raises(ValidationError, match="already being made"):
        svc.release_request(project=project, user=lead, rule={"include": INCLUDE_ALL}, card_text=CARD)
    assert project.releases.count() == 1 and first.status == Release.Status.QUEUED
    # The database holds the line too, whatever the timing.
    with pytest.raises(IntegrityError), transaction.atomic():
        Release.objects.create(project=project, version=2, rule={}, card_text={})


def test_a_project_without_labels_cannot_be_released(project, lead, media):
    add_images(project, 2)
    with pytest.raises(ValidationError, match="No labels to release yet"):
        svc.release_request(project=project, user=lead, rule={"include": INCLUDE_ALL}, card_text=CARD)


# --------------------------------------------------------------------------- API and pages


def test_api_release_flow(study, lead, media, client_for, django_capture_on_commit_callbacks):
    project = study["project"]
    api = client_for(lead)
    base = f"/api/projects/{project.pk}/releases/"
    ready = api.get(base + "readiness/", {"include_no_baseline": "false", "min_valid_labels": "3"})
    assert ready.status_code == 200 and ready.json()["categories"]["no_baseline"]["include"] is False
    assert api.get(base + "readiness/", {"aggregation": "max"}).json() == {
        "aggregation": ["One of mean, median, mode."]
    }
    body = {"phases": "latest", "aggregation": "median", "include": INCLUDE_ALL, "card_text": CARD}
    assert api.post(base, {**body, "card_text": {**CARD, "licence": ""}}, format="json").status_code == 400
    with django_capture_on_commit_callbacks(execute=True):
        created = api.post(base, body, format="json")
    assert created.status_code == 202, created.json()
    assert created.json()["version"] == 1 and created.json()["job"]["kind"] == "export"
    detail = api.get(f"{base}1/").json()
    assert detail["status"] == "published" and detail["summary"]["images"] == 8
    assert detail["manifest"]["release"]["rule"]["aggregation"] == "median"
    paths = [f["path"] for f in detail["files"]]
    assert "images.parquet" in paths and "manifest.json" in paths
    got = api.get(f"{base}1/files/images.csv")
    assert got.status_code == 200 and b"final_value" in b"".join(got.streaming_content)
    for bad in ("../../../etc/passwd", "settings.py", "v1/images.csv", "imagefolder/1.png"):
        assert api.get(f"{base}1/files/{bad}").status_code == 404, bad
    zipped = api.get(f"{base}1/download/")
    assert zipped.status_code == 200 and zipfile.is_zipfile(io.BytesIO(b"".join(zipped.streaming_content)))
    assert api.post(f"{base}1/cancel/").status_code == 400
    with django_capture_on_commit_callbacks(execute=True):
        api.post(base, body, format="json")
    diff = api.get(f"{base}2/diff/", {"against": 1})
    assert diff.status_code == 200 and diff.json()["counts"]["moved"] == 0
    assert api.get(f"{base}2/diff/").status_code == 400
    assert [r["version"] for r in api.get(base).json()["results"]] == [2, 1]


def test_api_no_labels_is_a_clear_400(project, lead, media, client_for):
    add_images(project, 1)
    body = {"include": INCLUDE_ALL, "card_text": CARD}
    response = client_for(lead).post(f"/api/projects/{project.pk}/releases/", body, format="json")
    assert response.status_code == 400 and response.json() == {"detail": "No labels to release yet."}


def test_labelers_cannot_see_or_download_releases(study, lead, media, client_for, client):
    project = study["project"]
    release = make_release(project, lead)
    reviewer = UserFactory(username="reviewer")
    MembershipFactory(project=project, user=reviewer, role=Membership.Role.REVIEWER, pseudonym="R1")
    labeler = study["team"][0].user
    stranger = UserFactory(username="stranger")
    base = f"/api/projects/{project.pk}/releases/"
    urls = [base, f"{base}1/", f"{base}1/files/images.csv", f"{base}1/download/", f"{base}readiness/"]
    for url in urls:
        assert client_for(labeler).get(url).status_code == 403, url
        assert client_for(stranger).get(url).status_code == 404, url
        assert client_for(reviewer).get(url).status_code == 200, url
    assert (
        client_for(reviewer).post(f"{base}", {"include": INCLUDE_ALL, "card_text": CARD}, format="json").status_code
        == 403
    )
    assert client_for(reviewer).post(f"{base}1/cancel/").status_code == 403
    for url in (f"/projects/{project.pk}/releases/", f"/projects/{project.pk}/releases/{release.version}/"):
        client.force_login(labeler)
        assert client.get(url).status_code == 404
        client.force_login(reviewer)
        assert client.get(url).status_code == 200


def test_release_pages_make_follow_and_cancel_a_release(study, lead, media, client, django_capture_on_commit_callbacks):
    project = study["project"]
    client.force_login(lead)
    page = client.get(f"/projects/{project.pk}/releases/", {"min_valid_labels": "3"})
    assert page.status_code == 200
    assert page.context["readiness"]["rule"]["min_valid_labels"] == 3
    assert b'id="category-too_few_labels"' in page.content and b"Releases</a>" in page.content
    form = {"phases": "latest", "aggregation": "mean", "tie": "lower", "min_valid_labels": "2", **CARD}
    form.update({f"include_{c}": "1" for c in svc.CATEGORIES if c != "no_labels"})
    refused = client.post(f"/projects/{project.pk}/releases/", {**form, "consent": ""})
    assert refused.status_code == 400 and "Consent of the people photographed is required" in refused.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        made = client.post(f"/projects/{project.pk}/releases/", form)
    assert made.status_code == 302 and made["Location"] == f"/projects/{project.pk}/releases/1/"
    release = project.releases.get(version=1)
    assert release.status == "published" and release.rule["include"]["no_labels"] is False
    detail = client.get(made["Location"]).content.decode()
    assert "images.parquet" in detail and release.manifest["files"]["images.csv"]["sha256"] in detail
    assert 'sandbox srcdoc="' in detail and "Motivation" in detail
    # The next form is prefilled with this release's card text.
    again = client.get(f"/projects/{project.pk}/releases/").content.decode()
    assert CARD["consent"] in again
    queued = svc.release_request(project=project, user=lead, rule={"include": INCLUDE_ALL}, card_text=CARD)
    assert client.post(f"/projects/{project.pk}/releases/{queued.version}/cancel/").status_code == 302
    queued.refresh_from_db()
    assert queued.status == "cancelled"


def test_baseline_correlations_from_arrays_equal_the_baselines_page_comparison(study):
    project = study["project"]
    for k, baseline in enumerate(ImageBaseline.objects.filter(image__project=project).order_by("image_id")):
        baseline.ita_median = 60.0 - 4.5 * k + (k % 3)
        baseline.albedo = None if k == 2 else 0.5 - 0.03 * k
        baseline.albedo_normalized = 0.6 - 0.02 * (k % 5)
        baseline.flags = ["small_skin_area"] if k == 4 else []
        baseline.save()
    expected = baseline_services.baseline_comparison(project=project)
    got = baseline_services.baseline_correlations(project=project)
    assert got["correlations"] == expected["correlations"]
    assert got["correlations"]["ita"]["rho"] is not None and got["correlations"]["apparent_albedo"]["n"] == 7
    assert got["n_points"] == len(expected["points"]) == 8
    assert got["n_flagged"] == sum(1 for p in expected["points"] if p["flags"]) == 1
