"""Issue 14: images a lead excluded in the data manager leave the release (readiness category
``excluded_by_lead``), each with the lead's reason in the images table, counted on the data card."""

import json

import pyarrow.parquet as pq
import pytest
from django.core.exceptions import ValidationError

from labeling.models import ImageBaseline, Release, ReleaseImage
from labeling.services import data_manager as dm
from labeling.services import releases as svc
from labeling.services.releases import rules
from tests.labeling import test_releases as base
from tests.labeling.test_releases import CARD, INCLUDE_ALL, read_csv

# The release tests' fixtures: a study labelled in every phase, built in this process, files in a temporary folder.
eager, media, team, study = base.eager, base.media, base.team, base.study

pytestmark = pytest.mark.django_db

REASON = "Consent withdrawn; photo of a minor"


def exclude(project, lead, images, reason=REASON):
    return dm.data_bulk(project=project, action="exclude", user=lead, image_ids=[i.id for i in images], reason=reason)


def test_readiness_counts_the_leads_exclusions_excluded_by_default(study, lead):
    project, images = study["project"], study["images"]
    before = svc.release_readiness(project, {})
    exclude(project, lead, images[5:7])
    report = svc.release_readiness(project, {})
    category = report["categories"]["excluded_by_lead"]
    assert category["count"] == 2 and category["include"] is False
    assert "data manager" in category["description"]
    assert [e["image_id"] for e in category["examples"]] == [images[5].id, images[6].id]
    assert report["n_excluded"] == before["n_excluded"] + 2
    # Included on purpose: counted, not excluded.
    kept = svc.release_readiness(project, {"include": {"excluded_by_lead": True}})
    assert kept["categories"]["excluded_by_lead"]["count"] == 2 and kept["n_excluded"] == before["n_excluded"]
    # Included again in the data manager: out of the category.
    dm.data_bulk(project=project, action="include", user=lead, image_ids=[images[5].id])
    assert svc.release_readiness(project, {})["categories"]["excluded_by_lead"]["count"] == 1


def test_rules_explicit_and_stored_without_the_new_category():
    # Explicit: every other category must be decided; excluded_by_lead may be left out (the lead decided per
    # image already) and then defaults to excluded.
    six = {c: True for c in svc.CATEGORIES if c != "excluded_by_lead"}
    rule = svc.rule_clean({"include": six}, explicit=True)
    assert rule["include"]["excluded_by_lead"] is False
    assert svc.rule_clean({"include": {**six, "excluded_by_lead": "true"}}, explicit=True)["include"][
        "excluded_by_lead"
    ]
    with pytest.raises(ValidationError, match="Say whether"):
        svc.rule_clean({"include": {"excluded_by_lead": False}}, explicit=True)
    # A rule stored before the category existed reads with its default; nothing else changes.
    stored = {"phases": "latest", "aggregation": "mean", "tie": "lower", "min_valid_labels": 2, "include": six}
    loaded = rules.rule_stored(stored)
    assert loaded["include"] == {**six, "excluded_by_lead": False} and "excluded_by_lead" not in stored["include"]
    assert svc.rule_clean(stored)["include"]["excluded_by_lead"] is False


def test_built_release_marks_the_images_excluded_with_the_leads_reason(study, lead, media):
    project, images = study["project"], study["images"]
    exclude(project, lead, [images[5]])
    exclude(project, lead, [images[6]], reason="Duplicate of P_7")
    release = svc.release_build(
        svc.release_request(project=project, user=lead, rule={"include": INCLUDE_ALL}, card_text=CARD)
    )
    assert release.status == Release.Status.PUBLISHED, release.error
    assert release.rule["include"]["excluded_by_lead"] is True  # the lead chose to keep them: nothing excluded
    assert release.summary["excluded"] == 0

    include = {**INCLUDE_ALL, "excluded_by_lead": False}
    release = svc.release_build(
        svc.release_request(project=project, user=lead, rule={"include": include}, card_text=CARD)
    )
    assert release.status == Release.Status.PUBLISHED, release.error
    folder = svc.release_dir(release)
    rows = {int(r["image_id"]): r for r in read_csv(folder / "images.csv")}
    assert rows[images[5].id]["excluded"] == "true"
    assert rows[images[5].id]["excluded_reason"] == "excluded_by_lead"
    assert rows[images[5].id]["lead_exclusion_reason"] == REASON
    assert rows[images[6].id]["lead_exclusion_reason"] == "Duplicate of P_7"
    assert rows[images[4].id]["excluded"] == "false" and rows[images[4].id]["lead_exclusion_reason"] == ""
    parquet = {r["image_id"]: r for r in pq.read_table(folder / "images.parquet").to_pylist()}
    assert parquet[images[5].id]["excluded"] is True and parquet[images[5].id]["lead_exclusion_reason"] == REASON
    jsonl = {r["image_id"]: r for r in map(json.loads, (folder / "images.jsonl").read_text().splitlines())}
    assert jsonl[images[6].id]["excluded_reason"] == "excluded_by_lead"
    assert ReleaseImage.objects.get(release=release, image=images[5]).excluded_reason == "excluded_by_lead"
    assert release.summary["excluded"] == 2 and release.summary["excluded_by_reason"]["excluded_by_lead"] == 2
    # The data card counts them among the exclusions, with the leads' reasons.
    card = json.loads((folder / "data_card.json").read_text())
    by_reason = {r["reason"]: r["n"] for r in card["exclusions"]["by_reason"]}
    assert by_reason == {"excluded_by_lead": 2} and card["exclusions"]["n_excluded"] == 2
    assert {r["reason"]: r["n"] for r in card["exclusions"]["lead_reasons"]} == {REASON: 1, "Duplicate of P_7": 1}
    markdown = (folder / "data_card.md").read_text()
    assert "excluded_by_lead" in markdown and REASON in markdown
    assert "lead_exclusion_reason" in markdown  # the column is described in the card's fields
    # The diff to the previous release names them newly excluded.
    diff = svc.release_diff(release.previous, release)
    assert {e["image_id"] for e in diff["newly_excluded"]} == {images[5].id, images[6].id}
    assert {e["reason"] for e in diff["newly_excluded"]} == {"excluded_by_lead"}


def test_a_release_requested_before_the_category_existed_still_builds(study, lead, media):
    """A stored rule without ``excluded_by_lead`` (queued before the upgrade) builds with the default."""
    project, images = study["project"], study["images"]
    ImageBaseline.objects.filter(image=images[0]).delete()
    release = svc.release_request(project=project, user=lead, rule={"include": INCLUDE_ALL}, card_text=CARD)
    old_rule = dict(release.rule)
    old_rule["include"] = {k: v for k, v in old_rule["include"].items() if k != "excluded_by_lead"}
    Release.objects.filter(pk=release.pk).update(rule=old_rule)
    release.refresh_from_db()
    exclude(project, lead, [images[3]])
    release = svc.release_build(release)
    assert release.status == Release.Status.PUBLISHED, release.error
    assert release.summary["excluded_by_reason"]["excluded_by_lead"] == 1
    row = ReleaseImage.objects.get(release=release, image=images[3])
    assert row.excluded_reason == "excluded_by_lead"
