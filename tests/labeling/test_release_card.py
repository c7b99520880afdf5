"""The data card of a release: facts from the database and the services, rendered as Markdown, HTML, JSON, plots."""

import copy
import json
import re

import numpy as np
import pytest
from django.core.cache import cache

from labeling.models import Image, ImageBaseline, Label, Membership, Phase, Subject
from labeling.plots import card_plots_cache_clear as plots_cache_clear
from labeling.services import baselines as baseline_services
from labeling.services.consensus import phase_summary, test_retest_compute
from labeling.services.phases import phase_close, phase_get, phase_open
from labeling.services.releases.card import PLOT_NAMES, SECTIONS, card_render
from labeling.services.releases.card_facts import card_facts
from labeling.services.releases.rules import CARD_FIELDS, rule_clean
from metrics.agreement import ALPHA_INTERVAL_READINGS, read_alpha_interval
from tests.labeling.helpers import add_images, open_calibration_1, submit

# Tones each labeler gives to the 8 calibration-1 images (rows: L1..L4); (a, b) = adjacent pair.
TONES = [
    [1, 2, 3, (3, 4), 5, 6, 7, 9],
    [1, 3, 3, 4, 5, 7, 7, 8],
    [2, 2, 4, 4, (5, 6), 6, 8, 9],
    [1, 2, 3, 5, 5, 2, 7, 9],
]
CARD = {
    "motivation": 'Check a face model. <script>alert("x")</script> & <b>bold</b>',
    "intended_uses": "Fairness evaluation of skin-tone performance gaps.",
    "out_of_scope_uses": "Inferring anyone's skin tone; training classifiers.",
    "licence": "CC BY 4.0 (see https://creativecommons.org/licenses/by/4.0/)",
    "contacts": "fairness@example.org, http://example.org/team",
    "consent": "Every person photographed agreed in writing.\n\nConsent can be withdrawn.",
}
FINAL = {"tone_counts": {1: 1, 2: 1, 3: 3, 5: 3, 7: 2}, "n_images": 12, "n_included": 10, "aggregation": "mean"}
EXCLUSIONS = {"no_labels": 2}
RELEASE_INFO = {
    "project": "Card study",
    "version": 2,
    "previous_version": 1,
    "created_at": "2025-06-01T10:00:00+00:00",
    "code_version": "fairtone-release.1; test",
}
DIFF = {
    "from": 1,
    "to": 2,
    "counts": {"moved": 2, "added": 1, "removed": 0, "newly_excluded": 0, "newly_included": 1},
    "moved": [
        {"image_id": 1, "external_id": "a.png", "from": 3, "to": 4, "from_value": 3.0, "to_value": 4.0},
        {"image_id": 2, "external_id": "b.png", "from": 3, "to": 4, "from_value": 3.25, "to_value": 3.5},
    ],
    "added": [{"image_id": 3, "external_id": "c.png", "final_tone": 5, "excluded_reason": ""}],
    "removed": [],
    "newly_excluded": [],
    "newly_included": [{"image_id": 4, "external_id": "d.png", "was": "no_labels"}],
}


@pytest.fixture(scope="module")
def _study_world(django_db_setup, django_db_blocker):
    """:func:`study_build` once per module, inside a transaction rolled back after the module's last test; each
    test runs in a savepoint inside it (the ``db`` fixture), so it sees the study as built whatever an earlier
    test wrote (the pattern of ``test_authorization_matrix``). Its users have names of their own: a test of the
    module outside the study (the ``lead`` and ``labelers`` fixtures) may run beside it."""
    from django.db import transaction

    from tests.factories import ProjectFactory, make_labelers, make_lead

    with django_db_blocker.unblock(), transaction.atomic():
        lead = make_lead("card-lead")
        project = ProjectFactory(created_by=lead)
        labelers = make_labelers(project, prefix="card-")
        yield study_build(project, labelers)
        transaction.set_rollback(True)


@pytest.fixture
def study(_study_world, db):
    """The module's study for one test: its rows as built, its objects copied."""
    return copy.deepcopy(_study_world)


