"""Thresholds of the consensus statistics and JSON-safe numbers (``None`` plus a reason instead of ``NaN``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from metrics.agreement import ASYMPTOTIC_MIN_UNITS, DELTA_METHOD, DeltaInterval, clustered_proportion
from metrics.agreement.bootstrap import INTERVAL_METHOD
from metrics.intervals import wilson_interval
from metrics.report.composition import UNDER_REPRESENTED_FRACTION

#: "Too little data", the two rules (issue 12). Agreement statistics over fewer images than
#: ``MIN_IMAGES`` (with 2+ valid labels) are not shown at all (alpha, kappa, bias, rates alike).
#: On top of that, every rate or share (consensus rates, pairs of labels that agree, uncertain and
#: skip rates, flagged shares, test-retest, label shares, the data card's proportions) is shown only
#: when its 95% interval is at most ``MAX_INTERVAL_WIDTH`` wide (50 percentage points): a wider
#: interval cannot be read (18 of 29 images is 44-77%; 3 of 5 is 23-88%), so the point estimate is
#: replaced by "too little data: n=..., 95% interval ...". Its interval, ``n`` and ``k`` stay in the
#: dict (``low``, ``high``), so the API still says what is known. In practice a share near 50% needs
#: about 14 units, one near 0% or 100% about 5. Applied by :func:`share_stat` (dashboard and API) and
#: by ``releases.card_facts.proportion`` (the data card).
MIN_IMAGES = 5
MAX_INTERVAL_WIDTH = 0.5
#: The same rule for the agreement coefficients on the [-1, 1] scale (Krippendorff's alpha, ordinal and
#: interval, and without each labeler; Fleiss' kappa; the labeler x labeler and test-retest weighted
#: kappas): each carries its 95% BCa bootstrap interval over images (``metrics.agreement.bootstrap``), and
#: one whose interval is wider than ``MAX_COEFFICIENT_WIDTH`` is replaced by "too little data: n=..., 95%
#: interval a to b" (the interval stays in the dict, ``too_wide`` True). 0.5 is the same absolute width as
#: a share's rule, a quarter of the coefficient's range; a coefficient known only to within more than half
#: a unit cannot be read (.40 to .95 is "not reliable", "tentative" and "reliable" at once). On planted
#: data (4 labelers, true alpha .44-.91, ``bench/sim_alpha_coverage.py``) 30 images give alpha intervals
#: 0.11-0.37 wide (median), never over 0.5; 10 images are over 0.5 15-62% of the time, 5 images 35-70% (the
#: lower the agreement, the wider). Applied by :func:`coefficient_stat` on the dashboard and in the API,
#: and on the data card, which reads the same dicts (``releases.card_facts._alpha``).
MAX_COEFFICIENT_WIDTH = 0.5
#: The floor under every agreement coefficient (alpha, the kappas, test-retest): below this many units
#: (images with 2+ labels, repeated images, or subjects when they repeat) neither a coefficient nor an
#: interval is shown, counts only (issue 22). Under a realistic labeler model (fixed personal offsets,
#: half steps, 10% missing) the BCa interval of alpha covered the true alpha 63% of the time at 10 images
#: and 93% at 40: below 30 an interval says more than the data hold.
COEFFICIENT_MIN_UNITS = 30
#: A coefficient whose bootstrap interval has no width (every resample gives the same value: every image
#: agreed perfectly) is not certain, only unresampleable: with ``n`` images that all agreed, up to
#: ``1 - 0.025 ** (1 / n)`` of images could disagree (exact one-sided 97.5% bound on a count of 0): 52% at 5
#: images, 31% at 10, 12% at 30. Below ``ZERO_WIDTH_MIN_IMAGES`` (where that bound first drops to 10%) such
#: a coefficient is "too little data" with that bound as its reason (``zero_width_too_few``).
ZERO_WIDTH_MIN_IMAGES = 36
#: An image is flagged when its labels span this many tones or more. This project's
#: choice: seed 000 gives no such threshold (issue 12).
WIDE_RANGE = 3
#: Bootstrap resamples of the alpha and kappa confidence intervals (below ``ASYMPTOTIC_MIN_UNITS``).
N_RESAMPLES = 1000
#: From this many units (images, or subjects) on, alpha's and the kappas' intervals are the delta
#: method's (``metrics.agreement.asymptotic``: linearised, cluster-robust standard error; both cover about
#: 95% and agree at the switch), below it the BCa bootstrap's: 1,000 resamples of 100,000 images cost
#: seconds for the same interval.
DELTA_MIN_UNITS = ASYMPTOTIC_MIN_UNITS
#: The delta method's name on the pages (the bootstrap's is ``INTERVAL_METHOD``).
DELTA_INTERVAL_METHOD = f"{DELTA_METHOD}, {ASYMPTOTIC_MIN_UNITS:,}+ units"


def interval_method(result: object) -> str:
    """The words for how ``result``'s interval was made: the delta method's or the BCa bootstrap's."""
    return DELTA_INTERVAL_METHOD if isinstance(result, DeltaInterval) else INTERVAL_METHOD


