"""The data card a dataset reviewer expects (issue 22): Datasheets' and CrowdWorkSheets' sections.

The lead writes what no computation can, in the release form and the API, with the required fields enforced
(one error per field; the optional ones may stay empty); the card computes the annotation protocol from the
project's records (instructions, tone examples, display conditions, reflections counted, time per label) and
states the sensitive data; croissant.json carries them as Responsible AI terms. A release stored before the
fields existed still renders ("not given").
"""

# ruff: noqa: F811  (the imported fixtures)

import json
import re
import uuid

import numpy as np
import pytest
from django.core.exceptions import ValidationError

from labeling.models import Label, LabelRevision, Reflection, Release, ToneExample
from labeling.services import releases as svc
from labeling.services.releases.card import SECTIONS, card_render
from labeling.services.releases.card_facts import card_facts
from labeling.services.releases.card_protocol import instructions_text
from labeling.services.releases.croissant import collection_dates
from labeling.services.releases.rules import CARD_FIELDS, CARD_REQUIRED, rule_clean
from tests.labeling.test_releases import (  # noqa: F401  (fixtures)
    CARD,
    INCLUDE_ALL,
    eager,
    make_release,
    media,
    study,
    team,
)

#: The six fields of the first card, all an API client written before issue 22 sends.
OLD_CARD = {
    key: CARD[key] for key in ("motivation", "intended_uses", "out_of_scope_uses", "licence", "contacts", "consent")
}
SECRET_REFLECTION = "my-private-words-to-the-lead"


def section(markdown: str, title: str) -> str:
    start = markdown.index(f"\n## {title}\n")
    end = markdown.find("\n## ", start + 1)
    return markdown[start : end if end >= 0 else None]


def facts_for(project, card):
    return card_facts(
        project=project,
        phases=list(project.phases.order_by("id")),
        final={"tone_counts": {3: 2, 5: 2}, "n_images": 8, "n_included": 4, "aggregation": "mean"},
        exclusions={"no_labels": 4},
        rule=rule_clean({}),
        card_text=card,
        previous_diff=None,
        release_info={"project": "Fields study", "version": 1, "created_at": "2025-06-01T10:00:00+00:00"},
    )


# --------------------------------------------------------------------------- the fields


def test_every_field_has_a_section_title_help_and_the_old_six_keep_their_keys():
    assert set(OLD_CARD) <= set(CARD_REQUIRED)
    required = set(CARD_REQUIRED)
    assert {
        "collection_source",
        "collection_time_frame",
        "collection_devices",
        "collected_by",
        "consent",
        "pre_filtering",
        "labeler_recruitment",
        "compensation",
        "working_conditions",
        "out_of_scope_uses",
        "maintenance_plan",
    } <= required
    optional = set(CARD_FIELDS) - required
    assert optional and optional == {"funding", "labeler_training", "social_impact"}
    for key, field in CARD_FIELDS.items():
        assert field["section"] in svc.CARD_SECTIONS, key
        assert field["title"] and len(field["help"]) > 20 and field["standard"], key


def test_required_fields_are_enforced_one_error_each_and_optional_ones_may_be_empty():
    with pytest.raises(ValidationError) as refused:
        svc.card_text_clean(OLD_CARD)
    errors = refused.value.message_dict
    assert set(errors) == {f"card_text.{key}" for key in CARD_REQUIRED if key not in OLD_CARD}
    assert errors["card_text.compensation"] == ["Compensation is required before a release is made."]
    # Blank is missing; the optional ones may be empty or absent (stored as "").
    with pytest.raises(ValidationError) as blank:
        svc.card_text_clean({**CARD, "working_conditions": "  \n "})
    assert set(blank.value.message_dict) == {"card_text.working_conditions"}
    cleaned = svc.card_text_clean({**CARD, "funding": ""})
    assert cleaned["funding"] == "" and cleaned["social_impact"] == "" and cleaned["labeler_training"] == ""
    assert set(cleaned) == set(CARD_FIELDS)
    # Not a text, too long, unknown: each named.
    with pytest.raises(ValidationError) as bad:
        svc.card_text_clean({**CARD, "funding": 5, "social_impact": "x" * 20_001, "colour": "blue"})
    assert set(bad.value.message_dict) == {"card_text.funding", "card_text.social_impact", "card_text.colour"}