def study_build(project, labelers):
    """Calibration 1: 8 images x 4 labelers (enough data); calibration 2: 2 images (too little data)."""
    # One photo per subject: with repeated subjects alpha's interval resamples subjects (4 here: too wide).
    images = add_images(project, 12, subjects=12)
    for i, subject in enumerate(Subject.objects.filter(project=project).order_by("external_id")):
        subject.attributes = {"gender": ["woman", "man", "woman", None][i % 4], "age": 30 + i % 4}
        subject.save()
    cal1 = open_calibration_1(project, size=10, cal1=8, labels_per_image=4)
    cal1_ids = set(cal1.phase_images.values_list("image_id", flat=True))
    order = {image_id: i for i, image_id in enumerate(sorted(cal1_ids))}
    for labeler, row in zip(labelers, TONES, strict=True):
        for a in cal1.assignments.filter(labeler=labeler):
            tones = row[order[a.image_id]]
            submit(cal1, labeler, a.image_id, tones=tones if isinstance(tones, tuple) else (tones,))
    phase_close(phase=cal1)
    cal2 = phase_open(phase=phase_get(project, Phase.Kind.CALIBRATION_2), labels_per_image=2)
    for labeler in labelers:
        for a in cal2.assignments.filter(labeler=labeler):
            submit(cal2, labeler, a.image_id, tones=(4,))
    parameters = baseline_services.baseline_parameters_effective(project)
    for i, image in enumerate(images):
        ImageBaseline.objects.update_or_create(
            image=image,
            parameters_hash=baseline_services.baseline_parameters_hash(parameters),
            code_version=baseline_services.BASELINE_CODE_VERSION,
            defaults={
                "parameters": parameters,
                "status": ImageBaseline.Status.OK,
                "ita_median": 60.0 - 9 * i + (i % 3),
                "albedo": 0.5 - 0.03 * i,
                "albedo_normalized": 0.6 - 0.03 * i,
                "ita_class": "intermediate",
                "flags": ["b_near_zero"] if i == 0 else [],
            },
        )
    return {"project": project, "cal1": cal1, "cal2": cal2, "images": images, "labelers": labelers}


def make_facts(project, *, card=CARD, previous_diff=DIFF):
    return card_facts(
        project=project,
        phases=list(project.phases.order_by("id")),
        final=FINAL,
        exclusions=EXCLUSIONS,
        rule=rule_clean({"aggregation": "mean"}),
        card_text=card,
        previous_diff=previous_diff,
        release_info=RELEASE_INFO,
    )


def proportions(obj, path="facts"):
    """Every proportion ({k, n, value, ci_low, ci_high, reason}) in the facts, with its path."""
    if isinstance(obj, dict):
        if {"k", "n", "value", "ci_low", "ci_high", "reason"} <= set(obj):
            yield path, obj
        for key, value in obj.items():
            yield from proportions(value, f"{path}.{key}")
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from proportions(value, f"{path}[{i}]")


def section(markdown: str, title: str) -> str:
    """The Markdown of one ``## title`` section (up to the next ``## ``)."""
    start = markdown.index(f"\n## {title}\n")
    end = markdown.find("\n## ", start + 1)
    return markdown[start : end if end >= 0 else None]


def by_kind(facts, kind):
    return next(p for p in facts["agreement"]["phases"] if p["kind"] == kind)