CONFIDENCE = 0.95
#: A tone is "under-represented" when its share of labels is below this fraction
#: of an even share (1 / n_tones): the report's rule, defined once in metrics.report.composition.
UNDER_REPRESENTED = UNDER_REPRESENTED_FRACTION


def num(x: Any, digits: int = 6) -> float | None:
    """A finite float rounded to ``digits``, or ``None`` (never NaN in JSON)."""
    if x is None:
        return None
    x = float(x)
    return None if not math.isfinite(x) else round(x, digits)


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def too_little(n_images: int, what: str = "with 2+ labels", need: int = MIN_IMAGES) -> str:
    """The reason shown instead of a number computed from too few images."""
    return f"too little data: {plural(n_images, 'image')} {what} (needs {need})"


def too_wide(n: int, unit: str, low: float, high: float) -> str:
    """The reason shown instead of a share whose interval is wider than ``MAX_INTERVAL_WIDTH``."""
    return (
        f"too little data: n={n}{' ' + unit if unit else ''}, 95% interval {low * 100:.0f}–{high * 100:.0f}% "
        f"(wider than {MAX_INTERVAL_WIDTH * 100:.0f} percentage points)"
    )


def interval_too_wide(low: float | None, high: float | None) -> bool:
    """Whether an interval is too wide to read (see ``MAX_INTERVAL_WIDTH``)."""
    return low is not None and high is not None and high - low > MAX_INTERVAL_WIDTH + 1e-12


def share_stat(
    value: float,
    low: float,
    high: float,
    n: int,
    *,
    reason: str | None = None,
    unit: str = "images",
    interval: str = "Wilson",
    **extra: Any,
) -> dict:
    """A rate or share with its 95% interval, or ``None`` and why (too few images, interval too wide).

    ``{"value", "reason", "too_wide", "low", "high", "n", "unit", "interval", ...extra}``: ``low`` and
    ``high`` are kept when the value is hidden (``too_wide`` True when the interval is the reason; see the
    "too little data" rules above ``MIN_IMAGES``).
    """
    number, lo, hi = num(value), num(low), num(high)
    wide = False
    if reason is None:
        if not n or number is None:
            reason = "no data"
        elif lo is None or hi is None:
            reason = too_little(n, "with data")
        elif interval_too_wide(lo, hi):
            reason, wide = too_wide(n, unit, lo, hi), True
    return _with_interval(number, reason, wide, lo, hi, n, unit, interval, **extra)


def _with_interval(number, reason, wide, low, high, n, unit, interval, **extra) -> dict:
    """The dict of :func:`share_stat` and :func:`coefficient_stat`: the value only when no reason hides it."""
    return {
        "value": None if reason else number,
        "reason": reason,
        "too_wide": wide,
        "low": low,
        "high": high,
        "n": int(n),
        "unit": unit,
        "interval": interval,
        **extra,
    }


def wilson_share(k: int, n: int, *, reason: str | None = None, unit: str = "images", **extra: Any) -> dict:
    """``k`` of ``n`` independent units as a :func:`share_stat` with its Wilson interval (and ``k``)."""
    k, n = int(k), int(n)
    low, high = wilson_interval(k, n, CONFIDENCE) if n else (math.nan, math.nan)
    return share_stat(k / n if n else math.nan, low, high, n, reason=reason, unit=unit, k=k, **extra)


def clustered_share(
    successes: np.ndarray, trials: np.ndarray, *, reason: str | None = None, unit: str = "images", **extra: Any
) -> dict:
    """A share pooled over units clustered by image (pairs of labels, labels) with its clustered interval.

    ``n`` is the number of images (clusters); ``n_units`` the pooled units (pairs, labels), ``k`` the
    pooled successes.
    """
    result = clustered_proportion(successes, trials, CONFIDENCE)
    return share_stat(
        result.estimate,
        result.low,
        result.high,
        result.n_clusters,
        reason=reason,
        unit=unit,
        interval="image-clustered",
        k=num(result.estimate * result.n_trials, 2) if result.n_clusters else 0,
        n_units=num(result.n_trials, 2),
        design_effect=num(result.design_effect, 3),
        **extra,
    )