def test_an_api_client_sending_the_old_six_fields_gets_a_400_per_missing_field(study, lead, client_for):
    api = client_for(lead)
    base = f"/api/projects/{study['project'].pk}/releases/"
    old = api.post(base, {"include": INCLUDE_ALL, "card_text": OLD_CARD}, format="json")
    assert old.status_code == 400
    body = old.json()
    assert set(body) == {f"card_text.{key}" for key in CARD_REQUIRED if key not in OLD_CARD}
    assert body["card_text.maintenance_plan"] == ["Maintenance plan is required before a release is made."]
    assert not Release.objects.filter(project=study["project"]).exists()
    # The schema says which are required, and every field's meaning.
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    card = schema["components"]["schemas"]["ReleaseRequestRequest"]["properties"]["card_text"]
    assert set(card["required"]) == set(CARD_REQUIRED) and set(card["properties"]) == set(CARD_FIELDS)
    assert card["additionalProperties"] is False
    assert "(optional)" in card["properties"]["social_impact"]["description"]


def test_release_form_groups_the_fields_by_section_and_marks_each_error(study, lead, client, media):
    project = study["project"]
    client.force_login(lead)
    page = client.get(f"/projects/{project.pk}/releases/").content.decode()
    titles = [m for m in re.findall(r'<fieldset class="card-section" id="card-section-(\w+)">', page)]
    assert titles == [k for k in svc.CARD_SECTIONS if any(f["section"] == k for f in CARD_FIELDS.values())]
    for key, field in CARD_FIELDS.items():
        textarea = re.search(rf'<textarea id="card-{key}" name="{key}"([^>]*)>', page)
        assert textarea, key
        assert ("required" in textarea.group(1)) == field["required"], key
        assert f'id="help-{key}"' in page
    assert page.count('<span class="required small">(required)</span>') == len(CARD_REQUIRED)
    assert page.count('<span class="muted small">(optional)</span>') == len(CARD_FIELDS) - len(CARD_REQUIRED)
    # Posting the old six: 400, each missing field marked beside itself, what was typed kept.
    form = {"phases": "latest", "aggregation": "mean", "tie": "lower", "min_valid_labels": "2", **OLD_CARD}
    form.update({f"include_{c}": "1" for c in svc.CATEGORIES})
    form["motivation"] = "Kept <as typed>"
    refused = client.post(f"/projects/{project.pk}/releases/", form)
    assert refused.status_code == 400
    page = refused.content.decode()
    for key in CARD_REQUIRED:
        marked = f'<span class="error small" id="error-{key}">' in page
        assert marked == (key not in OLD_CARD), key
    assert 'id="error-compensation">Compensation is required before a release is made.</span>' in page
    assert "Kept &lt;as typed&gt;</textarea>" in page
    assert f"The data card needs {len(CARD_REQUIRED) - len(OLD_CARD)} more field(s)" in page
    assert not project.releases.exists()


# --------------------------------------------------------------------------- the computed sections


@pytest.fixture
def protocol_study(study):
    """The study with instructions, tone examples, display reports, reflections and varied times."""
    project, images, team = study["project"], study["images"], study["team"]
    project.instructions = (
        "<p>Choose the tone of the <strong>face</strong> &amp; neck.</p><ul><li>Ignore clothing.</li>"
        "<li>Use both tones when unsure.</li></ul>"
    )
    project.save()
    tone = project.scale.tones.get(position=3)
    ToneExample.objects.create(project=project, tone=tone, image=images[1], caption='<img src=x onerror="a()">')
    rng = np.random.default_rng(7)
    for label in Label.objects.filter(phase__project=project).order_by("id"):
        label.time_spent_ms = int(rng.integers(800, 20_000))
        label.save(update_fields=["time_spent_ms"])
    # A second answer of each label, with what the labeler's browser reported (revisions are never changed).
    for i, label in enumerate(Label.objects.filter(phase__project=project).order_by("id")):
        if i % 3 == 0:
            info = {"simulated": True}
        else:
            info = {
                "colorGamut": "p3" if i % 2 else "srgb",
                "dynamicRangeHigh": i % 4 == 1,
                "devicePixelRatio": 2 if i % 2 else 1.5,
                "screenWidth": 1920 if i % 2 else 1280,
                "prefersColorScheme": "light",
                "mobile": False,
            }
        LabelRevision.objects.create(
            label=label,
            number=2,
            client_id=uuid.uuid4(),
            source=LabelRevision.Source.CHANGE,
            tone_low=label.tone_low,
            tone_high=label.tone_high,
            value=label.value,
            skip_reason=label.skip_reason,
            time_spent_ms=label.time_spent_ms,
            client_info=info,
        )
    cal1 = study["phases"]["calibration_1"]
    for member in team[:3]:
        cal1.participants.get_or_create(labeler=member, defaults={"shuffle_seed": 1})
    Reflection.objects.create(
        phase=cal1,
        labeler=team[0],
        minutes_taken=20,
        biases_noticed=["lighting", "background"],
        unclear_instructions=SECRET_REFLECTION,
    )
    Reflection.objects.create(phase=cal1, labeler=team[1], minutes_taken=10, biases_noticed=["lighting"])
    Reflection.objects.create(phase=cal1, labeler=team[2])  # skipped
    return study