@pytest.mark.usefixtures("coefficients_from_few_images")
def test_every_section_is_present_and_the_numbers_are_the_databases(study):
    project, cal1 = study["project"], study["cal1"]
    facts = make_facts(project)
    files = card_render(facts)
    assert set(files) == {"data_card.md", "data_card.html", "data_card.json"} | {
        f"plots/{name}.png" for name in PLOT_NAMES
    }
    markdown = files["data_card.md"].decode()
    for title in SECTIONS:
        assert f"\n## {title}\n" in markdown, title
    # Every required lead-written field under its section (this card's six of the first form: the rest "not given").
    for field in CARD_FIELDS.values():
        assert (f"\n### {field['title']}\n" in markdown) == (field["required"] or field["title"] in CARD), field
    for name in PLOT_NAMES:
        assert f"](plots/{name}.png)" in markdown
        assert files[f"plots/{name}.png"].startswith(b"\x89PNG")
    # Composition: images, subjects and each attribute value counted from the rows.
    composition = facts["composition"]
    assert composition["n_images"] == Image.objects.filter(project=project).count() == 12
    assert composition["n_subjects"] == Subject.objects.filter(project=project).count() == 12
    gender = next(a for a in composition["attributes"] if a["key"] == "gender")
    counts = {row["value"]: row["share"]["k"] for row in gender["values"]}
    subjects = list(Subject.objects.filter(project=project))
    assert counts == {
        "woman": sum(s.attributes["gender"] == "woman" for s in subjects),
        "man": sum(s.attributes["gender"] == "man" for s in subjects),
        "(not recorded)": sum(s.attributes["gender"] is None for s in subjects),
    }
    images = {row["value"]: row["n_images"] for row in gender["values"]}
    assert images["woman"] == Image.objects.filter(project=project, subject__attributes__gender="woman").count()
    # Agreement: the consensus service's own numbers.
    service = phase_summary(cal1)["agreement"]
    facts_cal1 = by_kind(facts, "calibration_1")
    assert facts_cal1["alpha"]["ordinal"]["value"] == service["alpha"]["ordinal"]["value"]
    assert facts_cal1["alpha"]["ordinal"]["ci_low"] == service["alpha"]["ordinal"]["low"]
    assert facts_cal1["consensus"]["near"]["value"] == pytest.approx(service["near_consensus"]["value"], abs=1e-6)
    assert facts_cal1["n_images_2plus"] == 8 and facts_cal1["consensus"]["near"]["n"] == 8
    assert f"{service['alpha']['ordinal']['value']:.3f}" in section(markdown, "Agreement")
    # Read from the interval (issue 22), in the interval reading's words.
    ordinal = facts_cal1["alpha"]["ordinal"]
    assert ordinal["interpretation"] == read_alpha_interval(ordinal["ci_low"], ordinal["ci_high"])
    assert ALPHA_INTERVAL_READINGS[ordinal["interpretation"]] in section(markdown, "Agreement")
    # Process: labels, labelers, seeds straight from the rows.
    process = {p["kind"]: p for p in facts["process"]["phases"]}
    assert process["calibration_1"]["n_labels"] == Label.objects.filter(phase=cal1).count() == 32
    assert process["calibration_1"]["n_labelers"] == 4
    assert process["calibration_1"]["selection"] == {"method": "random", "seed": 42}
    assert sorted(s["labeler"] for s in process["calibration_1"]["shuffle_seeds"]) == ["L1", "L2", "L3", "L4"]
    assert facts["team"]["n_labelers"] == 4
    # Final labels as given, with the under-represented tones called out with their interval.
    final = facts["final_labels"]
    assert [t["share"]["k"] for t in final["tones"]] == [FINAL["tone_counts"].get(p, 0) for p in range(1, 11)]
    assert final["under_represented"] == [4, 6, 8, 9, 10]
    final_md = section(markdown, "Final labels")
    # One rule with the evaluation report (metrics.report.composition): a tone with no image is absent.
    assert [t["reading"] for t in final["tones"] if t["under_represented"]] == ["absent"] * 5
    assert re.search(r"Tone 9 \(.+\) is absent: 0 of 10 images have it", final_md)
    assert "is under-represented" not in final_md
    # Labels vs ITA: the baseline service's comparison; deeper labels, lower ITA.
    ita = facts["labels_vs_ita"]["ita"]
    assert ita["n"] == 10 and ita["rho"] < 0 and ita["ci_low"] <= ita["rho"] <= ita["ci_high"]
    assert "Spearman's rho = " in section(markdown, "Labels vs ITA")
    # The same without the flagged images, beside it (issue 22).
    assert "images without a quality flag only" in section(markdown, "Labels vs ITA")
    assert facts["labels_vs_ita"]["ita_unflagged"]["n"] == ita["n"] - facts["labels_vs_ita"]["n_flagged"]
    # The given exclusions and changes.
    assert facts["exclusions"]["n_excluded"] == 2
    assert "no_labels" in section(markdown, "Exclusions")
    assert facts["changes"]["transitions"] == [{"from": 3, "to": 4, "n": 2}]
    assert "From version 1 to version 2" in section(markdown, "Changes since the previous release")
    # The JSON is the facts.
    assert json.loads(files["data_card.json"]) == facts


