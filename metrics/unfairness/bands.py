"""Mean error per band of an ordinal or continuous attribute (e.g. skin tone), and the largest band gap.

Seed 000 scores skin tone and body shape with a straight line: the fitted error difference
between the 5th and 95th percentile. A step confined to one end of the scale (say +1.5 mm
for MST 9-10 only) is spread by the line over the whole range and can come out as a small
score. The bands are the complement: the attribute is cut into a few bands, each band's
mean error gets a confidence interval, and the largest gap between two band means gets a
simultaneous interval, a p-value, a severity and a direction (which end is worse).

The gap test is the max-|t| test over all pairs of bands (Games-Howell's statistic: Welch
standard errors, no equal-variance assumption), calibrated by permuting the errors across
samples (exact under "the error does not depend on the band", whatever the error's
distribution; a t or Monte Carlo calibration rejected 7% of null data sets with skewed
errors and bands of 18 samples). The permutation distribution of the largest studentised
pairwise difference gives both the p-value and the critical value ``c`` of the
simultaneous interval. The interval of the largest true gap
``max_gh (mu_g - mu_h)`` is ``[max(0, max_gh (d_gh - c se_gh)), max_gh (d_gh + c se_gh)]``:
under no difference it covers 0 exactly when the test does not reject, so it covers 0 at
the nominal rate (``tests/metrics/test_verdict.py`` checks this by simulation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._checks import _as_errors, _check_alpha
from .severity import Severity, severity

__all__ = ["AttributeBand", "BandUnfairness", "attribute_bands", "band_unfairness"]

#: Bands with fewer samples than this are flagged as small (their interval is wide).
SMALL_BAND = 30
#: Permutations calibrating the max-|t| statistic (p-value resolution 1/1000).
DEFAULT_PERMUTATIONS = 999
# Band labels of this many permuted samples are counted at once (memory: 8 bytes each).
_PERMUTATION_BLOCK = 2_000_000


@dataclass(frozen=True)
class AttributeBand:
    """One band of the attribute and its mean error.

    Attributes
    ----------
    label : str
        E.g. ``"9-10"`` on an ordinal scale or ``"0.281-0.312"`` for quantile bands.
    low, high : float
        Attribute values bounding the band (inclusive).
    n : int
        Samples in the band.
    mean : float or None
        Mean error (None when empty).
    ci_low, ci_high : float or None
        t-interval of the mean at ``1 - alpha`` (None with fewer than 2 samples).
    small : bool
        ``n < 30``: the interval is wide, read the mean with care.
    """

    label: str
    low: float
    high: float
    n: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    small: bool


@dataclass(frozen=True)
class BandUnfairness:
    """Mean error per band and the largest gap between two bands.

    Attributes
    ----------
    bands : tuple of AttributeBand
        In increasing order of the attribute.
    kind : str
        ``"ordinal"`` (bands of whole scale steps) or ``"quantile"`` (equal-count bands).
    gap : float
        Largest band mean minus smallest band mean (bands with at least 2 samples).
    gap_ci : tuple of float
        Simultaneous interval of the largest true gap (see the module docstring).
    gap_p_value : float
        Permutation p-value of the max-|t| test of "all band means are equal".
    gap_significant : bool
        ``gap_p_value < alpha``.
    worst_band, best_band : str
        Labels of the bands with the highest and the lowest mean error.
    worse_end : str
        ``"high"`` when the last band's mean error exceeds the first band's, else ``"low"``:
        the end of the attribute scale (e.g. deep tones on a light-to-deep scale) that
        fares worse.
    gap_severity : Severity
        The gap judged against the threshold (:func:`severity`).
    above_threshold : tuple of str
        Bands whose mean error reaches the threshold on its own.
    threshold : float
        Error threshold used.
    alpha : float
        Significance level (also the interval level ``1 - alpha``).
    n_permutations : int
        Permutations behind the p-value and the gap interval.
    method : str
        How the gap was tested, in words.
    """

    bands: tuple[AttributeBand, ...]
    kind: str
    gap: float
    gap_ci: tuple[float, float]
    gap_p_value: float
    gap_significant: bool
    worst_band: str
    best_band: str
    worse_end: str
    gap_severity: Severity
    above_threshold: tuple[str, ...]
    threshold: float
    alpha: float
    n_permutations: int
    method: str


def _is_ordinal_scale(x: np.ndarray) -> bool:
    # Means of 1, 2, 3, 4 or 6 labels on an integer scale are multiples of 1/12.
    span = float(x.max() - x.min())
    return 1 <= span <= 20 and bool(np.all(np.abs(x * 12 - np.round(x * 12)) < 1e-6))


def attribute_bands(attribute: Sequence[float] | np.ndarray, n_bands: int = 5) -> tuple[np.ndarray, list[tuple]]:
    """Cut an attribute into at most ``n_bands`` bands.

    An ordinal scale (values on a grid of 1/12 spanning 1 to 20 steps, e.g. MST 1-10 labels
    or means of a few labels) is rounded half up to whole steps and cut into bands of
    ``ceil(levels / n_bands)`` consecutive steps: MST 1-10 gives 1-2, 3-4, 5-6, 7-8, 9-10.
    Any other attribute is cut at its quantiles into bands of about equal counts.

    Parameters
    ----------
    attribute : array-like of float, shape (n,)
        Finite values.
    n_bands : int, default 5
        Largest number of bands.

    Returns
    -------
    tuple
        ``(band index per sample, [(label, low, high, kind), ...])``.

    Examples
    --------
    >>> index, bands = attribute_bands([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 9.75])
    >>> [b[0] for b in bands], index[-1].item()
    (['1-2', '3-4', '5-6', '7-8', '9-10'], 4)
    """
    x = np.asarray(attribute, dtype=np.float64)
    if n_bands < 2:
        raise ValueError(f"n_bands must be at least 2, got {n_bands}")
    if x.size == 0:
        raise ValueError("no samples")
    if _is_ordinal_scale(x):
        steps = np.floor(x + 0.5)
        low = float(steps.min())
        levels = int(steps.max() - low) + 1
        width = int(np.ceil(levels / n_bands))
        index = ((steps - low) // width).astype(np.intp)
        bands = []
        for k in range(int(index.max()) + 1):
            a, b = low + k * width, min(low + (k + 1) * width - 1, low + levels - 1)
            label = f"{a:g}" if a == b else f"{a:g}-{b:g}"
            bands.append((label, a, b, "ordinal"))
        return index, bands
    edges = np.unique(np.quantile(x, np.linspace(0, 1, n_bands + 1)[1:-1]))
    index = np.searchsorted(edges, x, side="right").astype(np.intp)
    bands = []
    for k in range(edges.size + 1):
        members = x[index == k]
        if members.size == 0:
            continue
        a, b = float(members.min()), float(members.max())
        bands.append((f"{a:.4g}-{b:.4g}", a, b, "quantile"))
    # Renumber so that empty quantile bands (ties) leave no gap.
    _, index = np.unique(index, return_inverse=True)
    return index.astype(np.intp), bands


def band_unfairness(
    errors: Sequence[float] | np.ndarray,
    attribute: Sequence[float] | np.ndarray,
    *,
    threshold: float,
    alpha: float = 0.05,
    n_bands: int = 5,
    n_permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
) -> BandUnfairness:
    """Mean error per attribute band with intervals, and the largest band gap tested.

    Parameters
    ----------
    errors : array-like of float, shape (n,)
        Per-sample error, larger is worse.
    attribute : array-like of float, shape (n,)
        Attribute (e.g. skin tone on MST 1-10); see :func:`attribute_bands`.
    threshold : float
        Error threshold (seed 000: 2 mm), for the severity of the gap and of each band.
    alpha : float, default 0.05
        Significance level; intervals are at ``1 - alpha``.
    n_bands : int, default 5
        Largest number of bands.
    n_permutations : int, default 999
        Permutations of the errors across samples that calibrate the max-|t| statistic.
    seed : int, default 0
        Seed of the permutations (the result is reproducible).

    Returns
    -------
    BandUnfairness
        Bands, gap, its interval, p-value, severity and direction.

    Raises
    ------
    ValueError
        Length mismatch, NaN values, or fewer than two bands with at least 2 samples.

    Examples
    --------
    A step of +1.5 at the deep end only (MST 9-10):

    >>> rng = np.random.default_rng(0)
    >>> tone = rng.integers(1, 11, 2000)
    >>> errors = 1.0 + 1.5 * (tone >= 9) + rng.normal(0, 0.3, 2000)
    >>> result = band_unfairness(errors, tone, threshold=2.0)
    >>> result.worst_band, result.worse_end, result.gap_significant, result.above_threshold
    ('9-10', 'high', True, ('9-10',))
    >>> round(result.gap, 1), result.gap_severity.level
    (1.5, 'moderate')
    """
    from scipy.stats import t as student_t

    _check_alpha(alpha)
    values = _as_errors(errors)
    x = np.asarray(attribute, dtype=np.float64)
    if x.shape != values.shape:
        raise ValueError(f"errors and attribute differ in length: {values.size} vs {x.size}")
    if not np.all(np.isfinite(x)):
        raise ValueError("attribute contains NaN or infinite values")
    if not threshold > 0:
        raise ValueError(f"threshold must be positive, got {threshold}")
    index, spec = attribute_bands(x, n_bands)
    k = len(spec)
    n = np.bincount(index, minlength=k)
    sums = np.bincount(index, weights=values, minlength=k)
    means = np.divide(sums, n, out=np.full(k, np.nan), where=n > 0)
    centred = values - means[index]
    ss = np.bincount(index, weights=centred * centred, minlength=k)
    var = np.divide(ss, n - 1, out=np.full(k, np.nan), where=n > 1)
    bands = []
    for g, (label, low, high, _kind) in enumerate(spec):
        if n[g] >= 2:
            half = float(student_t.ppf(1 - alpha / 2, n[g] - 1) * np.sqrt(var[g] / n[g]))
            ci = (float(means[g] - half), float(means[g] + half))
        else:
            ci = (None, None)
        bands.append(
            AttributeBand(
                label=label,
                low=float(low),
                high=float(high),
                n=int(n[g]),
                mean=None if n[g] == 0 else float(means[g]),
                ci_low=ci[0],
                ci_high=ci[1],
                small=bool(n[g] < SMALL_BAND),
            )
        )
    valid = np.flatnonzero(n >= 2)
    if valid.size < 2:
        raise ValueError(f"need at least two bands with 2 or more samples, got {valid.size} (band sizes {n.tolist()})")
    m = means[valid]
    # A band of identical errors has variance 0; a floor keeps the t statistics finite.
    floor = (1e-12 * max(1.0, float(np.abs(values).max()))) ** 2
    se_band = np.maximum(var[valid] / n[valid], floor)
    se = np.sqrt(se_band[:, None] + se_band[None, :])
    diff = m[:, None] - m[None, :]
    observed = float(np.max(np.abs(diff) / se))
    null = _permutation_max_t(values, index, k, valid, n_permutations, seed, floor)
    p_value = float((1 + np.count_nonzero(null >= observed * (1 - 1e-12))) / (1 + n_permutations))
    critical = float(np.quantile(null, 1 - alpha))
    off_diagonal = ~np.eye(valid.size, dtype=bool)
    gap_low = max(0.0, float(np.max((diff - critical * se)[off_diagonal])))
    gap_high = float(np.max((diff + critical * se)[off_diagonal]))
    worst = int(valid[np.argmax(m)])
    best = int(valid[np.argmin(m)])
    gap = float(m.max() - m.min())
    return BandUnfairness(
        bands=tuple(bands),
        kind=spec[0][3],
        gap=gap,
        gap_ci=(gap_low, gap_high),
        gap_p_value=p_value,
        gap_significant=bool(p_value < alpha),
        worst_band=spec[worst][0],
        best_band=spec[best][0],
        worse_end="high" if m[-1] > m[0] else "low",
        gap_severity=severity(gap, threshold),
        above_threshold=tuple(b.label for b in bands if b.mean is not None and b.n >= 2 and b.mean >= threshold),
        threshold=float(threshold),
        alpha=float(alpha),
        n_permutations=int(n_permutations),
        method=(
            f"largest studentised difference over the {valid.size * (valid.size - 1) // 2} pairs of "
            f"{valid.size} bands (Welch standard errors), calibrated by {n_permutations} permutations "
            "of the errors across samples"
        ),
    )


def _permutation_max_t(
    values: np.ndarray,
    index: np.ndarray,
    k: int,
    valid: np.ndarray,
    n_permutations: int,
    seed: int,
    floor: float,
) -> np.ndarray:
    """Max-|t| over band pairs for each permutation of the band labels (errors fixed)."""
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be at least 1, got {n_permutations}")
    rng = np.random.default_rng(seed)
    n = values.size
    # Band sums of shuffled errors: samples sorted by band, so each band is a contiguous slice.
    order = np.argsort(index, kind="stable")
    starts = np.searchsorted(index[order], valid)
    sizes = np.bincount(index, minlength=k)[valid].astype(np.float64)
    keep = np.isin(index[order], valid)
    null = np.empty(n_permutations)
    block = max(1, _PERMUTATION_BLOCK // n)
    for start in range(0, n_permutations, block):
        stop = min(n_permutations, start + block)
        rows = stop - start
        shuffled = rng.permuted(np.broadcast_to(values, (rows, n)), axis=1)
        total = np.add.reduceat(shuffled, starts, axis=1)
        total2 = np.add.reduceat(shuffled * shuffled, starts, axis=1)
        # reduceat runs each slice up to the next start: drop what bands with < 2 samples add.
        if not keep.all():
            dropped = np.where(keep, 0.0, shuffled)
            total -= np.add.reduceat(dropped, starts, axis=1)
            total2 -= np.add.reduceat(dropped * dropped, starts, axis=1)
        mean = total / sizes
        var = np.maximum(total2 - sizes * mean * mean, 0.0) / (sizes - 1)
        v = np.maximum(var / sizes, floor)
        worst = np.zeros(rows)
        for a in range(valid.size):
            for b in range(a + 1, valid.size):
                t = np.abs(mean[:, a] - mean[:, b]) / np.sqrt(v[:, a] + v[:, b])
                np.maximum(worst, t, out=worst)
        null[start:stop] = worst
    return null
