"""The colorimetric baseline audited on a project's own photos, per labelled tone (issue 21).

A recoloured evaluation set can show where a skin detector fails, not how it does on real faces of
every tone. A labelled project can: per *labelled* (consensus) tone, how often the automatic detector
found a face (coverage), what ITA it then measured, and how well ITA ranks the images as the labelers
did. A detector that misses darker faces shows as lower coverage at the deep end of the scale; this
module says whether that gap is beyond chance.

Everything here is plain NumPy over one row per image; nothing imports Django.

* Coverage per tone: ``k`` of ``n`` images with a face found, Wilson score interval
  (:func:`metrics.intervals.wilson_interval`).
* The gap: coverage of the lightest band (MST 1-2 on a 10-tone scale) minus the deepest band's (MST
  9-10), Newcombe's hybrid score interval and Fisher's exact test
  (:func:`metrics.intervals.proportion_difference`); a **warning** when the interval lies above 0
  (the deepest tones' faces are found less often, beyond chance at 95%). A gap the other way is
  reported, not warned about.
* ITA per tone: median and quartiles of the measured images.
* Rank agreement: Spearman's rho of the label value against ITA (expected negative: a deeper tone has
  a lower ITA) across every measured image and within each band (light, middle, deep), with a seeded
  bootstrap interval (:func:`metrics.correlation.spearman_bootstrap`). Within a band the range of
  tones is narrow, so |rho| is expected to be smaller there; a band whose interval includes 0 does not
  order its own images.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .correlation import spearman_bootstrap
from .intervals import proportion_difference, wilson_interval

__all__ = ["BandSpec", "baseline_audit", "coverage_gap", "tone_bands"]

#: A band: (name, first tone, last tone), tones 1-based and inclusive.
BandSpec = tuple[str, int, int]


def tone_bands(n_tones: int) -> list[BandSpec]:
    """The light, middle and deep bands of a scale of ``n_tones`` tones.

    Two tones at each end on a scale of 6 tones or more (MST 1-2 and 9-10, Fitzpatrick I-II and
    V-VI), one on a smaller one; the middle band is what lies between (absent when nothing does).

    Examples
    --------
    >>> tone_bands(10)
    [('light', 1, 2), ('middle', 3, 8), ('deep', 9, 10)]
    >>> tone_bands(5)
    [('light', 1, 1), ('middle', 2, 4), ('deep', 5, 5)]
    >>> tone_bands(2)
    [('light', 1, 1), ('deep', 2, 2)]
    """
    if n_tones < 2:
        raise ValueError(f"a scale needs at least 2 tones, got {n_tones!r}")
    width = 2 if n_tones >= 6 else 1
    bands: list[BandSpec] = [("light", 1, width)]
    if n_tones - width > width:
        bands.append(("middle", width + 1, n_tones - width))
    bands.append(("deep", n_tones - width + 1, n_tones))
    return bands


def _share(k: int, n: int, confidence: float) -> dict[str, Any]:
    low, high = wilson_interval(k, n, confidence) if n else (math.nan, math.nan)
    return {
        "k": int(k),
        "n": int(n),
        "value": k / n if n else None,
        "ci_low": None if math.isnan(low) else low,
        "ci_high": None if math.isnan(high) else high,
    }


def coverage_gap(k_light: int, n_light: int, k_deep: int, n_deep: int, *, confidence: float = 0.95) -> dict[str, Any]:
    """Coverage of the light band minus the deep band's, with Newcombe's interval and Fisher's test.

    Returns
    -------
    dict
        ``light``, ``deep`` (shares with Wilson intervals), ``difference``, ``ci_low``, ``ci_high``
        (Newcombe), ``p_value`` (Fisher, two-sided), ``warning`` (the interval lies above 0: the deep
        band's faces are found less often beyond chance) and ``reason`` (why there is no test: a band
        without images). Statistics are None without a test.

    Examples
    --------
    The issue's example, 61% of MST 9-10 images against 97% of MST 1-2:

    >>> gap = coverage_gap(58, 60, 37, 61)
    >>> round(gap["difference"], 2), gap["warning"]
    (0.36, True)
    >>> coverage_gap(28, 30, 27, 30)["warning"]
    False
    >>> coverage_gap(5, 5, 0, 0)["reason"]
    'no image of the deep band'
    """
    out: dict[str, Any] = {
        "light": _share(k_light, n_light, confidence),
        "deep": _share(k_deep, n_deep, confidence),
        "difference": None,
        "ci_low": None,
        "ci_high": None,
        "p_value": None,
        "warning": False,
        "confidence": confidence,
        "method": "Newcombe's hybrid score interval (method 10) of the difference, Fisher's exact test",
        "reason": None,
    }
    missing = [name for name, n in (("light", n_light), ("deep", n_deep)) if not n]
    if missing:
        out["reason"] = " and ".join(f"no image of the {name} band" for name in missing)
        return out
    result = proportion_difference(k_light, n_light, k_deep, n_deep, confidence)
    out.update(
        difference=result.difference,
        ci_low=result.low,
        ci_high=result.high,
        p_value=result.p_value,
        warning=bool(result.low > 0),
    )
    return out


def _floats(column: Sequence[float | None] | np.ndarray) -> np.ndarray:
    """A column as floats, None as NaN (an array of floats is copied as it is: no Python float per entry)."""
    if isinstance(column, np.ndarray) and column.dtype.kind == "f":
        return np.array(column, dtype=np.float64)
    return np.array([math.nan if v is None else float(v) for v in column], dtype=np.float64)


def _spread(values: np.ndarray) -> dict[str, Any]:
    if not values.size:
        return {"n": 0, "median": None, "q25": None, "q75": None, "iqr": None}
    q25, median, q75 = (float(v) for v in np.percentile(values, (25.0, 50.0, 75.0)))
    return {"n": int(values.size), "median": median, "q25": q25, "q75": q75, "iqr": q75 - q25}


def baseline_audit(
    tones: Sequence[int],
    label_values: Sequence[float],
    face_found: Sequence[bool],
    ita: Sequence[float | None] | np.ndarray,
    *,
    n_tones: int,
    lightness: Sequence[float | None] | np.ndarray | None = None,
    hue: Sequence[float | None] | np.ndarray | None = None,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """The baseline's coverage, ITA and rank agreement per labelled tone, and the coverage gap.

    Parameters
    ----------
    tones : sequence of int
        Each image's labelled (consensus) tone, 1-based.
    label_values : sequence of float
        Each image's label value (the mean label: finer than the tone, for the rank correlation).
    face_found : sequence of bool
        Whether the automatic detector found a face in the image.
    ita : sequence of float or None
        The image's ITA (None when nothing was measured).
    n_tones : int
        Tones of the scale (the bands come from :func:`tone_bands`).
    lightness, hue : sequence of float or None, optional
        Each image's CIELAB L* and hue angle h* (degrees): reported per tone beside ITA, which squeezes
        both ends of the scale (Thong, Joniak and Xiang, ICCV 2023) [Thong2023].
    confidence, n_resamples, seed
        Intervals' coverage and the rank correlations' bootstrap.

    Returns
    -------
    dict
        ``n_images``, ``bands``, ``by_tone`` (per tone: ``coverage`` share, ``ita`` spread),
        ``by_band`` (the same per band, and ``rank_agreement`` within it), ``rank_agreement`` (across
        every measured image), ``gap`` (:func:`coverage_gap` of the light against the deep band) and
        ``warning`` (the gap's warning, or None without a test), ``sentence`` (the gap in words).

    Examples
    --------
    >>> audit = baseline_audit([1, 1, 10, 10], [1, 1.5, 10, 9.5], [True, True, True, False],
    ...                        [60.0, 55.0, -80.0, None], n_tones=10, n_resamples=50)
    >>> [(row["tone"], row["coverage"]["k"], row["coverage"]["n"]) for row in audit["by_tone"]]
    [(1, 2, 2), (10, 1, 2)]
    >>> audit["gap"]["warning"]
    False
    """
    tone_array = np.asarray(tones, dtype=np.int64)
    values = np.asarray(label_values, dtype=np.float64)
    found = np.asarray(face_found, dtype=bool)
    ita_array = _floats(ita)
    if not tone_array.size == values.size == found.size == ita_array.size:
        raise ValueError("tones, label_values, face_found and ita need one entry per image")
    if tone_array.size and (tone_array.min() < 1 or tone_array.max() > n_tones):
        raise ValueError(f"tones must lie in 1..{n_tones}")
    measured = ~np.isnan(ita_array)
    bands = tone_bands(n_tones)

    def optional(column: Sequence[float | None] | np.ndarray | None) -> np.ndarray:
        if column is None:
            return np.full(tone_array.size, math.nan)
        out = _floats(column)
        if out.size != tone_array.size:
            raise ValueError("lightness and hue need one entry per image")
        return out

    lightness_array, hue_array = optional(lightness), optional(hue)

    by_tone = []
    for tone in np.unique(tone_array).tolist():
        here = tone_array == tone
        by_tone.append(
            {
                "tone": int(tone),
                "coverage": _share(int(found[here].sum()), int(here.sum()), confidence),
                "ita": _spread(ita_array[here & measured]),
                "lightness": _spread(lightness_array[here & measured & ~np.isnan(lightness_array)]),
                "hue_angle": _spread(hue_array[here & measured & ~np.isnan(hue_array)]),
            }
        )

    def rank(where: np.ndarray) -> dict[str, Any]:
        return spearman_bootstrap(
            values[where & measured], ita_array[where & measured], n_resamples=n_resamples, seed=seed,
            confidence=confidence,
        )  # fmt: skip

    by_band = []
    counts: dict[str, tuple[int, int]] = {}
    for name, first, last in bands:
        here = (tone_array >= first) & (tone_array <= last)
        k, n = int(found[here].sum()), int(here.sum())
        counts[name] = (k, n)
        by_band.append(
            {
                "band": name,
                "first_tone": first,
                "last_tone": last,
                "coverage": _share(k, n, confidence),
                "ita": _spread(ita_array[here & measured]),
                "rank_agreement": rank(here),
            }
        )
    gap = coverage_gap(*counts["light"], *counts["deep"], confidence=confidence)
    return {
        "n_images": int(tone_array.size),
        "n_found": int(found.sum()),
        "n_measured": int(measured.sum()),
        "confidence": confidence,
        "bands": [{"band": name, "first_tone": first, "last_tone": last} for name, first, last in bands],
        "by_tone": by_tone,
        "by_band": by_band,
        "rank_agreement": rank(np.ones(tone_array.size, dtype=bool)),
        "rank_expected_sign": "negative: a deeper tone (a higher label) has a lower ITA",
        "gap": gap,
        "warning": gap["warning"] if gap["reason"] is None else None,
    }


def coverage_sentence(audit: dict[str, Any], tone_name: str = "MST") -> str:
    """The gap in one sentence, every share with its interval (percent, rounded).

    Examples
    --------
    >>> audit = {"gap": coverage_gap(58, 60, 37, 61), "bands": [
    ...     {"band": "light", "first_tone": 1, "last_tone": 2}, {"band": "deep", "first_tone": 9, "last_tone": 10}]}
    >>> coverage_sentence(audit)
    'the automatic baseline found a face in 61% [48, 72] of MST 9-10 images and 97% [89, 99] of MST 1-2 images'
    """
    bands = {b["band"]: b for b in audit["bands"]}

    def span(band: dict[str, Any]) -> str:
        first, last = band["first_tone"], band["last_tone"]
        return f"{tone_name} {first}" if first == last else f"{tone_name} {first}-{last}"

    def share(s: dict[str, Any]) -> str:
        if s["value"] is None:
            return "no images"
        return f"{round(100 * s['value'])}% [{round(100 * s['ci_low'])}, {round(100 * s['ci_high'])}]"

    gap = audit["gap"]
    return (
        f"the automatic baseline found a face in {share(gap['deep'])} of {span(bands['deep'])} images "
        f"and {share(gap['light'])} of {span(bands['light'])} images"
    )


__all__ += ["coverage_sentence"]
