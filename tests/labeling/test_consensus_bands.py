"""Agreement per tone band on the consensus dashboard and in its API (issue 22), and the intervals that
resample people when photos repeat a person: alpha without a labeler, test-retest kappas."""

import copy
import json

import numpy as np
import pytest

from labeling.models import Image, Label, Phase, Subject
from labeling.services.consensus import COEFFICIENT_MIN_UNITS, test_retest_compute
from labeling.services.phases import phase_get
from tests.labeling.helpers import add_images
from tests.labeling.test_consensus import _api, _client, build_study

N_IMAGES = 160


@pytest.fixture
def study(project, labelers):
    """test_consensus's study (60 main images, calibration 1 and 2 with repeats) in this test's project."""
    return build_study(project, labelers)


@pytest.fixture(scope="module", params=[None, 2], ids=["one-photo-each", "two-photos-each"])
def _banded_world(request, django_db_setup, django_db_blocker):
    """160 main-phase images x 4 labelers, 16 of each MST tone; L3 labels one tone deeper on MST 8 and 9
    (the others label the tone or one off). With ``2``: two photos of each person (the same tone).

    Built once per module and design, inside a transaction rolled back after the module's last test; each test
    runs in a savepoint inside it (the ``db`` fixture), so it sees the world as built whatever an earlier test
    wrote (the pattern of ``test_authorization_matrix`` and ``test_archived_read_only``)."""
    from django.db import transaction

    from tests.factories import ProjectFactory, make_labelers, make_lead

    per_person = request.param
    with django_db_blocker.unblock(), transaction.atomic():
        # Names of their own: a test of this module outside the world (the ``lead`` fixture) may run beside it.
        lead = make_lead("bands-lead")
        project = ProjectFactory(created_by=lead)
        labelers = make_labelers(project, prefix="bands-")
        rng = np.random.default_rng(5)
        images = add_images(project, N_IMAGES, subjects=N_IMAGES // per_person if per_person else None)
        main = phase_get(project, Phase.Kind.MAIN)
        rows = []
        for k, image in enumerate(images):
            truth = (k // (per_person or 1)) % 10 + 1 if per_person else k % 10 + 1
            for position, labeler in enumerate(labelers):
                tone = truth + int(rng.choice([-1, 0, 0, 0, 0, 1]))
                if position == 2 and truth >= 8:
                    tone = truth + 1
                tone = int(np.clip(tone, 1, 10))
                rows.append(Label(phase=main, image=image, labeler=labeler, tone_low=tone, value=float(tone)))
        Label.objects.bulk_create(rows)
        yield {"main": main, "per_person": per_person, "project": project, "lead": lead}
        transaction.set_rollback(True)


@pytest.fixture
def banded(_banded_world, db):
    """The module's world for one test: its rows as built, its objects copied."""
    return copy.deepcopy(_banded_world)


def test_the_api_gives_agreement_per_tone_band(client, banded):
    lead, project = banded["lead"], banded["project"]
    body = _api(client, lead, project, banded["main"])
    bands = body["selected"]["tone_bands"]
    assert [b["name"] for b in bands["bands"]] == ["1-2", "3-4", "5-6", "7-8", "9-10"]
    assert bands["labelers"] == ["L1", "L2", "L3", "L4"]
    assert sum(b["n_images"] for b in bands["bands"]) == bands["n_images"] == N_IMAGES
    assert "range restriction" in bands["note"]
    people = banded["per_person"] is not None
    assert bands["resampled"] == ("subjects" if people else "images")
    for band in bands["bands"]:
        assert band["n_labels"] == 4 * band["n_images"]
        assert band["n_units"] == (len({*band_subjects(project, band)}) if people else band["n_images"])
        alpha = band["alpha"]
        if band["n_units"] < COEFFICIENT_MIN_UNITS:
            # Counts only: no coefficient, no interval.
            assert alpha["value"] is None and alpha["low"] is None and alpha["reason"].startswith("counts only")
        else:
            assert alpha["value"] is not None and alpha["low"] <= alpha["value"] <= alpha["high"]
        near = band["near_consensus"]
        assert near["k"] <= near["n"] == band["n_images"]
        assert near["low"] <= near["k"] / near["n"] <= near["high"]
        for row in band["bias"]:
            bias = row["mean_diff"]
            assert bias["low"] <= bias["value"] <= bias["high"]
    by_name = {b["name"]: b for b in bands["bands"]}
    # The planted lean is found in the deep band, and not in the light and middle ones.
    assert by_name["9-10"]["bias"][2]["labeler"] == "L3"
    assert by_name["9-10"]["bias"][2]["mean_diff"]["reading"] == "deeper"
    for name in ("1-2", "3-4", "5-6"):
        assert by_name[name]["bias"][2]["mean_diff"]["reading"] == "no bias shown", name
    if not people:  # 32 images a band: alpha is shown in some
        assert any(b["alpha"]["value"] is not None for b in bands["bands"])
    else:  # 16 people a band: never
        assert all(b["alpha"]["value"] is None for b in bands["bands"])


def band_subjects(project, band):
    """Subjects of the band's images, recomputed from the labels (the consensus median, rounded half up)."""
    values = {}
    for image_id, value in Label.objects.filter(phase__project=project).values_list("image_id", "value"):
        values.setdefault(image_id, []).append(value)
    subject_of = dict(Image.objects.filter(project=project).values_list("id", "subject_id"))
    for image_id, labels in values.items():
        consensus = int(np.floor(np.median(labels) + 0.5))
        if band["low"] <= consensus <= band["high"]:
            yield subject_of[image_id]


def test_the_dashboard_page_shows_agreement_per_tone_band(client, banded):
    lead, project = banded["lead"], banded["project"]
    page = _client(client, lead).get(f"/projects/{project.pk}/consensus/?phase={banded['main'].pk}")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="tone-bands"' in html and "Agreement per tone band" in html
    assert "range restriction" in html
    for name in ("Bias L1", "Bias L4", "9-10"):
        assert name in html
    assert '<strong title="deeper: the 95% interval excludes 0">' in html


def test_alpha_without_a_labeler_resamples_people_when_photos_repeat_them(client, banded):
    lead, project = banded["lead"], banded["project"]
    body = _api(client, lead, project, banded["main"])
    for row in body["selected"]["per_labeler"]:
        without = row["alpha_without"]
        if banded["per_person"]:
            assert without["resampled"] == "subjects" and without["unit"].startswith("subjects")
            assert without["n"] == N_IMAGES // 2  # people, not photos
        else:
            assert without["resampled"] == "images" and without["n"] == N_IMAGES
        assert without["value"] is not None and without["low"] <= without["value"] <= without["high"]


def test_each_labelers_overall_bias_has_its_interval_by_the_bands_rule(client, banded):
    """The labelers table and the at-a-glance line show one bias: against the others' mean, with a t
    interval clustered by person when photos repeat (metrics.agreement.labeler_bias, equal to one band
    over the whole scale), read from the interval. L3 labels MST 8-9 one tone deeper: its overall bias
    is positive and its interval excludes 0."""
    lead, project = banded["lead"], banded["project"]
    body = _api(client, lead, project, banded["main"])
    rows = {row["labeler"]: row["bias"] for row in body["selected"]["per_labeler"]}
    l3 = rows["L3"]["mean_diff"]
    assert l3["value"] > 0 and l3["low"] > 0 and l3["reading"] == "deeper"
    assert l3["interval"] == "t, cluster-robust" and l3["unit"] == "images shared with other labelers"
    assert rows["L3"]["n_units"] == (N_IMAGES // 2 if banded["per_person"] else N_IMAGES)
    for bias in rows.values():
        stat = bias["mean_diff"]
        assert stat["low"] <= stat["value"] <= stat["high"]
    # Exchangeable rule: on images every labeler labelled, the panel's biases sum to zero.
    assert sum(b["mean_diff"]["value"] for b in rows.values()) == pytest.approx(0, abs=1e-3)
    html = _client(client, lead).get(f"/projects/{project.pk}/consensus/?phase={banded['main'].pk}").content.decode()
    assert "Labeler bias beyond chance: <strong>L3</strong>" in html
    assert "Bias vs others&#x27; mean [95% CI]" in html or "Bias vs others' mean [95% CI]" in html
    assert "median of the other" not in html


def test_the_change_of_a_labelers_bias_between_phases_has_its_interval(client, lead, project, study):
    """Baselines and drift: each phase after a labeler's first carries the change of their bias (against the
    others' mean on the same images) with a Welch interval, and the page shows it; no 'vs panel' point."""
    main = Phase.objects.get(project=project, kind=Phase.Kind.MAIN)
    body = _api(client, lead, project, main)
    changes = [b["bias_change"] for row in body["labelers"] for b in row["baseline"][1:]]
    assert changes and all(c is not None for c in changes)
    shown = [c for c in changes if c["low"] is not None]
    # Calibration 2's 3 new images give no bias; main's change is taken since calibration 1.
    assert len(shown) == 4 and {c["since"] for c in shown} == {"Calibration 1"}
    for change in shown:
        assert change["low"] <= change["value"] <= change["high"]
        assert change["reading"] in ("deeper", "lighter", "no change shown")
    html = _client(client, lead).get(f"/projects/{project.pk}/consensus/?phase={main.pk}").content.decode()
    assert "bias change" in html and "vs panel" not in html
    # Bold only where the interval excludes 0.
    bold = html.count('<strong title="deeper: the 95% interval excludes 0">') + html.count(
        '<strong title="lighter: the 95% interval excludes 0">'
    )
    assert bold == sum(c["reading"] in ("deeper", "lighter") for c in changes) + sum(
        r["bias"]["mean_diff"]["reading"] in ("deeper", "lighter") for r in body["selected"]["per_labeler"]
    ) + sum(
        r["mean_shift"]["reading"] in ("deeper", "lighter")
        for r in [*body["test_retest"]["per_labeler"], body["test_retest"]["pooled"]]
    ) + sum(
        c["mean_diff"]["reading"] in ("deeper", "lighter")
        for b in body["selected"]["tone_bands"]["bands"]
        for c in b["bias"]
    )


def test_test_retest_kappas_resample_people_when_repeated_images_share_them(project, study):
    before = test_retest_compute(project)
    assert before["pooled"]["weighted_kappa"]["unit"] == "images"
    assert before["pooled"]["weighted_kappa"]["n"] == 10
    assert before["per_labeler"][0]["weighted_kappa"]["resampled"] == "images"
    # The 10 repeated images show 5 people, two photos each.
    repeated = sorted(set(Label.objects.filter(is_repeat=True).values_list("image_id", flat=True)))
    assert len(repeated) == 10
    for k, image_id in enumerate(repeated):
        subject, _ = Subject.objects.get_or_create(project=project, external_id=f"P{k // 2}")
        Image.objects.filter(pk=image_id).update(subject=subject)
    after = test_retest_compute(project)
    pooled = after["pooled"]
    assert pooled["weighted_kappa"]["unit"] == "subjects" and pooled["weighted_kappa"]["n"] == 5
    assert pooled["weighted_kappa"]["value"] is None  # 5 people: counts only
    assert pooled["exact"]["unit"] == "subjects" and pooled["exact"]["n"] == 5
    for row in after["per_labeler"]:
        assert row["weighted_kappa"]["resampled"] == "subjects" and row["weighted_kappa"]["n"] == 5
    # The pooled share is the same number, its interval wider (people, not photos).
    assert pooled["exact"]["k"] == before["pooled"]["exact"]["k"]
    # The mean shift carries its t interval, clustered the same way: the same mean, 5 people as units.
    for block in (before["pooled"], pooled):
        shift = block["mean_shift"]
        assert shift["interval"] == "t, cluster-robust" and shift["reason"] is None
        assert shift["low"] <= shift["value"] <= shift["high"]
    assert pooled["mean_shift"]["value"] == before["pooled"]["mean_shift"]["value"]


def test_the_data_card_has_agreement_per_tone_band(banded):
    from labeling.services.releases.card import card_render
    from tests.labeling.test_release_card import make_facts, proportions, section

    project = banded["project"]

    facts = make_facts(project)
    by_band = facts["agreement_by_band"]
    assert [p["name"] for p in by_band["phases"]] == ["Main"]
    main = by_band["phases"][0]
    assert main["labelers"] == ["L1", "L2", "L3", "L4"]
    assert sum(b["n_images"] for b in main["bands"]) == main["n_images"] == N_IMAGES
    deep = {b["name"]: b for b in main["bands"]}["9-10"]
    assert deep["bias"][2]["labeler"] == "L3" and deep["bias"][2]["reading"] == "deeper"
    for path, p in proportions(by_band):
        if p["value"] is not None:
            assert p["ci_low"] <= p["value"] <= p["ci_high"], path
            assert p["value"] == pytest.approx(p["k"] / p["n"]), path
    for band in main["bands"]:
        alpha = band["alpha"]
        assert (alpha["value"] is None) == (band["n_units"] < COEFFICIENT_MIN_UNITS)
        assert alpha["value"] is None or alpha["ci_low"] <= alpha["value"] <= alpha["ci_high"]
    files = card_render(facts)
    markdown = files["data_card.md"].decode()
    text = section(markdown, "Agreement per tone band")
    assert "range restriction" in text and "### Main" in text
    assert "| 9-10 |" in text and ", deeper" in text
    assert ("counts only (n=" in text) == any(b["alpha"]["value"] is None for b in main["bands"])
    # After the agreement, before the test-retest.
    assert markdown.index("\n## Agreement\n") < markdown.index("\n## Agreement per tone band\n")
    assert markdown.index("\n## Agreement per tone band\n") < markdown.index("\n## Test-retest\n")
    assert "Agreement per tone band</h2>" in files["data_card.html"].decode()
    assert json.loads(files["data_card.json"])["agreement_by_band"] == json.loads(json.dumps(by_band))