def test_the_annotation_protocol_comes_from_the_projects_records(protocol_study):
    project = protocol_study["project"]
    facts = facts_for(project, CARD)
    protocol = facts["annotation_protocol"]
    assert protocol["instructions"] == (
        "Choose the tone of the face & neck.\n• Ignore clothing.\n• Use both tones when unsure."
    )
    assert [t["n_examples"] for t in protocol["tone_examples"]] == [
        1 if t.position == 3 else 0 for t in project.ordered_tones()
    ]
    # Display: counted over the labelers' submissions, as reported.
    revisions = LabelRevision.objects.filter(label__phase__project=project)
    infos = list(revisions.values_list("client_info", flat=True))
    display = protocol["display"]
    assert display["n_submissions"] == len(infos) == revisions.count()
    assert display["n_simulated"] == sum(bool(i.get("simulated")) for i in infos)
    assert display["n_recorded"] == sum("colorGamut" in i for i in infos)
    by_key = {p["key"]: {v["value"]: v["n"] for v in p["values"]} for p in display["properties"]}
    assert by_key["colorGamut"] == {g: sum(i.get("colorGamut") == g for i in infos) for g in ("p3", "srgb")}
    assert by_key["dynamicRangeHigh"] == {
        "yes": sum(i.get("dynamicRangeHigh") is True for i in infos),
        "no": sum(i.get("dynamicRangeHigh") is False for i in infos),
    }
    assert by_key["devicePixelRatio"] == {
        "2": sum(i.get("devicePixelRatio") == 2 for i in infos),
        "1.5": sum(i.get("devicePixelRatio") == 1.5 for i in infos),
    }
    assert by_key["screenWidth"] == {
        "1920 or more": sum(i.get("screenWidth") == 1920 for i in infos),
        "1024 to 1439": sum(i.get("screenWidth") == 1280 for i in infos),
    }
    # Reflections: counted, never quoted.
    (cal1,) = [r for r in protocol["reflections"] if r["kind"] == "calibration_1"]
    assert (cal1["n_reflections"], cal1["n_skipped"], cal1["minutes_median"]) == (2, 1, 15.0)
    noticed = {b["factor"]: b["n"] for b in cal1["biases_noticed"]}
    assert noticed["lighting"] == 2 and noticed["background"] == 1 and noticed["recency"] == 0
    assert cal1["n_unclear_instructions"] == 1
    # Time per label: each phase's labels' seconds, median, quartiles and 90th percentile.
    times = {t["kind"]: t for t in protocol["time_per_label"]}
    for kind, phase in protocol_study["phases"].items():
        seconds = np.array(Label.objects.filter(phase=phase).values_list("time_spent_ms", flat=True)) / 1000
        if not seconds.size:
            assert kind not in times
            continue
        row = times[kind]
        assert row["n"] == seconds.size
        if seconds.size < 5:
            assert row["median_s"] is None and row["reason"].startswith("too little data")
        else:
            assert [row["p25_s"], row["median_s"], row["p75_s"], row["p90_s"]] == pytest.approx(
                np.percentile(seconds, [25, 50, 75, 90]), abs=0.006
            )
    everything = np.array(Label.objects.filter(phase__project=project).values_list("time_spent_ms", flat=True)) / 1000
    assert times["all"]["median_s"] == pytest.approx(float(np.median(everything)), abs=0.006)

    files = card_render(facts)
    markdown = files["data_card.md"].decode()
    page = files["data_card.html"].decode()
    protocol_md = section(markdown, "Annotation protocol")
    for heading in (
        "Instructions the labelers read",
        "Tones and example photos",
        "Display conditions",
        "Calibration reflections",
        "Time per label",
    ):
        assert f"### {heading}" in protocol_md
    assert "Choose the tone of the face &amp; neck." in protocol_md
    assert "2 of 3 labelers reflected (1 skipped)" in protocol_md
    assert f"{times['all']['median_s']:.1f} s" in protocol_md
    # The labelers' own words are never published; the caption and instructions are text, not markup.
    for text in (markdown, page, files["data_card.json"].decode()):
        assert SECRET_REFLECTION not in text
    assert "<img src=x" not in page and "&lt;img src=x onerror=&quot;a()&quot;&gt;" in page
    assert "<img src=x" not in markdown
    assert "GDPR Art. 9" in section(markdown, "Sensitive data")