def test_every_rate_has_a_wilson_interval(study):
    facts = make_facts(study["project"])
    found = list(proportions(facts))
    assert len(found) > 30
    too_wide = 0
    for path, p in found:
        if p["value"] is None:
            assert p["reason"], path
        else:
            assert p["ci_low"] <= p["value"] <= p["ci_high"], path
            assert p["value"] == pytest.approx(p["k"] / p["n"]), path
        # Issue 12: a share whose interval is wider than 50 points is not reported, its interval is.
        if p["ci_low"] is not None:
            wide = p["ci_high"] - p["ci_low"] > 0.5
            assert p["too_wide"] == wide == (p["value"] is None), path
            too_wide += wide
            if wide:
                assert p["reason"].startswith(f"too little data: n={p['n']}, 95% interval "), path
    assert too_wide > 3
    retest = test_retest_compute(study["project"])
    assert facts["test_retest"]["reason"] == retest["reason"]
    # In the Markdown, every share (one decimal, %) sits next to its interval, and an interval too wide
    # to read stands alone with the count.
    markdown = card_render(facts)["data_card.md"].decode()
    share = r"\d+\.\d% \(95% CI \d+\.\d–\d+\.\d%\)"
    unread = r"\d+ of \d+, too little data for a share \(95% CI \d+\.\d–\d+\.\d%, wider than 50 points\)"
    shares, unreadable = re.findall(share, markdown), re.findall(unread, markdown)
    assert len(shares) > 20 and len(unreadable) > 3 and len(shares) + len(unreadable) > 30
    stripped = re.sub(unread, "", re.sub(share, "", markdown))
    assert not re.findall(r"\d%", stripped.replace("95%", ""))


def test_a_phase_with_too_little_data_says_so_instead_of_a_number(study):
    facts = make_facts(study["project"])
    cal2 = by_kind(facts, "calibration_2")
    assert cal2["n_images_2plus"] == 2
    assert cal2["reason"].startswith("too little data")
    assert cal2["alpha"]["ordinal"]["value"] is None and cal2["alpha"]["ordinal"]["reason"]
    assert all(p["value"] is None and p["reason"] for p in cal2["consensus"].values())
    assert cal2["k_of_n"] == [] and cal2["unique_values"] == []
    markdown = card_render(facts)["data_card.md"].decode()
    agreement = section(markdown, "Agreement")
    cal2_md = agreement[agreement.index("### Calibration 2") :]
    cal2_md = cal2_md[: cal2_md.find("\n### ") if "\n### " in cal2_md else None]
    assert "Agreement is not reported for this phase: too little data: 2 images with 2+ labels (needs 5)" in cal2_md
    assert "Krippendorff's alpha (ordinal): not reported (too little data" in cal2_md
    assert "Near consensus | not reported (too little data" in cal2_md
    assert not re.search(r"\d+\.\d%", cal2_md)
    # Phases without labels, and no test-retest, say so too.
    assert by_kind(facts, "main")["reason"] == "no labels in this phase"
    assert "Not reported: no calibration-2 repeats yet." in section(markdown, "Test-retest")


def test_html_is_self_contained_and_escapes_every_text(study):
    facts = make_facts(study["project"])
    page = card_render(facts)["data_card.html"].decode()
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in page
    assert "http://" not in page and "https://" not in page
    assert "creativecommons.org/licenses" in page  # the text itself is kept, as text
    sources = re.findall(r'src="([^"]*)"', page)
    assert len(sources) == len(PLOT_NAMES) and all(s.startswith("data:image/png;base64,") for s in sources)
    assert "<link" not in page and "@import" not in page and "url(" not in page
    assert "Content-Security-Policy" in page
    markdown = card_render(facts)["data_card.md"].decode()
    assert "<script>" not in markdown and "&lt;script&gt;" in markdown


def test_rendering_is_byte_identical_and_the_facts_deterministic(study):
    project = study["project"]
    facts = make_facts(project)
    first = card_render(facts)
    plots_cache_clear()  # drawn again by matplotlib, not read back from the plot cache
    assert card_render(json.loads(json.dumps(facts))) == first
    cache.clear()  # recomputed from the database, not read back from the cache
    assert make_facts(project) == facts
    for name, data in first.items():
        if name.endswith(".png"):
            assert b"Software" not in data and b"Date" not in data and b"matplotlib" not in data


def test_first_release_and_every_column_described(study):
    facts = make_facts(study["project"], previous_diff=None)
    assert facts["changes"]["first_release"] is True
    markdown = card_render(facts)["data_card.md"].decode()
    assert "First release" in section(markdown, "Changes since the previous release")
    fields = section(markdown, "Fields")
    for table in ("images", "labels", "labelers"):
        columns = facts["fields"][table]
        assert columns and all(c["meaning"] for c in columns), [c["name"] for c in columns if not c["meaning"]]
        for column in columns:
            assert f"| {column['name']} | {column['meaning']} |" in fields
    names = [c["name"] for c in facts["fields"]["images"]]
    assert {"age", "gender", "final_tone", "near_consensus", "ita", "excluded_reason"} <= set(names)
    assert "labeler" in [c["name"] for c in facts["fields"]["labels"]]
    limitations = section(markdown, "Known limitations of the method")
    assert "ITA depends on exposure and is not a Fitzpatrick type" in limitations
    assert "Apparent albedo is not albedo" in limitations


