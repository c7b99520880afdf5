"""The review's outlier rule exists twice, as SQL window functions (``services.review``, which lists the
candidates of a phase of any size) and in Python (``metrics.agreement.outlier_labels``, which the review
pages and the metrics use): Hypothesis holds them equal on generated labels (issue 24)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labeling.models import Label
from labeling.services.review import _candidate_ids_query
from metrics.agreement import outlier_labels
from tests.labeling.helpers import add_images, open_calibration_1

pytestmark = pytest.mark.django_db

VALUES = [k / 2 for k in range(2, 21)]  # tones 1-10 and the midpoints of pairs
image_labels = st.lists(st.one_of(st.sampled_from(VALUES), st.none()), min_size=0, max_size=4)


@pytest.fixture
def world(project, labelers):
    add_images(project, 6)
    phase = open_calibration_1(project, size=6, cal1=6, labels_per_image=4)
    return phase, list(phase.images.order_by("id").values_list("id", flat=True)), labelers


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(labels=st.lists(image_labels, min_size=1, max_size=6), distance=st.sampled_from([1.0, 1.5, 2.0, 3.0]))
def test_the_sql_and_python_outlier_rules_agree(world, labels, distance):
    phase, image_ids, labelers = world
    Label.objects.filter(phase=phase).delete()
    rows = []
    for image_id, values in zip(image_ids, labels, strict=False):
        for labeler, value in zip(labelers, values, strict=False):
            rows.append(Label(phase=phase, image_id=image_id, labeler=labeler, value=value, is_valid=True))
    Label.objects.bulk_create(rows)
    expected = {}
    for image_id, values in zip(image_ids, labels, strict=False):
        n = (
            int(
                outlier_labels(
                    np.array([np.nan if v is None else v for v in values], dtype=float), distance=distance
                ).sum()
            )
            if values
            else 0
        )
        if n:
            expected[image_id] = n
    assert dict(_candidate_ids_query(phase, distance)) == expected
