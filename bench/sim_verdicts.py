"""Seeded simulations of the report's verdicts: planted effects and nulls (issue 11's figures).

Run ``python bench/sim_verdicts.py [runs]`` (default 200 per case). Prints, with 95% Wilson intervals:

* skin tone: a +1.5 error step at MST 9-10 (or 1-2) -> how often the verdict is significant and not
  negligible, names that band as worst and the right end; no effect -> how often it says significant;
* gender with 3 / 4 / 6 groups and no difference -> how often "significant" (Holm over the pairs);
* intersectional with no effect (errors at or above the threshold about half the time) -> how often
  the permutation test says significant (seed 000's ensemble alone flags customers every time).
"""

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metrics.intervals import wilson_interval  # noqa: E402
from metrics.unfairness import (  # noqa: E402
    band_unfairness,
    categorical_unfairness,
    continuous_unfairness,
    continuous_verdict,
    intersectional_unfairness,
)


def rate(k: int, n: int) -> str:
    low, high = wilson_interval(k, n)
    return f"{k}/{n} = {k / n:.1%} (95% CI {low:.1%} to {high:.1%})"


def tone_case(rng, n, step_at):
    labels = np.clip(rng.integers(1, 11, n)[:, None] + rng.integers(-1, 2, (n, 4)), 1, 10)
    tone = labels.mean(axis=1)
    error = np.abs(rng.normal(1.0, 0.4, n))
    if step_at == "deep":
        error = error + 1.5 * (np.floor(tone + 0.5) >= 9)
    elif step_at == "light":
        error = error + 1.5 * (np.floor(tone + 0.5) <= 2)
    return error, tone


def main(runs: int = 200) -> None:
    rng = np.random.default_rng(2026)
    start = time.perf_counter()
    for step_at, band, end in (("deep", "9-10", "high"), ("light", "1-2", "low"), (None, None, None)):
        found = right = 0
        for _ in range(runs):
            error, tone = tone_case(rng, 1000, step_at)
            line = continuous_unfairness(error, tone)
            bands = band_unfairness(error, tone, threshold=2.0, n_permutations=199, seed=int(rng.integers(1e9)))
            verdict = continuous_verdict(line, bands)
            flagged = verdict.significant
            found += flagged
            right += (
                flagged and verdict.level != "negligible" and verdict.worst_band == band and verdict.worse_end == end
            )
        if step_at:
            print(
                f"skin tone, +1.5 step at MST {band}: significant {rate(found, runs)}; "
                f"not negligible with the right band and end {rate(right, runs)}"
            )
        else:
            print(f"skin tone, no effect: significant {rate(found, runs)} (nominal 5%)")
    for k in (3, 4, 6):
        fired = 0
        for _ in range(runs):
            groups = rng.integers(0, k, 600).astype(str)
            fired += categorical_unfairness(np.abs(rng.normal(1.0, 0.4, 600)), groups).significant
        print(
            f"gender, {k} groups, no difference: significant {rate(fired, runs)} (Holm over {k * (k - 1) // 2} pairs)"
        )
    inter_runs = max(runs // 10, 10)
    fired = flagged_any = 0
    for i in range(inter_runs):
        n = 1000
        features = np.column_stack([rng.lognormal(-1.2, 0.25, n), rng.integers(1, 11, n) + rng.normal(0, 0.2, n)])
        error = rng.normal(1.7, 0.6, n)  # at or above the 1.7 threshold about half the time
        result = intersectional_unfairness(
            error, features, error_threshold=1.7, n_permutations=99, seed=i, progress=False
        )
        fired += bool(result.significant)
        flagged_any += result.n_customers > 0
    print(
        f"intersectional, no effect: ensemble alone flags customers in {rate(flagged_any, inter_runs)}; "
        f"permutation test significant in {rate(fired, inter_runs)} (nominal 5%)"
    )
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
