"""Mean error per band of an ordinal or continuous attribute (e.g. skin tone), and the largest band gap.

Seed 000 scores skin tone and body shape with a straight line: the fitted error difference
between the 5th and 95th percentile. A step confined to one end of the scale (say +1.5 mm
for MST 9-10 only) is spread by the line over the whole range and can come out as a small
score. The bands are the complement: the attribute is cut into a few bands, each band's
mean error gets a confidence interval, and the largest gap between two band means gets a
simultaneous interval, a p-value and a level (:mod:`metrics.unfairness.disparity`).

Bands of a skin-tone scale are cut **on the scale**, never on the data's quantiles: MST 1-2, 3-4, ...,
9-10 whatever the mix of the data, so that a rare deep tone (MST 9-10 on 6% of images) keeps a band of
its own instead of being merged into a wide "6.3-10" band whose mean hides it. Each band states its n,
its interval, and the minimum gap the test could detect at that n, so that a small band reads "too few
to tell" rather than "fair". An attribute without a scale (a body measurement) is cut at its quantiles.

The gap test is the largest studentised pairwise difference calibrated by a wild (cluster) bootstrap
(:func:`metrics.unfairness.robust.contrast_max_t`): it keeps its rate when photos of one person repeat
(give ``clusters``) and when some bands are noisier than others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._checks import _as_errors, _check_alpha
from .disparity import pairwise_disparity
from .robust import DEFAULT_BOOTSTRAPS
from .severity import Disparity

__all__ = ["AttributeBand", "BandUnfairness", "attribute_bands", "band_unfairness"]

#: Bands with fewer samples than this are flagged as small (their interval is wide).
SMALL_BAND = 30
#: Resamples of the band-gap test (kept under its former name for callers).
DEFAULT_PERMUTATIONS = DEFAULT_BOOTSTRAPS


@dataclass(frozen=True)
class AttributeBand:
    """One band of the attribute and its mean error.

    Attributes
    ----------
    label : str
        E.g. ``"9-10"`` on a scale or ``"0.281-0.312"`` for quantile bands.
    low, high : float
        Attribute values bounding the band (inclusive).
    n : int
        Samples in the band.
    mean : float or None
        Mean error (None when empty).
    ci_low, ci_high : float or None
        Cluster-robust t-interval of the mean at ``1 - alpha`` (None with fewer than 2 clusters).
    small : bool
        ``n < 30``: the interval is wide, read the mean with care.
    n_clusters : int
        Distinct clusters (people) in the band.
    min_detectable_gap : float or None
        The gap to the largest other band found with 80% power.
    reading : str
        ``"higher than ..."`` / ``"lower than ..."``, ``"within half the threshold"``, ``"too few to tell"``,
        ``"no gap detected"``, ``"too few to test"``, ``"no samples"``.
    performance : str
        The band's mean error against the threshold, by its interval (``"above the threshold"``, ...).
    """

    label: str
    low: float
    high: float
    n: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    small: bool
    n_clusters: int = 0
    min_detectable_gap: float | None = None
    reading: str = ""
    performance: str = "unknown"


@dataclass(frozen=True)
class BandUnfairness:
    """Mean error per band and the largest gap between two bands.

    Attributes
    ----------
    bands : tuple of AttributeBand
        In increasing order of the attribute (empty bands of a scale included).
    kind : str
        ``"scale"`` (bands of whole steps of a scale) or ``"quantile"`` (equal-count bands).
    gap : float
        Largest band mean minus smallest band mean (tested bands).
    gap_ci : tuple of float
        Simultaneous interval of the largest true gap.
    gap_p_value : float
        Wild-bootstrap max-t p-value of "all band means are equal".
    gap_significant : bool
        ``gap_p_value < alpha``.
    worst_band, best_band : str
        Labels of the tested bands with the highest and the lowest mean error.
    worse_end : str or None
        ``"high"`` or ``"low"`` when the gap is significant and the worst band lies in the outer fifth
        of the tested bands at that end (the last of five, the last two of ten); None otherwise.
    disparity : Disparity
        The gap's level from ``gap_ci``.
    above_threshold : tuple of str
        Bands whose mean error's interval lies above the threshold (performance, not disparity).
    threshold, alpha : float
        Settings (``alpha`` also sets the interval level ``1 - alpha``).
    n_permutations : int
        Bootstrap resamples behind the p-value and the intervals.
    method : str
        How the gap was tested, in words.
    critical : float
        Critical value of the simultaneous intervals.
    levels : int or None
        Tones of the scale (``kind == "scale"``).
    clustered : bool
        Whether clusters were given.
    """

    bands: tuple[AttributeBand, ...]
    kind: str
    gap: float
    gap_ci: tuple[float, float]
    gap_p_value: float
    gap_significant: bool
    worst_band: str
    best_band: str
    worse_end: str | None
    disparity: Disparity
    above_threshold: tuple[str, ...]
    threshold: float
    alpha: float
    n_permutations: int
    method: str
    critical: float
    levels: int | None = None
    clustered: bool = False


def _is_ordinal_scale(x: np.ndarray) -> bool:
    # Means of 1, 2, 3, 4 or 6 labels on an integer scale are multiples of 1/12.
    span = float(x.max() - x.min())
    return 1 <= span <= 20 and bool(np.all(np.abs(x * 12 - np.round(x * 12)) < 1e-6))


def tone_band_count(levels: int | None, tone_bands: int | None = None, n_bands: int = 5) -> int:
    """Bands of the skin-tone verdict: one per tone of the scale unless ``tone_bands`` says otherwise.

    A rare deep tone must never be averaged into a neighbour: +1.5 mm at MST 10 alone is about 0.6 mm
    in a "9-10" band when MST 10 holds a quarter of it. Without a scale (``levels`` None: the tones are
    not on known steps), the attribute is cut into ``n_bands`` as any continuous attribute.

    >>> tone_band_count(10), tone_band_count(10, tone_bands=5), tone_band_count(None, n_bands=4)
    (10, 5, 4)
    """
    if levels is None:
        return int(n_bands)
    return max(2, int(tone_bands or levels))


def testable_band_count(
    attribute: Sequence[float] | np.ndarray,
    levels: int,
    n_bands: int,
    clusters: Sequence[object] | np.ndarray | None = None,
) -> int:
    """The finest cut of a scale, from ``n_bands``, with at least two bands of 2 samples (people) or more.

    One band per tone where n allows: a small study whose tones hold one image each is cut into pairs of
    tones, then threes, until two bands can be compared (the band test needs 2 per band); the report says
    so. A study that has them keeps ``n_bands``.

    >>> testable_band_count([1, 2, 3, 4, 4, 6, 8], levels=10, n_bands=10)
    5
    >>> testable_band_count([1, 1, 4, 4, 10], levels=10, n_bands=10)
    10
    """
    x = np.asarray(attribute, dtype=np.float64)
    units = None if clusters is None else np.asarray(clusters, dtype=object)
    n = int(n_bands)
    while True:
        index, _ = attribute_bands(x, n, levels)
        if units is None:
            sizes = np.bincount(index)
        else:
            sizes = np.array([len(set(units[index == k].tolist())) for k in range(int(index.max()) + 1)])
        if np.count_nonzero(sizes >= 2) >= 2 or n <= 2:
            return n
        width = int(np.ceil(levels / n)) + 1
        n = max(2, int(np.ceil(levels / width)))


def attribute_bands(
    attribute: Sequence[float] | np.ndarray, n_bands: int = 5, levels: int | None = None
) -> tuple[np.ndarray, list[tuple[Any, ...]]]:
    """Cut an attribute into at most ``n_bands`` bands.

    With ``levels`` (the scale's number of tones, e.g. 10 for MST), values are rounded half up to
    whole tones ``1 .. levels`` and the **scale** is cut into bands of ``ceil(levels / n_bands)``
    consecutive tones starting at tone 1, whatever the data hold: MST gives 1-2, 3-4, 5-6, 7-8, 9-10
    (bands without samples included). Without ``levels``, an ordinal-looking attribute (values on a
    grid of 1/12 spanning 1 to 20 steps, e.g. MST labels or means of a few labels) is treated the same
    way with ``levels`` = its largest rounded value (starting at 1 when no value is below 1). Any other
    attribute is cut at its quantiles into bands of about equal counts.

    Parameters
    ----------
    attribute : array-like of float, shape (n,)
        Finite values.
    n_bands : int, default 5
        Largest number of bands (``n_bands >= levels``: one band per tone).
    levels : int, optional
        Tones of the scale.

    Returns
    -------
    tuple
        ``(band index per sample, [(label, low, high, kind), ...])``, kind ``"scale"`` or ``"quantile"``.

    Raises
    ------
    ValueError
        ``n_bands < 2``, no samples, or a value outside ``1 .. levels`` once rounded.

    Examples
    --------
    >>> index, bands = attribute_bands([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 9.75])
    >>> [b[0] for b in bands], index[-1].item()
    (['1-2', '3-4', '5-6', '7-8', '9-10'], 4)

    A skewed mix keeps its rare deep tones in a band of their own (means of 5 labels included):

    >>> index, bands = attribute_bands([3.2, 4.4, 5.0, 5.6, 6.2, 9.6], levels=10)
    >>> [b[0] for b in bands], index.tolist()
    (['1-2', '3-4', '5-6', '7-8', '9-10'], [1, 1, 2, 2, 2, 4])
    """
    from metrics.rounding import round_half_up

    x = np.asarray(attribute, dtype=np.float64)
    if n_bands < 2:
        raise ValueError(f"n_bands must be at least 2, got {n_bands}")
    if x.size == 0:
        raise ValueError("no samples")
    if levels is not None or _is_ordinal_scale(x):
        steps = round_half_up(x).astype(np.int64)
        if levels is not None:
            levels = int(levels)
            if levels < 2:
                raise ValueError(f"a scale needs at least 2 tones, got {levels}")
            low = 1
            bad = (steps < 1) | (steps > levels)
            if bad.any():
                raise ValueError(
                    f"{int(bad.sum())} value(s) outside the scale's tones 1..{levels} once rounded "
                    f"(e.g. {x[bad][:3].tolist()})"
                )
        else:
            low = 1 if steps.min() >= 1 else int(steps.min())
            levels = int(steps.max()) - low + 1
        width = int(np.ceil(levels / n_bands))
        index = ((steps - low) // width).astype(np.intp)
        bands = []
        for k in range(int(np.ceil(levels / width))):
            a, b = low + k * width, min(low + (k + 1) * width - 1, low + levels - 1)
            label = f"{a:g}" if a == b else f"{a:g}-{b:g}"
            bands.append((label, float(a), float(b), "scale"))
        return index, bands
    edges = np.unique(np.quantile(x, np.linspace(0, 1, n_bands + 1)[1:-1]))
    index = np.searchsorted(edges, x, side="right").astype(np.intp)
    bands = []
    for k in range(edges.size + 1):
        members = x[index == k]
        if members.size == 0:
            continue
        lo, hi = float(members.min()), float(members.max())
        bands.append((f"{lo:.4g}-{hi:.4g}", lo, hi, "quantile"))
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
    clusters: Sequence[object] | np.ndarray | None = None,
    levels: int | None = None,
) -> BandUnfairness:
    """Mean error per attribute band with intervals, and the largest band gap tested.

    Parameters
    ----------
    errors : array-like of float, shape (n,)
        Per-sample error, larger is worse.
    attribute : array-like of float, shape (n,)
        Attribute (e.g. skin tone on MST 1-10); see :func:`attribute_bands`.
    threshold : float
        Error threshold (seed 000: 2 mm): the level of the gap and each band's performance.
    alpha : float, default 0.05
        Significance level; intervals are at ``1 - alpha``.
    n_bands : int, default 5
        Largest number of bands.
    n_permutations : int, default 999
        Wild bootstrap resamples of the max-t test (the name is kept from its permutation days).
    seed : int, default 0
        Seed of the resamples (the result is reproducible).
    clusters : array-like, shape (n,), optional
        Person (subject) of each sample: the bootstrap draws one weight per person and every standard
        error is cluster-robust.
    levels : int, optional
        Tones of the scale (10 for MST); see :func:`attribute_bands`.

    Returns
    -------
    BandUnfairness
        Bands, gap, its interval, p-value, level, and each band's power and performance.

    Raises
    ------
    ValueError
        Length mismatch, NaN values, or fewer than two bands with at least 2 samples (clusters).

    Examples
    --------
    A step of +1.5 at the deep end only (MST 9-10):

    >>> rng = np.random.default_rng(0)
    >>> tone = rng.integers(1, 11, 2000)
    >>> errors = 1.0 + 1.5 * (tone >= 9) + rng.normal(0, 0.3, 2000)
    >>> result = band_unfairness(errors, tone, threshold=2.0, n_permutations=199)
    >>> result.worst_band, result.worse_end, result.gap_significant, result.above_threshold
    ('9-10', 'high', True, ('9-10',))
    >>> round(result.gap, 1), result.disparity.level
    (1.5, 'moderate')
    """
    _check_alpha(alpha)
    values = _as_errors(errors)
    x = np.asarray(attribute, dtype=np.float64)
    if x.shape != values.shape:
        raise ValueError(f"errors and attribute differ in length: {values.size} vs {x.size}")
    if not np.all(np.isfinite(x)):
        raise ValueError("attribute contains NaN or infinite values")
    if not threshold > 0:
        raise ValueError(f"threshold must be positive, got {threshold}")
    index, spec = attribute_bands(x, n_bands, levels)
    labels = [label for label, *_ in spec]
    result = pairwise_disparity(
        values,
        index,
        labels,
        threshold=threshold,
        alpha=alpha,
        clusters=clusters,
        n_boot=n_permutations,
        seed=seed,
        what="bands",
    )
    bands = tuple(
        AttributeBand(
            label=label,
            low=float(low),
            high=float(high),
            n=reading.n,
            mean=reading.mean,
            ci_low=reading.ci_low,
            ci_high=reading.ci_high,
            small=bool(reading.n < SMALL_BAND),
            n_clusters=reading.n_clusters,
            min_detectable_gap=reading.min_detectable_gap,
            reading=reading.reading,
            performance=reading.performance,
        )
        for (label, low, high, _kind), reading in zip(spec, result.groups, strict=True)
    )
    tested = [b.label for b in bands if b.reading not in ("no samples", "too few to test")]
    worse_end = None
    # An end of the scale is worse when the worst band lies in its outer fifth (the last band of five
    # pairs; the last two of ten tones, so that a step at MST 9-10 whose worst tone is 9 still says so).
    outer = max(1, int(np.ceil(len(tested) / 5)))
    if result.significant and result.worst in tested[-outer:]:
        worse_end = "high"
    elif result.significant and result.worst in tested[:outer]:
        worse_end = "low"
    return BandUnfairness(
        bands=bands,
        kind=spec[0][3],
        gap=result.gap,
        gap_ci=result.gap_ci,
        gap_p_value=result.p_value,
        gap_significant=result.significant,
        worst_band=result.worst,
        best_band=result.best,
        worse_end=worse_end,
        disparity=result.disparity,
        above_threshold=tuple(b.label for b in bands if b.performance == "above the threshold"),
        threshold=float(threshold),
        alpha=float(alpha),
        n_permutations=int(n_permutations),
        method=result.method,
        critical=result.critical,
        levels=None if spec[0][3] != "scale" else int(round(spec[-1][2] - spec[0][1] + 1)),
        clustered=result.clustered,
    )
