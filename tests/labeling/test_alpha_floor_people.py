"""Alpha's floor counts what its interval resamples: people, when several photos show one person (issue 22)."""

import numpy as np

from labeling.services.consensus.summary import alpha_block
from tests.metrics.test_kappa_matrix_clusters import _panel


def test_alphas_floor_counts_people_when_photos_repeat_them():
    """40 images of 10 people: above the floor in images, below it in people: counts only, saying people."""
    data, people = _panel(3, n_people=10, photos=4)
    domain = np.arange(1, 11, dtype=float)
    counts = np.stack([(data == v).sum(axis=0) for v in domain], axis=1)
    n_images = int((counts.sum(axis=1) >= 2).sum())
    assert n_images >= 30
    block = alpha_block(counts, domain, n_images, clusters=people)
    assert block["ordinal"]["value"] is None and "10 people" in block["ordinal"]["reason"]
    shown = alpha_block(counts, domain, n_images)  # each photo its own unit: 40 units, a coefficient
    assert shown["ordinal"]["value"] is not None or shown["ordinal"].get("too_wide")
