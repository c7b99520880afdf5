"""Agreement per tone band: where on the scale the labelers agree, and which labeler leans which way there.

A phase's alpha can look fine while the labelers disagree where the fairness evaluation is decided: at
the deep end of the scale, where images are rarest and where labelers differ most (Schumann et al. 2023
[Schumann2023]). Here every image with two or more valid labels is put in a band of the scale by its
*consensus tone* (the median of its valid labels, rounded half up), and per band:

* **near consensus**: the share of images whose valid values all lie within one tone (the dashboard's
  near consensus), with a Wilson 95% interval (clustered by subject when people repeat:
  :func:`~metrics.agreement.clustered_proportion`);
* **each labeler's signed bias**: the mean of (their value minus the mean of the *other* labelers' values
  on the same image), positive = deeper, with a t interval whose standard error is cluster-robust (CR1 over
  images, or over subjects when people repeat; ``G - 1`` degrees of freedom [CameronGelbachMiller2008]);
* **Krippendorff's alpha** (ordinal) with its BCa bootstrap interval over images or subjects
  (:func:`~metrics.agreement.bootstrap_alpha`), or from ``asymptotic_min_units`` units in the band on
  its delta-method interval (:func:`~metrics.agreement.delta_alpha_levels`, cluster-robust).

Banding by the consensus conditions on the outcome, and two things follow.

* **Alpha within a band is low by construction.** A band holds a narrow range of tones (range
  restriction), so the same labelers with the same noise have a lower alpha inside every band than over
  the whole scale. A band's alpha compares bands with each other, never with .667 / .800; the primary
  per-band readings are near consensus and bias. :data:`RANGE_RESTRICTION_NOTE` says so in words.
* **The bias is taken against the mean of the others, with bands chosen by all the labels.** Both choices
  keep a labeler with no bias at zero in every band: the band is then a symmetric function of every
  labeler's label, so exchangeable labelers have the same expected value in it. The tempting alternative
  (value minus the others' *median*, banded by the others' median, as an earlier
  ``labeler_bias(by_band=True)`` did) regresses to the mean at the ends
  of the scale: in a seeded null (4 exchangeable labelers, noise 0.8 tones, 300 images, pairs of MST
  tones) its 95% t interval excluded 0 in 64% of the lightest band's cells and 69% of the deepest's; the
  definition here excluded it in 4-7% of every band's (``tests/metrics/test_agreement_bands.py``).

Bands are fixed on the scale (never cut at the data's quantiles, which would merge the rare deep tones
into their neighbours): ``band_width`` tones each from tone 1 up, or explicit ``bands``. The default,
:func:`default_band_width`, is pairs of tones on a scale of 6 tones or more (MST 1-2, ..., 9-10;
Fitzpatrick I-II, III-IV, V-VI) and one tone per band on smaller scales: one band per MST tone leaves each
band a tenth of a phase's images (below the 30 a coefficient needs in most studies), and pairs still keep
the two deepest tones apart from the middle of the scale. Each band reports its images and subjects, so
a reader sees how much it rests on.

Pure NumPy; no Django.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..intervals import wilson_interval
from ..rounding import round_half_up
from ._data import LevelOfMeasurement, _as_reliability_data, _check_level, _unit_codes
from .asymptotic import ASYMPTOTIC_MIN_UNITS, DeltaInterval, alpha_intervals
from .bootstrap import AlphaBootstrap
from .clustered import _student_t_quantile, clustered_proportion

__all__ = [
    "RANGE_RESTRICTION_NOTE",
    "BandAgreement",
    "BandShare",
    "LabelerBandBias",
    "ToneBandAgreement",
    "agreement_by_band",
    "agreement_by_band_long",
    "default_band_width",
    "tone_band_edges",
]

#: What a band's alpha can and cannot say, in words for the pages and the data card.
RANGE_RESTRICTION_NOTE = (
    "Images are banded by their consensus tone (the median of their labels), so each band holds a narrow "
    "range of tones: alpha within a band is lower than over the whole scale even when the labelers are "
    "just as consistent (range restriction). Compare bands with each other, not with .667 or .800; near "
    "consensus and each labeler's bias are the primary per-band readings."
)


@dataclass(frozen=True)
class BandShare:
    """A share of images in a band (near consensus) with its 95% interval.

    Attributes
    ----------
    k, n : int
        Images with near consensus, images in the band.
    estimate, low, high : float
        ``k / n`` and its interval (Wilson; clustered by subject when ``n_units < n``); NaN without images.
    n_units : int
        Independent units: subjects when people repeat, else ``n``.
    """

    k: int
    n: int
    estimate: float
    low: float
    high: float
    n_units: int


@dataclass(frozen=True)
class LabelerBandBias:
    """One labeler's signed bias in one band.

    Attributes
    ----------
    labeler : object
        The labeler's id.
    n : int
        Images of the band this labeler gave a valid value to, with at least one other valid value.
    n_units : int
        Independent units among them (subjects when people repeat, else ``n``).
    mean_diff : float
        Mean of (value - mean of the other labelers' values); positive = deeper. NaN when ``n == 0``.
    low, high : float
        t interval with a cluster-robust (CR1) standard error over ``n_units`` units, ``n_units - 1``
        degrees of freedom; NaN with fewer than 2 units.
    """

    labeler: object
    n: int
    n_units: int
    mean_diff: float
    low: float
    high: float


@dataclass(frozen=True)
class ToneBandAgreement:
    """Agreement in one band of the scale (tones ``low`` to ``high``, inclusive)."""

    low: int
    high: int
    n_images: int
    n_units: int
    n_labels: int
    near_consensus: BandShare
    alpha: AlphaBootstrap | DeltaInterval | None
    bias: tuple[LabelerBandBias, ...]

    @property
    def name(self) -> str:
        """``"9-10"``, or ``"7"`` for a band of one tone."""
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


@dataclass(frozen=True)
class BandAgreement:
    """Agreement per tone band of a set of labels (see the module docstring).

    Attributes
    ----------
    bands : tuple of ToneBandAgreement
        Every band of the scale, in order (empty ones with ``n_images == 0``).
    n_images : int
        Images with two or more valid labels (the banded images).
    n_unbanded : int
        Images with fewer than two valid labels (no consensus to band by; left out).
    clustered : bool
        Whether the intervals resample subjects (``clusters`` given with a repeated subject).
    confidence : float
    level_of_measurement : str
        Of alpha.
    """

    bands: tuple[ToneBandAgreement, ...]
    n_images: int
    n_unbanded: int
    clustered: bool
    confidence: float
    level_of_measurement: str


def default_band_width(n_tones: int) -> int:
    """Tones per band: 2 on a scale of 6 tones or more, else 1 (see the module docstring).

    >>> default_band_width(10), default_band_width(6), default_band_width(5)
    (2, 2, 1)
    """
    return 2 if n_tones >= 6 else 1


def tone_band_edges(n_tones: int, band_width: int | None = None) -> list[tuple[int, int]]:
    """Bands of ``band_width`` tones from tone 1 up (the last one may be narrower), inclusive.

    Parameters
    ----------
    n_tones : int
        Tones of the scale (1-based), at least 1.
    band_width : int, optional
        Default :func:`default_band_width`.

    Examples
    --------
    >>> tone_band_edges(10)
    [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10)]
    >>> tone_band_edges(10, 3), tone_band_edges(5)
    ([(1, 3), (4, 6), (7, 9), (10, 10)], [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)])
    """
    if n_tones < 1:
        raise ValueError(f"a scale needs at least 1 tone, got {n_tones!r}")
    width = default_band_width(n_tones) if band_width is None else int(band_width)
    if width < 1:
        raise ValueError(f"band_width must be at least 1, got {band_width!r}")
    return [(start, min(start + width - 1, n_tones)) for start in range(1, n_tones + 1, width)]


def _check_bands(bands: Sequence[tuple[int, int]], n_tones: int) -> list[tuple[int, int]]:
    """Explicit bands: whole tones, ``low <= high``, in order, not overlapping, within the scale."""
    checked = [(int(low), int(high)) for low, high in bands]
    previous = 0
    for low, high in checked:
        if not 1 <= low <= high <= n_tones or low <= previous:
            raise ValueError(f"bands must be ordered, non-overlapping tone ranges within 1..{n_tones}, got {bands!r}")
        previous = high
    return checked


def _units(clusters: npt.ArrayLike | None, n_items: int) -> tuple[np.ndarray, bool]:
    """Integer unit of each item and whether any unit holds two items (the clustering matters)."""
    if clusters is None:
        return np.arange(n_items), False
    group = np.asarray(clusters).ravel()
    if group.size != n_items:
        raise ValueError("clusters must have one entry per item.")
    if group.size == 0:
        return np.zeros(0, dtype=np.intp), False
    index, n_units = _unit_codes(group)
    return index, bool(n_units < n_items)


def _cluster_t_interval(
    diff: np.ndarray, units: np.ndarray, n_all_units: int, confidence: float
) -> tuple[float, float, int]:
    """Mean of ``diff`` with a CR1 cluster-robust t interval (``G - 1`` degrees of freedom), and ``G``.

    ``units`` are unit indices in ``0..n_all_units-1`` (bincounts, no sort: 20 cells of 100,000 images
    took 1.3 s with ``np.unique``).
    """
    mean = float(diff.mean()) if diff.size else math.nan
    per_unit = np.bincount(units, minlength=n_all_units)
    n_units = int(np.count_nonzero(per_unit))
    if n_units < 2:
        return math.nan, math.nan, n_units
    residual_sums = np.bincount(units, weights=diff - mean, minlength=n_all_units)
    # A sum of squares, not ``@``: a BLAS dot took 30-45 ms on 100,000 units with busy cores (its threads
    # wait for each other), this takes well under a millisecond.
    variance = n_units / (n_units - 1) * float(np.square(residual_sums).sum()) / diff.size**2
    # clustered's t quantile (within 1e-12 of scipy.special.stdtrit): importing scipy.special took 1.2 s
    # of a fresh process's first dashboard.
    half = _student_t_quantile(n_units - 1, confidence) * math.sqrt(variance)
    return mean - half, mean + half, n_units


def _near_share(near: np.ndarray, units: np.ndarray, n_all_units: int, clustered: bool, confidence: float) -> BandShare:
    n, k = int(near.size), int(near.sum())
    if n == 0:
        return BandShare(0, 0, math.nan, math.nan, math.nan, 0)
    per_unit = np.bincount(units, minlength=n_all_units)
    present = per_unit > 0
    n_units = int(np.count_nonzero(present))
    if clustered and n_units < n:
        hits = np.bincount(units, weights=near.astype(np.float64), minlength=n_all_units)[present]
        result = clustered_proportion(hits, per_unit[present], confidence)
        return BandShare(k, n, result.estimate, result.low, result.high, n_units)
    low, high = wilson_interval(k, n, confidence)
    return BandShare(k, n, k / n, low, high, n)


def _column_nanmedian(data: np.ndarray) -> np.ndarray:
    """``np.nanmedian(data, axis=0)`` of columns with at least one value, bit for bit, by one sort.

    NumPy takes the mean of the two middle values of the sorted valid ones as ``(low + high) / 2``
    (``numpy.ma.median``, which ``nanmedian`` uses along a short axis), as here; NaN sorts last.
    """
    ordered = np.sort(data, axis=0)
    n_valid = np.count_nonzero(~np.isnan(data), axis=0)
    columns = np.arange(data.shape[1])
    low = ordered[np.maximum((n_valid - 1) // 2, 0), columns]
    high = ordered[n_valid // 2, columns] if data.shape[0] else low
    with np.errstate(invalid="ignore", over="ignore"):  # -inf + inf is NaN, as in NumPy's
        return np.asarray((low + high) / 2.0, dtype=np.float64)


def agreement_by_band(
    reliability_data: npt.ArrayLike,
    *,
    n_tones: int,
    band_width: int | None = None,
    bands: Sequence[tuple[int, int]] | None = None,
    labelers: Sequence[object] | None = None,
    clusters: npt.ArrayLike | None = None,
    with_alpha: bool = True,
    alpha_min_units: int = 2,
    level_of_measurement: LevelOfMeasurement = "ordinal",
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    asymptotic_min_units: int = ASYMPTOTIC_MIN_UNITS,
) -> BandAgreement:
    """Near consensus, each labeler's signed bias and alpha in each tone band of the scale.

    Parameters
    ----------
    reliability_data : array_like, shape (n_labelers, n_items)
        Values on the scale (a tone 1..n_tones, or the midpoint of two adjacent tones), ``NaN`` for
        missing.
    n_tones : int
        Tones of the scale.
    band_width : int, optional
        Tones per band (default :func:`default_band_width`); ignored when ``bands`` is given.
    bands : sequence of (int, int), optional
        Explicit bands, inclusive tone ranges in order, e.g. ``[(1, 3), (4, 7), (8, 10)]``; tones in no
        band leave their images out.
    labelers : sequence, optional
        Labeler ids (default ``0..n_labelers-1``).
    clusters : array_like, shape (n_items,), optional
        The subject of each item: several photos of one person are resampled together (alpha), and the
        near-consensus and bias intervals are clustered by subject. Default: each item on its own.
    with_alpha : bool
        Compute alpha and its bootstrap (the costly part); False leaves ``alpha`` None.
    alpha_min_units : int
        Bands with fewer units (images, or subjects) get no alpha (``None``): a caller with a floor saves
        the bootstrap.
    level_of_measurement, n_resamples, confidence, seed
        As in :func:`~metrics.agreement.bootstrap_alpha`.
    asymptotic_min_units : int
        From this many units in a band on, alpha's interval is the delta method's
        (:func:`~metrics.agreement.alpha_intervals`); below, the BCa bootstrap's.

    Returns
    -------
    BandAgreement

    Examples
    --------
    Labeler 3 labels one tone deeper than the others on MST 8 and 9 only (12 of the 18 deep images):

    >>> truth = np.tile(np.arange(1, 11), 6)
    >>> deeper = np.where((truth == 8) | (truth == 9), truth + 1, truth)
    >>> data = np.vstack([truth, truth, truth, deeper]).astype(float)
    >>> result = agreement_by_band(data, n_tones=10, bands=[(1, 3), (4, 7), (8, 10)], with_alpha=False)
    >>> [(band.name, band.n_images) for band in result.bands]
    [('1-3', 18), ('4-7', 24), ('8-10', 18)]
    >>> [round(band.bias[3].mean_diff, 2) for band in result.bands]
    [0.0, 0.0, 0.67]
    >>> deep = result.bands[2].bias[3]
    >>> bool(deep.low > 0), round(result.bands[2].bias[0].mean_diff, 2)
    (True, -0.22)
    """
    _check_level(level_of_measurement)
    data = _as_reliability_data(reliability_data)
    if data.size == 0:
        data = np.zeros((0 if data.ndim != 2 else data.shape[0], 0))
    n_labelers, n_items = data.shape
    names = list(range(n_labelers)) if labelers is None else list(labelers)
    if len(names) != n_labelers:
        raise ValueError("labelers must have one entry per row of reliability_data.")
    edges = _check_bands(bands, n_tones) if bands is not None else tone_band_edges(n_tones, band_width)
    units, clustered = _units(clusters, n_items)
    n_all_units = int(units.max()) + 1 if units.size else 0

    present = ~np.isnan(data)
    n_valid = present.sum(axis=0)
    several = n_valid >= 2
    with np.errstate(all="ignore"):
        consensus = np.full(n_items, np.nan)
        if several.any():
            consensus[several] = round_half_up(_column_nanmedian(data[:, several]))
        # ``initial``: a phase with no labeler at all is (0, 0) and has nothing to reduce.
        highest = np.max(np.where(present, data, -np.inf), axis=0, initial=-np.inf)
        lowest = np.min(np.where(present, data, np.inf), axis=0, initial=np.inf)
        spread = np.where(several, highest - lowest, np.nan)
        total = np.where(present, data, 0.0).sum(axis=0)
        # The mean of the other labelers' values on each image, for each labeler (NaN without another).
        others_mean = (total[None, :] - np.where(present, data, 0.0)) / (n_valid[None, :] - present)
    near = several & (spread <= 1)
    # Each labeler's values that have another labeler's on their image (the bias's items, before the band).
    compared = present & several[None, :]

    results = []
    for low, high in edges:
        in_band = several & (consensus >= low) & (consensus <= high)
        band_units = units[in_band]
        n_units = int(np.count_nonzero(np.bincount(band_units, minlength=n_all_units)))
        alpha = None
        if with_alpha and n_units >= max(1, alpha_min_units):
            alpha = alpha_intervals(
                data[:, in_band],
                (level_of_measurement,),
                n_resamples=n_resamples,
                confidence=confidence,
                seed=seed,
                clusters=band_units if clustered else None,
                n_units=n_units,
                min_units=asymptotic_min_units,
            )[level_of_measurement]
        bias = []
        for position, name in enumerate(names):
            usable = in_band & compared[position]
            diff = data[position, usable] - others_mean[position, usable]
            lo, hi, g = _cluster_t_interval(diff, units[usable], n_all_units, confidence)
            bias.append(LabelerBandBias(name, int(diff.size), g, float(diff.mean()) if diff.size else math.nan, lo, hi))
        results.append(
            ToneBandAgreement(
                low=low,
                high=high,
                n_images=int(in_band.sum()),
                n_units=n_units,
                n_labels=int(present[:, in_band].sum()),
                near_consensus=_near_share(near[in_band], band_units, n_all_units, clustered, confidence),
                alpha=alpha,
                bias=tuple(bias),
            )
        )
    n_banded = int(several.sum())
    return BandAgreement(
        bands=tuple(results),
        n_images=n_banded,
        n_unbanded=int(((n_valid >= 1) & ~several).sum()),
        clustered=clustered,
        confidence=confidence,
        level_of_measurement=level_of_measurement,
    )


def agreement_by_band_long(
    images: npt.ArrayLike,
    labelers: npt.ArrayLike,
    values: npt.ArrayLike,
    *,
    subjects: npt.ArrayLike | None = None,
    n_tones: int,
    **options: object,
) -> BandAgreement:
    """:func:`agreement_by_band` from a long table: one row per label (image, labeler, value[, subject]).

    A labeler may label an image once (a second row for the same pair is an error); ``NaN`` values
    (skips) count as missing; ``subjects`` must give one subject per image. ``options`` go to
    :func:`agreement_by_band`.

    Examples
    --------
    >>> result = agreement_by_band_long(
    ...     ["a", "a", "b", "b", "c"], ["x", "y", "x", "y", "x"], [9, 10, 2, 2, 5], n_tones=10, with_alpha=False
    ... )
    >>> [(b.name, b.n_images, b.near_consensus.k) for b in result.bands if b.n_images]
    [('1-2', 1, 1), ('9-10', 1, 1)]
    >>> result.n_unbanded
    1
    """
    image = np.asarray(images).ravel()
    labeler = np.asarray(labelers).ravel()
    value = np.asarray(values, dtype=np.float64).ravel()
    if not image.size == labeler.size == value.size:
        raise ValueError("images, labelers and values must have the same length.")
    image_keys, image_code = np.unique(image, return_inverse=True)
    labeler_keys, labeler_code = np.unique(labeler, return_inverse=True)
    cell = image_code.ravel() * max(1, labeler_keys.size) + labeler_code.ravel()
    if np.unique(cell).size != cell.size:
        raise ValueError("a labeler labels an image at most once: (image, labeler) pairs must be unique.")
    data = np.full((labeler_keys.size, image_keys.size), np.nan)
    data[labeler_code.ravel(), image_code.ravel()] = value
    clusters = None
    if subjects is not None:
        subject = np.asarray(subjects).ravel()
        if subject.size != image.size:
            raise ValueError("subjects must have one entry per row.")
        first = np.full(image_keys.size, -1, dtype=np.intp)
        first[image_code.ravel()[::-1]] = np.arange(image.size)[::-1]
        clusters = subject[first]
        if np.any(subject != clusters[image_code.ravel()]):
            raise ValueError("each image needs one subject: an image's rows give different subjects.")
    return agreement_by_band(
        data,
        n_tones=n_tones,
        labelers=labeler_keys.tolist(),
        clusters=clusters,
        **options,  # type: ignore[arg-type]
    )
