"""The review's candidates found in SQL are exactly those of the per-image rule
(``metrics.agreement.outlier_labels``, skips, uncertain and invalid labels), on seeded random labels."""

import numpy as np
import pytest

from labeling.models import Label, Membership, Phase
from labeling.services.review import review_candidate_ids, review_candidates, review_details
from labeling.services.review_decisions import review_report
from tests.factories import MembershipFactory, UserFactory
from tests.labeling.helpers import add_images


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sql_candidates_match_the_per_image_rule(project, seed):
    rng = np.random.default_rng(seed)
    images = add_images(project, 40)
    labelers = [
        MembershipFactory(project=project, user=UserFactory(username=f"rv{seed}-{k}"), pseudonym=f"R{k}")
        for k in range(5)
    ]
    phases = {p.kind: p for p in project.phases.all()}
    rows = []
    for phase_kind in (Phase.Kind.CALIBRATION_1, Phase.Kind.MAIN):
        for image in images:
            for m in labelers:
                if rng.random() < 0.3:
                    continue  # not every labeler labels every image
                low = int(rng.integers(1, 11))
                kind = rng.choice(["one", "pair", "skip", "invalid"], p=[0.75, 0.12, 0.08, 0.05])
                high, value, skip, valid = None, float(low), "", True
                if kind == "pair" and low < 10:
                    high, value = low + 1, low + 0.5
                elif kind == "skip":
                    low, value, skip = None, None, "no skin visible"
                elif kind == "invalid" and low < 8:
                    high, value, valid = low + 3, None, False
                rows.append(
                    Label(
                        phase=phases[phase_kind],
                        image=image,
                        labeler=m,
                        is_repeat=bool(rng.random() < 0.05),
                        tone_low=low,
                        tone_high=high,
                        value=value,
                        uncertain=bool(rng.random() < 0.1),
                        skip_reason=skip,
                        is_valid=valid,
                    )
                )
    Label.objects.bulk_create(rows)
    post = phases[Phase.Kind.POST_CALIBRATION]
    for phase in (post, phases[Phase.Kind.MAIN]):
        found = review_candidate_ids(phase)
        by_rule = review_details(phase, [i.id for i in images])
        expected = sorted(
            ((i, len(d["reasons"])) for i, d in by_rule.items() if d["reasons"]), key=lambda e: (-e[1], e[0])
        )
        assert found == expected
        assert any(n > 1 for _, n in found) and len(found) < len(images) * 1.0 + 1
    report = review_candidates(post, limit=7)
    assert report["n_candidates"] == len(review_candidate_ids(post))
    assert [c["image_id"] for c in report["candidates"]] == [i for i, _ in review_candidate_ids(post)[:7]]
    full = review_report(post, limit=5)
    assert full["n_candidates"] == report["n_candidates"] and len(full["candidates"]) == 5
    assert full["progress"]["open"] == full["n_candidates"]
    assert Membership.objects.filter(project=project).count() >= 5
