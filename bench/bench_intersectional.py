"""Benchmark: intersectional DBSCAN ensemble (151 eps) vs a loop over scikit-learn's DBSCAN.

Run ``python bench/bench_intersectional.py``. Data: body shape (lognormal) and skin
tone (mean of 4 labels on a 1-10 scale, so many ties), standardised, error rising with
tone. For 10,000 customers the full scikit-learn loop is timed; for 50,000 it is timed
on every 10th eps and extrapolated linearly to 151 (printed as such). Flagged customers
are compared exactly on the eps values the loop ran.

Then the permutation null (issue 11): the ensemble alone against the ensemble with 199
shuffles of the errors, in the same run, on data where errors >= the cluster threshold about
half the time and do not depend on the attributes (the null's worst case: few clusters can
be ruled out). Goal: the shuffles add
at most 2x the ensemble's time.
"""

import sys
import time
from pathlib import Path

import numpy as np
from sklearn.cluster import DBSCAN

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metrics.unfairness import (
    DEFAULT_EPS_EXPONENTS,
    intersectional_unfairness,
    standardise,
)


def make_data(n, seed=0):
    rng = np.random.default_rng(seed)
    body = rng.lognormal(0.0, 0.25, n)
    tone = np.clip(np.round(rng.normal(4, 2, (n, 1)) + rng.integers(-1, 2, (n, 4))), 1, 10)
    tone = tone.mean(axis=1)
    errors = 1.0 + 0.1 * tone + rng.normal(0, 0.3, n)
    return errors, np.column_stack([body, tone])


def sklearn_loop(errors, features, exponents):
    points = standardise(features)
    flagged = np.zeros(errors.size, dtype=bool)
    for eps in np.power(10.0, exponents):
        labels = DBSCAN(eps=eps, min_samples=10).fit(points).labels_
        size = np.bincount(labels[labels >= 0])
        bad = np.bincount(labels[(labels >= 0) & (errors >= 1.7)], minlength=size.size)
        under = np.flatnonzero((size >= 10) & (bad / np.maximum(size, 1) >= 0.7))
        flagged |= np.isin(labels, under)
    return np.flatnonzero(flagged)


def run(n, step):
    errors, features = make_data(n)
    start = time.perf_counter()
    ours = intersectional_unfairness(errors, features)
    ours_time = time.perf_counter() - start
    exponents = DEFAULT_EPS_EXPONENTS[::step]
    start = time.perf_counter()
    reference = sklearn_loop(errors, features, exponents)
    ref_time = time.perf_counter() - start
    full = ref_time * DEFAULT_EPS_EXPONENTS.size / exponents.size
    subset = intersectional_unfairness(errors, features, eps_exponents=exponents)
    identical = np.array_equal(subset.members, reference)
    kind = "measured" if step == 1 else f"extrapolated from {exponents.size} of 151 eps"
    print(f"n = {n:,}")
    print(f"  ours, 151 eps:            {ours_time:8.2f} s  ({ours.n_customers} flagged)")
    print(f"  sklearn loop, 151 eps:    {full:8.2f} s  ({kind})")
    print(f"  ratio:                    {full / ours_time:8.1f}x  (goal >= 30x)")
    print(f"  flagged customers identical on the eps compared: {identical} ({reference.size} flagged)")


def run_null(n, permutations=199):
    errors, features = make_data(n)
    # Errors independent of the attributes: no cluster can be ruled out by its own data.
    errors = np.random.default_rng(1).permutation(errors)
    threshold = float(np.median(errors))
    start = time.perf_counter()
    alone = intersectional_unfairness(errors, features, error_threshold=threshold)
    alone_time = time.perf_counter() - start
    start = time.perf_counter()
    tested = intersectional_unfairness(errors, features, error_threshold=threshold, n_permutations=permutations, seed=0)
    tested_time = time.perf_counter() - start
    added = tested_time - alone_time
    print(f"n = {n:,}, permutation null ({permutations} shuffles; no unfairness, half the errors >= threshold)")
    print(f"  ensemble alone:           {alone_time:8.2f} s  ({alone.n_customers} flagged)")
    print(f"  ensemble + null:          {tested_time:8.2f} s  (p = {tested.p_value:.3g})")
    print(f"  added by the null:        {added / alone_time:8.2f}x the ensemble  (goal <= 2x)")


def run_small(sizes=(300, 1000, 1500), repeat=5):
    """Up to ``_dbscan._DENSE_MAX`` points: the spanning-tree path against the grid path (the path of larger
    sets), the same ensemble, in the same run (median of ``repeat``); the flagged customers must be equal."""
    import statistics

    from metrics import _dbscan

    dense_max = _dbscan._DENSE_MAX
    print(f"small sets (spanning tree up to {dense_max:,} points; grid path as on larger sets; median of {repeat})")
    for n in sizes:
        errors, features = make_data(n)
        times = {}
        results = {}
        for name, limit in (("grid", 0), ("tree", dense_max)):
            _dbscan._DENSE_MAX = limit
            runs = []
            for _ in range(repeat):
                start = time.perf_counter()
                results[name] = intersectional_unfairness(errors, features)
                runs.append(time.perf_counter() - start)
            times[name] = statistics.median(runs)
        _dbscan._DENSE_MAX = dense_max
        same = np.array_equal(results["grid"].members, results["tree"].members)
        print(
            f"  n = {n:5,}: spanning tree {times['tree'] * 1000:7.1f} ms, grid {times['grid'] * 1000:7.1f} ms: "
            f"{times['grid'] / times['tree']:.1f}x faster; flagged customers identical: {same}"
        )


if __name__ == "__main__":
    # Warm up imports so that they are not timed.
    intersectional_unfairness(*make_data(200), eps_exponents=[-1.0])
    DBSCAN(eps=0.1).fit(np.zeros((20, 2)))
    run_small()
    run(10_000, 1)
    run(50_000, 10)
    run_null(10_000)
    run_null(50_000)