def coefficient_too_wide(n: int, unit: str, low: float, high: float) -> str:
    """The reason shown instead of a coefficient whose interval is wider than ``MAX_COEFFICIENT_WIDTH``."""
    return (
        f"too little data: n={n}{' ' + unit if unit else ''}, 95% interval {low:.2f} to {high:.2f} "
        f"(wider than {MAX_COEFFICIENT_WIDTH:g})"
    )


def below_floor(n: int, unit: str) -> str:
    """The reason shown instead of a coefficient over fewer than ``COEFFICIENT_MIN_UNITS`` units."""
    return f"counts only: n={n}{' ' + unit if unit else ''} (a coefficient needs at least {COEFFICIENT_MIN_UNITS})"


def unseen_disagreement_bound(n: int) -> float:
    """The exact one-sided 97.5% upper bound on the share of images that disagree when none of ``n`` did."""
    return 1.0 - 0.025 ** (1.0 / n) if n > 0 else 1.0


def zero_width_too_few(n: int, low: float | None, high: float | None) -> bool:
    """Whether an interval of no width rests on too few images (see ``ZERO_WIDTH_MIN_IMAGES``)."""
    return low is not None and high is not None and abs(high - low) <= 1e-12 and 0 < n < ZERO_WIDTH_MIN_IMAGES


def coefficient_zero_width(n: int, unit: str, value: float) -> str:
    """The reason shown instead of a coefficient whose every resample gave the same value, from few images."""
    return (
        f"too little data: n={n}{' ' + unit if unit else ''} all agree ({value:.2f} on every resample); up to "
        f"{unseen_disagreement_bound(n) * 100:.0f}% of images could disagree unseen (needs {ZERO_WIDTH_MIN_IMAGES})"
    )


def coefficient_stat(
    value: float,
    low: float | None,
    high: float | None,
    n: int,
    *,
    reason: str | None = None,
    unit: str = "images with 2+ labels",
    interval: str = INTERVAL_METHOD,
    conclusive_below: float | None = None,
    **extra: Any,
) -> dict:
    """An agreement coefficient (alpha, a kappa) with its 95% interval, or ``None`` and why.

    Like :func:`share_stat` (``{"value", "reason", "too_wide", "low", "high", "n", "unit", "interval",
    ...extra}`` plus ``"scale": "coefficient"``), with ``MAX_COEFFICIENT_WIDTH`` as the rule: the
    interval stays in the dict when the value is hidden because of it. An undefined coefficient (no
    disagreement possible) keeps :func:`stat`'s reason.
    Below ``COEFFICIENT_MIN_UNITS`` units nothing but the count is kept (no value, no interval). With
    ``conclusive_below`` (alpha: .667), an interval wider than the rule whose upper bound is below it is
    shown all the same: it is conclusive ("not reliable") whatever its width, and hiding it would hide
    bad news only.
    """
    number, lo, hi = num(value), num(low), num(high)
    wide = False
    if reason is None and 0 < n < COEFFICIENT_MIN_UNITS:
        reason = below_floor(n, unit)
        number = lo = hi = None
    if reason is None:
        if not n:
            reason = "no data"
        elif number is None:
            reason = stat(math.nan)["reason"]
        elif lo is None or hi is None:
            reason = too_little(n, "with data")
        elif hi - lo > MAX_COEFFICIENT_WIDTH + 1e-12 and not (conclusive_below is not None and hi < conclusive_below):
            reason, wide = coefficient_too_wide(n, unit, lo, hi), True
        elif zero_width_too_few(n, lo, hi):
            reason = coefficient_zero_width(n, unit, number)  # its own words: "interval 1.00 to 1.00" says nothing
    return _with_interval(number, reason, wide, lo, hi, n, unit, interval, scale="coefficient", **extra)


def stat(value: float, reason: str | None = None, **extra: Any) -> dict:
    """``{"value": x, "reason": None}`` or ``{"value": None, "reason": why}``."""
    number = num(value)
    if reason is not None:
        number = None
    elif number is None:
        reason = "undefined: no disagreement is possible (every label has the same value)"
    return {"value": number, "reason": reason, **extra}


def json_clean(obj: Any) -> Any:
    """NumPy scalars to Python, NaN to None, recursively."""
    if isinstance(obj, dict):
        return {str(k): json_clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_clean(v) for v in obj]
    if isinstance(obj, np.bool_ | bool):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        return num(obj)
    return obj