@pytest.mark.parametrize("chunk_images", [1, 7, 10_000])
def test_phase_agreement_in_chunks_is_the_consensus_services(project, labelers, chunk_images):
    """Skips, pairs, invalid pairs, uncertain flags, missing labels, repeats (one labeler only repeats):
    the chunked numbers equal the consensus service's whole-phase summary, alpha to the last bit."""
    import numpy as np

    from labeling.services.consensus import phase_summary_compute
    from labeling.services.releases.agreement import phase_agreement

    images = add_images(project, 70)
    phase = phase_get(project, Phase.Kind.MAIN)
    rng = np.random.default_rng(7)
    rows = []
    for k, image in enumerate(images):
        truth = int(rng.integers(1, 11))
        for j, labeler in enumerate(labelers):
            draw = rng.random()
            if (k + j) % 9 == 0 or (j == 3 and k < 60):
                continue  # no label; labeler 4 only repeats
            low = min(10, max(1, truth + int(rng.integers(-1, 2))))
            high = None
            if draw < 0.05:
                low = None  # skipped
            elif draw < 0.12 and low < 10:
                high = low + 1  # an adjacent pair
            elif draw < 0.15 and low < 9:
                high = low + 2  # an invalid pair
            rows.append(
                Label(
                    phase=phase,
                    image=image,
                    labeler=labeler,
                    is_repeat=k >= 60,
                    tone_low=low,
                    tone_high=high,
                    value=None if low is None or (high and high - low > 1) else (low + (high or low)) / 2,
                    uncertain=bool(rng.random() < 0.1),
                    skip_reason="" if low is not None else "no skin visible",
                )
            )
    Label.objects.bulk_create(rows)
    service, _ = phase_summary_compute(phase, n_tones=10, allow_pairs=True)
    chunked = phase_agreement(phase, chunk_images=chunk_images)
    for key in ("n_labels", "n_repeats", "n_images", "n_images_2plus", "n_labelers", "flags"):
        assert chunked[key] == service[key], key
    for key, columns in (
        ("k_of_n", ("n_labels", "k_agreed", "n_items")),
        ("unique_values", ("n_unique_values", "n_items")),
    ):
        assert chunked[key] == [{c: row[c] for c in columns} for row in service[key]], key
    for key, value in chunked["agreement"].items():
        assert value == service["agreement"][key], key
    assert service["agreement"]["alpha"]["ordinal"]["value"] is not None
    assert service["flags"]["invalid"] and service["flags"]["uncertain"] and service["n_repeats"]


def test_no_share_on_the_card_is_a_bare_number(study):
    """Walk the facts: a share, rate, fraction or percentage is always a proportion with its interval."""
    facts = make_facts(study["project"])
    bare = []

    def walk(obj, path):
        if isinstance(obj, dict):
            for key, value in obj.items():
                words = ("share", "rate", "fraction", "percent", "consensus", "exact", "within_one")
                if any(w in key for w in words) and isinstance(value, int | float) and not isinstance(value, bool):
                    bare.append(f"{path}.{key}")
                walk(value, f"{path}.{key}")
        elif isinstance(obj, list):
            for i, value in enumerate(obj):
                walk(value, f"{path}[{i}]")

    walk(facts, "facts")
    assert bare == []
    for phase in facts["agreement"]["phases"]:
        for rate in phase.get("consensus", {}).values():
            assert {"k", "n", "ci_low", "ci_high", "too_wide"} <= set(rate)


def test_pooled_test_retest_keeps_the_services_clustered_interval():
    """The all-labelers test-retest row pools pairs clustered by image: the card keeps that interval."""
    import numpy as np

    from labeling.services.consensus.numbers import clustered_share
    from labeling.services.releases.card_facts import _from_rate
    from metrics.intervals import wilson_interval

    hits, pairs = np.array([4, 4, 4, 0, 4, 4, 0, 4, 4, 4] * 3), np.full(30, 4)  # 4 labelers, 30 images
    rate = clustered_share(hits, pairs)
    card = _from_rate(rate, 120)
    assert (card["k"], card["n"], card["n_images"]) == (96, 120, 30)
    assert card["value"] == 0.8 and (card["ci_low"], card["ci_high"]) == (rate["low"], rate["high"])
    naive = wilson_interval(96, 120)
    assert card["ci_high"] - card["ci_low"] > naive[1] - naive[0]  # wider than Wilson over the pairs
    few = _from_rate(clustered_share(hits[:3], pairs[:3]), 12)
    assert few["value"] is None and few["too_wide"] and few["ci_low"] is not None