def test_sections_follow_datasheets_order_and_the_leads_texts_sit_in_theirs(protocol_study):
    facts = facts_for(protocol_study["project"], {**CARD, "social_impact": "Helps <b>audits</b> [x](http://e.vil)"})
    markdown = card_render(facts)["data_card.md"].decode()
    found = re.findall(r"^## (.+)$", markdown, flags=re.M)
    assert found == list(SECTIONS)
    for key, field in CARD_FIELDS.items():
        if not field["required"] and key != "social_impact":
            assert f"### {field['title']}\n" not in markdown, key  # optional and empty: left out
            continue
        title = dict(
            motivation="Motivation",
            collection="Collection",
            preprocessing="Preprocessing",
            annotation="Labelers",
            uses="Uses",
            distribution="Distribution",
            maintenance="Maintenance",
        )[field["section"]]
        assert f"### {field['title']}\n" in section(markdown, title), key
    uses = section(markdown, "Uses")
    assert "Helps &lt;b&gt;audits&lt;/b&gt; \\[x\\](http://e.vil)" in uses and "<b>" not in uses
    page = card_render(facts)["data_card.html"].decode()
    assert "<b>audits" not in page and "&lt;b&gt;audits&lt;/b&gt;" in page


def test_a_release_stored_with_the_first_six_fields_still_renders_saying_not_given(protocol_study):
    facts = facts_for(protocol_study["project"], OLD_CARD)
    markdown = card_render(facts)["data_card.md"].decode()
    compensation = section(markdown, "Labelers")
    assert "### Compensation\n\n(not given)" in compensation
    assert "### Consent of the people photographed\n\n" + OLD_CARD["consent"] in section(markdown, "Collection")
    assert "### Funding" not in markdown
    # Keys a stored release holds that today's form does not keep their words, under Maintenance.
    facts = facts_for(protocol_study["project"], {**OLD_CARD, "ethics_review": "Approved by board 12."})
    assert "### Ethics review\n\nApproved by board 12." in section(
        card_render(facts)["data_card.md"].decode(), "Maintenance"
    )


# --------------------------------------------------------------------------- croissant.json


def test_collection_dates_are_the_first_and_last_iso_dates_named():
    assert collection_dates("2024-03-01 to 2024-06-30") == ["2024-03-01", "2024-06-30"]
    assert collection_dates("From 2023-11 until 2024-01-15, then 2024-02") == ["2023-11-01", "2024-02-01"]
    assert collection_dates("Spring 2024") == [] and collection_dates("2024-13-01") == []
    assert collection_dates("2024-02-30") == [] and collection_dates("on 2024-05-05") == ["2024-05-05"]


def test_croissant_carries_the_leads_fields_as_rai_terms_and_mlcroissant_reads_them(study, lead, media):
    card = {**CARD, "social_impact": "Audits of face models across skin tones.", "funding": "A public grant."}
    release = svc.release_build(
        svc.release_request(project=study["project"], user=lead, rule={"include": INCLUDE_ALL}, card_text=card)
    )
    assert release.status == Release.Status.PUBLISHED, release.error
    root = svc.release_dir(release)
    doc = json.loads((root / "croissant.json").read_text())
    collection = doc["rai:dataCollection"]
    for key in ("collection_source", "collection_devices", "collected_by", "consent", "collection_time_frame"):
        assert card[key] in collection, key
    assert doc["rai:dataCollectionTimeframe"] == "2024-03-01 to 2024-06-30"
    assert doc["rai:dataCollectionTimeFrame"] == ["2024-03-01", "2024-06-30"]
    assert doc["rai:dataPreprocessingProtocol"][0] == f"Pre-filtering: {card['pre_filtering']}"
    protocol = " ".join(doc["rai:dataAnnotationProtocol"])
    for key in ("labeler_recruitment", "compensation", "working_conditions"):
        assert card[key] in protocol, key
    assert "Time per label, All phases: median" in protocol
    assert doc["rai:dataSocialImpact"] == card["social_impact"]
    assert doc["rai:dataReleaseMaintenancePlan"].startswith(card["maintenance_plan"])
    assert "Funding: A public grant." in doc["description"]
    mlc = pytest.importorskip("mlcroissant")
    dataset = mlc.Dataset(jsonld=str(root / "croissant.json"))
    assert not dataset.metadata.ctx.issues.errors and not dataset.metadata.ctx.issues.warnings
    metadata = dataset.metadata
    assert [d.date().isoformat() for d in metadata.data_collection_timeframe] == ["2024-03-01", "2024-06-30"]
    assert metadata.data_social_impact == card["social_impact"]
    assert metadata.data_release_maintenance_plan.startswith(card["maintenance_plan"])


def test_instructions_text_keeps_the_words_without_markup():
    assert instructions_text("") == ""
    assert instructions_text("<p>A &lt;b&gt; <em>b</em></p><ol><li>one</li><li>two<br>three</li></ol>") == (
        "A <b> b\n• one\n• two\nthree"
    )
