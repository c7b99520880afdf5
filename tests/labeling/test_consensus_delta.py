"""The dashboard's alpha names its interval method: the delta method's from DELTA_MIN_UNITS units, else BCa."""

from __future__ import annotations

import numpy as np

from labeling.services.consensus import numbers
from labeling.services.consensus.summary import alpha_block
from metrics import agreement


def test_alpha_block_says_which_method_made_its_interval() -> None:
    rng = np.random.default_rng(0)
    n = numbers.DELTA_MIN_UNITS
    truth = rng.integers(1, 11, n)
    data = np.clip(truth + rng.integers(-1, 2, (4, n)), 1, 10).astype(float)
    domain, counts = agreement.value_counts(data)
    large = alpha_block(counts, domain, n)
    assert large["method"] == "delta" and large["n_resamples"] == 0
    assert large["ordinal"]["interval"] == numbers.DELTA_INTERVAL_METHOD
    assert large["ordinal"]["low"] < large["ordinal"]["value"] < large["ordinal"]["high"]
    assert 0 <= large["ordinal"]["q"]["reliable"] <= 1
    small = alpha_block(counts[:300], domain, 300)
    assert small["method"] == "bootstrap" and small["n_resamples"] == numbers.N_RESAMPLES
    assert small["ordinal"]["interval"] == numbers.INTERVAL_METHOD