@pytest.mark.usefixtures("coefficients_from_few_images")
def test_alpha_on_the_card_follows_the_coefficient_rule(study):
    """Issue 12: the card's alphas are the service's, with the BCa interval, and one whose interval is wider
    than MAX_COEFFICIENT_WIDTH says "too little data" with its interval (8 images: interval alpha does)."""
    from labeling.services.consensus import MAX_COEFFICIENT_WIDTH

    facts = make_facts(study["project"])
    service = phase_summary(study["cal1"])["agreement"]["alpha"]
    alpha = by_kind(facts, "calibration_1")["alpha"]
    assert "BCa" in alpha["interval_method"] and "BCa" in facts["intervals"]["alpha"]
    agreement = section(card_render(facts)["data_card.md"].decode(), "Agreement")
    for level, text in (("ordinal", "Krippendorff's alpha (ordinal): "), ("interval", "Interval alpha alongside: ")):
        s, card = service[level], alpha[level]
        assert (card["value"], card["ci_low"], card["ci_high"], card["reason"]) == (
            s["value"],
            s["low"],
            s["high"],
            s["reason"],
        )
        assert s["low"] is not None and (s["high"] - s["low"] > MAX_COEFFICIENT_WIDTH) == s["too_wide"]
        if s["value"] is None:
            assert f"{text}not reported (too little data: n=8 images with 2+ labels, 95% interval" in agreement
        else:
            assert f"{text}{s['value']:.3f} (95% CI {s['low']:.3f} to {s['high']:.3f}" in agreement
    assert service["interval"]["too_wide"]  # so the hidden branch above ran


def test_labelers_gender_is_the_labelers_own_and_the_team_summary_counts_only_shared_profiles(study):
    """A subject attribute named 'gender' does not describe the labelers table's gender (the labeler's own);
    the card's team line counts profiles only of labelers who agreed to share them."""
    project, labelers = study["project"], study["labelers"]
    memberships = list(Membership.objects.filter(project=project, id__in=[m.id for m in labelers]).order_by("id"))
    for i, membership in enumerate(memberships):
        membership.gender = f"gender-{i}"
        membership.share_profile = i < 2
        membership.save()
    facts = make_facts(project)
    labelers_gender = next(c for c in facts["fields"]["labelers"] if c["name"] == "gender")
    assert "Subject attribute" not in labelers_gender["meaning"]
    assert "labeler's own gender" in labelers_gender["meaning"]
    images_gender = next(c for c in facts["fields"]["images"] if c["name"] == "gender")
    assert images_gender["meaning"].startswith("Subject attribute")
    assert facts["team"]["n_labelers"] == 4 and facts["team"]["n_profiles_given"] == 2
    given = {row["value"] for row in facts["team"]["profile"]["gender"]}
    assert given == {"gender-0", "gender-1"}
    markdown = card_render(facts)["data_card.md"].decode()
    process = section(markdown, "Labeling process")
    assert "Profiles of the 2 who agreed to share them" in process
    assert "gender-2" not in markdown and "gender-3" not in markdown


def test_alpha_interval_resamples_subjects_when_photos_repeat_a_person(project, labelers):
    """Two photos per person: alpha's interval resamples subjects and the card says so (issue 22)."""
    from labeling.services.consensus.summary import image_subject_units

    images = add_images(project, 12, subjects=6)
    ids = np.array([image.id for image in images])
    units = image_subject_units(project.id, ids)
    assert units is not None and np.unique(units).size == 6
    assert image_subject_units(project.id, ids[:6]) is None  # each person once: the image bootstrap
    cal1 = open_calibration_1(project, size=12, cal1=12, labels_per_image=4)
    for labeler, row in zip(labelers, TONES, strict=True):
        for k, a in enumerate(cal1.assignments.filter(labeler=labeler).order_by("image_id")):
            tones = row[k % len(row)]
            submit(cal1, labeler, a.image_id, tones=tones if isinstance(tones, tuple) else (tones,))
    assert phase_summary(cal1)["agreement"]["alpha"]["resampled"] == "subjects"
