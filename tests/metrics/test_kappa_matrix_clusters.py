"""The labeler x labeler kappa intervals resample people, not photos, when photos repeat a person (issue 22)."""

import numpy as np

from metrics.agreement import bootstrap_cohen_kappa, kappa_matrix_intervals


def _panel(seed: int, n_people: int = 60, photos: int = 4):
    """Three labelers; each person's photos share the person's tone and each labeler's error on that person."""
    rng = np.random.default_rng(seed)
    tone = rng.integers(1, 11, size=n_people)
    labels = []
    for _ in range(3):
        error = rng.normal(0, 1.2, size=n_people)  # the same misreading on every photo of the person
        labels.append(np.repeat(np.clip(np.rint(tone + error), 1, 10), photos))
    data = np.array(labels, dtype=float)
    data[0, rng.choice(data.shape[1], size=20, replace=False)] = np.nan  # some photos not labelled by one
    return data, np.repeat(np.arange(n_people), photos)


def test_the_matrix_takes_each_pairs_clustered_interval():
    data, people = _panel(1)
    low, high = kappa_matrix_intervals(data, range(1, 11), n_resamples=300, clusters=people)
    pair = bootstrap_cohen_kappa(data[0], data[2], categories=range(1, 11), clusters=people, n_resamples=300)
    assert (low[0, 2], high[0, 2]) == (pair.low, pair.high) == (low[2, 0], high[2, 0])


def test_people_with_several_photos_widen_the_interval():
    """Four photos of a person are one person's worth of evidence: resampling photos narrows the interval
    about twofold (sqrt 4); resampling people does not."""
    ratios = []
    for seed in range(5):
        data, people = _panel(seed)
        by_photo = kappa_matrix_intervals(data, range(1, 11), n_resamples=300)
        by_person = kappa_matrix_intervals(data, range(1, 11), n_resamples=300, clusters=people)
        ratios.append((by_person[1][1, 2] - by_person[0][1, 2]) / (by_photo[1][1, 2] - by_photo[0][1, 2]))
    assert np.median(ratios) > 1.5
