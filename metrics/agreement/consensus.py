"""Per-image aggregation of selections (one tone, two adjacent tones, or a skip)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from .distributions import _unique_counts

__all__ = [
    "ImageConsensus",
    "Selection",
    "consensus_table",
    "image_consensus",
    "selection_values",
    "selections_to_arrays",
]

#: One labeler's selection on one image: a tone, a sequence of tones, or ``None`` (a skip).
Selection = int | Sequence[int] | None


@dataclass(frozen=True)
class ImageConsensus:
    """Aggregate of all labelers' selections on one image.

    A selection is one tone, two adjacent tones (value: their midpoint), or a
    skip (no value). Two non-adjacent tones are an invalid annotation (no
    value). Statistics use the valid values only; consensus fields need at least
    two valid selections and are ``False`` otherwise.

    Attributes
    ----------
    values : tuple of float
        One per labeler; ``NaN`` for a skip or an invalid selection.
    valid_values : tuple of float
        The non-NaN ``values``, in labeler order.
    n_labels : int
        Labelers who selected something (valid or not).
    n_valid : int
        Valid selections.
    mean, std, median : float
        Of the valid values; ``std`` is the population standard deviation
        (``ddof=0``). ``NaN`` if there is no valid value.
    mode : float
        Most frequent valid value; ties go to the lowest value. ``NaN`` if none.
    mode_count : int
        How many labelers gave ``mode`` (the largest group agreeing exactly).
    min, max, range : float
        Of the valid values (``range = max - min``); ``NaN`` if none.
    complete_consensus : bool
        At least two valid selections, all identical (same tone or same pair).
    overlap_consensus : bool
        At least two valid selections sharing at least one tone.
    near_consensus : bool
        At least two valid values, all within one tone (``max - min <= 1``).
    n_unique_values : int
        Distinct valid values.
    n_connected_groups : int
        Runs of consecutive tones among all the tones the labelers selected,
        invalid selections included (an invalid selection contributes its
        lowest and its highest tone, not the tones between); 0 if nobody
        selected anything. This reproduces both worked examples of the public
        data card (DOMAIN.md section 2): [mid-deep+deep, mid-deep+deep,
        mid-deep, mid-deep] covers mid-deep and deep, 1 group; [light+deep
        (invalid), mid-light+medium, light] covers light, mid-light, medium and
        deep, 2 groups (light..medium, deep). Counting only the valid
        selections would give 1 for the second example. The card's two
        examples do not pin the rule down completely (joining valid values
        less than one tone apart also gives 1 and 2); this one counts what the
        labelers pointed at on the scale.
    any_uncertainty : bool
        Some labeler set the uncertain flag.
    has_invalid_annotation : bool
        Some labeler selected two non-adjacent tones.
    wide_range : bool
        ``range >= wide_range`` tones (parameter of ``image_consensus``).
    flags : tuple of str
        Review flags: ``"wide_range"`` and/or ``"invalid"`` (an invalid
        annotation).
    """

    values: tuple[float, ...]
    valid_values: tuple[float, ...]
    n_labels: int
    n_valid: int
    mean: float
    std: float
    median: float
    mode: float
    mode_count: int
    min: float
    max: float
    range: float
    complete_consensus: bool
    overlap_consensus: bool
    near_consensus: bool
    n_unique_values: int
    n_connected_groups: int
    any_uncertainty: bool
    has_invalid_annotation: bool
    wide_range: bool
    flags: tuple[str, ...]


def _tones(selection: Selection) -> tuple[int, ...]:
    if selection is None:
        return ()
    if isinstance(selection, int | np.integer):
        return (int(selection),)
    return tuple(sorted({int(tone) for tone in selection}))


def _connected_groups(tones: set[int]) -> int:
    """Runs of consecutive integers in ``tones`` (0 for none)."""
    ordered = sorted(tones)
    return (1 + sum(1 for a, b in itertools.pairwise(ordered) if b - a > 1)) if ordered else 0


def image_consensus(
    selections: Sequence[Selection],
    uncertain: Sequence[bool] | None = None,
    *,
    wide_range: float = 3,
) -> ImageConsensus:
    """Aggregate the labelers' selections on one image (data-card fields).

    Parameters
    ----------
    selections : sequence
        One entry per labeler: ``None`` or ``()`` for a skip, a tone number, or
        a sequence of one or two tone numbers (two adjacent tones when the
        labeler was unsure between them; non-adjacent pairs and more than two
        tones are invalid).
    uncertain : sequence of bool, optional
        Each labeler's uncertain flag.
    wide_range : float
        Raise the ``wide_range`` flag when ``max - min >= wide_range`` tones.
        The default 3 is this project's choice (seed 000 gives no threshold).

    Returns
    -------
    ImageConsensus
        See its attributes for the definitions.

    Examples
    --------
    >>> result = image_consensus([(4, 5), 5, 4, None])  # mid-deep+deep, ...
    >>> result.values[0], result.mean, result.near_consensus, result.n_connected_groups
    (4.5, 4.5, True, 1)

    The data card's two worked examples (5-tone scale, 0-based: light 0,
    mid-light 1, medium 2, mid-deep 3, deep 4):

    >>> typical = image_consensus([(3, 4), (3, 4), 3, 3])
    >>> typical.valid_values, typical.mean, typical.std, typical.n_connected_groups
    ((3.5, 3.5, 3.0, 3.0), 3.25, 0.25, 1)
    >>> typical.overlap_consensus, typical.near_consensus
    (True, True)
    >>> atypical = image_consensus([(0, 4), (1, 2), 0])
    >>> atypical.valid_values, atypical.mean, atypical.n_connected_groups, atypical.has_invalid_annotation
    ((1.5, 0.0), 0.75, 2, True)
    >>> atypical.overlap_consensus, atypical.near_consensus
    (False, False)
    """
    values: list[float] = []
    valid_tones: list[tuple[int, ...]] = []
    selected_ends: set[int] = set()  # lowest and highest tone of every selection
    n_labels = 0
    has_invalid = False
    for selection in selections:
        tones = _tones(selection)
        if not tones:
            values.append(math.nan)
            continue
        n_labels += 1
        selected_ends.update((tones[0], tones[-1]))
        if len(tones) == 1 or (len(tones) == 2 and tones[1] - tones[0] == 1):
            values.append(sum(tones) / len(tones))
            valid_tones.append(tones)
        else:
            values.append(math.nan)
            has_invalid = True
    valid = [value for value in values if not math.isnan(value)]
    n_valid = len(valid)
    nan = math.nan
    if valid:
        array = np.asarray(valid)
        unique, frequency = np.unique(array, return_counts=True)
        best = int(np.argmax(frequency))  # first maximum = lowest value
        mean, std, median = (
            float(array.mean()),
            float(array.std()),
            float(np.median(array)),
        )
        mode, mode_count = float(unique[best]), int(frequency[best])
        low, high = float(array.min()), float(array.max())
    else:
        mean = std = median = mode = low = high = nan
        mode_count, unique = 0, np.empty(0)
    groups = _connected_groups(selected_ends)
    spread = high - low
    several = n_valid >= 2
    complete = several and all(tones == valid_tones[0] for tones in valid_tones)
    overlap = several and bool(set.intersection(*(set(t) for t in valid_tones)))
    near = several and spread <= 1
    is_wide = bool(valid) and spread >= wide_range
    flags = tuple(name for name, raised in (("wide_range", is_wide), ("invalid", has_invalid)) if raised)
    return ImageConsensus(
        values=tuple(values),
        valid_values=tuple(valid),
        n_labels=n_labels,
        n_valid=n_valid,
        mean=mean,
        std=std,
        median=median,
        mode=mode,
        mode_count=mode_count,
        min=low,
        max=high,
        range=spread,
        complete_consensus=complete,
        overlap_consensus=overlap,
        near_consensus=near,
        n_unique_values=len(unique),
        n_connected_groups=groups,
        any_uncertainty=bool(uncertain is not None and any(uncertain)),
        has_invalid_annotation=has_invalid,
        wide_range=is_wide,
        flags=flags,
    )


def selections_to_arrays(
    selections: Sequence[Sequence[Selection]],
) -> tuple[np.ndarray, np.ndarray]:
    """Convert per-image selection lists to the arrays of ``consensus_table``.

    Parameters
    ----------
    selections : sequence of sequences
        ``selections[image][labeler]`` as in ``image_consensus``; images may
        have different numbers of labelers (padded with skips).

    Returns
    -------
    first_tone, second_tone : ndarray, shape (n_images, n_labelers)
        Lowest and highest selected tone; ``NaN`` for a skip; ``second_tone`` is
        ``NaN`` for a single tone. A selection of more than two tones is encoded
        as (lowest, highest), which ``consensus_table`` treats as invalid.

    Examples
    --------
    >>> selections_to_arrays([[3, (3, 4)], [None, 2]])[1].tolist()
    [[nan, 4.0], [nan, nan]]
    """
    n_images = len(selections)
    n_labelers = max((len(row) for row in selections), default=0)
    first = np.full((n_images, n_labelers), np.nan)
    second = np.full((n_images, n_labelers), np.nan)
    for image, row in enumerate(selections):
        for labeler, selection in enumerate(row):
            tones = _tones(selection)
            if tones:
                first[image, labeler] = tones[0]
                if len(tones) > 1:
                    # Three or more tones are invalid; a gap >= 2 marks them so.
                    second[image, labeler] = tones[-1] if len(tones) == 2 else max(tones[-1], tones[0] + 2)
    return first, second


def selection_values(first_tone: npt.ArrayLike, second_tone: npt.ArrayLike | None = None) -> np.ndarray:
    """Numeric value of each selection (``NaN`` for a skip or invalid pair).

    Parameters
    ----------
    first_tone, second_tone : array_like
        As returned by ``selections_to_arrays`` (same shape; ``second_tone``
        ``NaN`` or equal to ``first_tone`` for a single tone).

    Returns
    -------
    ndarray
        The tone, the midpoint of two adjacent tones, or ``NaN``. Transpose an
        images x labelers result to get ``reliability_data`` for alpha.

    Examples
    --------
    >>> selection_values([[3, 4, 1]], [[4, np.nan, 3]]).tolist()
    [[3.5, 4.0, nan]]
    """
    first = np.asarray(first_tone, dtype=np.float64)
    second = first if second_tone is None else np.asarray(second_tone, dtype=np.float64)
    second = np.where(np.isnan(second), first, second)
    low, high = np.fmin(first, second), np.fmax(first, second)
    valid = ~np.isnan(first) & (high - low <= 1)
    return np.where(valid, (low + high) / 2, np.nan)


def _row_extreme(matrix: np.ndarray, pick: np.ufunc, initial: float) -> np.ndarray:
    """Each row's maximum (``np.maximum``) or minimum (``np.minimum``) from ``initial``, column by column
    (``matrix.max(axis=1, initial=initial)`` reduces a short row several times slower); no NaN."""
    out = np.full(matrix.shape[0], initial)
    for column in range(matrix.shape[1]):
        pick(out, matrix[:, column], out=out)
    return out


def consensus_table(
    first_tone: npt.ArrayLike,
    second_tone: npt.ArrayLike | None = None,
    uncertain: npt.ArrayLike | None = None,
    *,
    wide_range: float = 3,
    index: Sequence[object] | pd.Index | None = None,
) -> pd.DataFrame:
    """Vectorised ``image_consensus`` for many images.

    Parameters
    ----------
    first_tone : array_like, shape (n_images, n_labelers)
        First (or only) selected tone, ``NaN`` for a skip.
    second_tone : array_like, shape (n_images, n_labelers), optional
        Second selected tone, ``NaN`` when a single tone was selected.
    uncertain : array_like of bool, shape (n_images, n_labelers), optional
        Uncertain flags.
    wide_range : float
        Threshold of the ``wide_range`` flag, in tones.
    index : sequence, optional
        Image ids for the result's index.

    Returns
    -------
    pandas.DataFrame
        One row per image, columns ``n_labels``, ``n_valid``, ``mean``, ``std``,
        ``median``, ``mode``, ``mode_count``, ``min``, ``max``, ``range``,
        ``complete_consensus``, ``overlap_consensus``, ``near_consensus``,
        ``n_unique_values``, ``n_connected_groups``, ``any_uncertainty``,
        ``has_invalid_annotation``, ``wide_range``, ``invalid`` (same
        definitions as ``ImageConsensus``; ``invalid`` is
        ``has_invalid_annotation`` as a review flag).

    Examples
    --------
    >>> first, second = selections_to_arrays([[(4, 5), 5, 4], [1, 4, (2, 5)]])
    >>> consensus_table(first, second)[["mean", "near_consensus", "wide_range"]]
       mean  near_consensus  wide_range
    0   4.5            True       False
    1   2.5           False        True
    """
    first = np.atleast_2d(np.asarray(first_tone, dtype=np.float64))
    second = (
        np.full_like(first, np.nan) if second_tone is None else np.atleast_2d(np.asarray(second_tone, dtype=np.float64))
    )
    if second.shape != first.shape:
        raise ValueError("first_tone and second_tone must have the same shape.")
    n_images = first.shape[0]
    second = np.where(np.isnan(second), first, second)
    low, high = np.fmin(first, second), np.fmax(first, second)
    selected = ~np.isnan(first)
    valid = selected & (high - low <= 1)
    values = np.where(valid, (low + high) / 2, np.nan)
    n_valid = valid.sum(axis=1)
    has_any = n_valid > 0
    several = n_valid >= 2

    ordered = np.sort(values, axis=1)  # NaN last
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.where(valid, values, 0.0).sum(axis=1)
        mean = np.where(has_any, total / np.maximum(n_valid, 1), np.nan)
        squares = np.where(valid, (values - mean[:, None]) ** 2, 0.0).sum(axis=1)
        std = np.where(has_any, np.sqrt(squares / np.maximum(n_valid, 1)), np.nan)
    rows = np.arange(n_images)
    lower_mid = np.maximum((n_valid - 1) // 2, 0)
    upper_mid = np.minimum(n_valid // 2, max(first.shape[1] - 1, 0))
    if first.shape[1]:
        median = np.where(has_any, (ordered[rows, lower_mid] + ordered[rows, upper_mid]) / 2, np.nan)
        minimum = np.where(has_any, ordered[:, 0], np.nan)
        maximum = np.where(has_any, ordered[rows, np.maximum(n_valid - 1, 0)], np.nan)
        # How many of the image's values equal each one (NaN equals nothing): column by column, the same
        # whole numbers as ``(ordered[:, :, None] == ordered[:, None, :]).sum(axis=2)`` without the cube.
        equal_counts = np.zeros(ordered.shape, dtype=np.int64)
        for column in range(ordered.shape[1]):
            for other in range(ordered.shape[1]):
                equal_counts[:, column] += ordered[:, column] == ordered[:, other]
        best = np.argmax(equal_counts, axis=1)  # first maximum = lowest value
        mode = np.where(has_any, ordered[rows, best], np.nan)
        mode_count = equal_counts[rows, best]
    else:
        median = minimum = maximum = mode = np.full(n_images, np.nan)
        mode_count = np.zeros(n_images, dtype=np.int64)
    spread = maximum - minimum

    big = np.inf
    # The valid selections' largest and smallest ends per image (each computed once; the values are only
    # compared, so the order a row is reduced in cannot change a flag).
    highest_low = _row_extreme(np.where(valid, low, -big), np.maximum, -big)
    lowest_low = _row_extreme(np.where(valid, low, big), np.minimum, big)
    highest_high = _row_extreme(np.where(valid, high, -big), np.maximum, -big)
    lowest_high = _row_extreme(np.where(valid, high, big), np.minimum, big)
    complete = several & (highest_low == lowest_low) & (highest_high == lowest_high)
    # Selections are intervals of consecutive tones: they share a tone iff the
    # largest lower end is at most the smallest upper end.
    overlap = several & (highest_low <= lowest_high)
    with np.errstate(invalid="ignore"):
        near = several & (spread <= 1)
        is_wide = has_any & (spread >= wide_range)

    # Connected groups: mark the lowest and highest tone of every selection
    # (invalid ones included; a valid pair's two tones are adjacent), count runs.
    if selected.any():
        offset = int(np.nanmin(low[selected]))
        width = int(np.nanmax(high[selected])) - offset + 1
        covered = np.zeros((n_images, width), dtype=bool)
        image_idx = np.broadcast_to(rows[:, None], first.shape)[selected]
        covered[image_idx, low[selected].astype(np.int64) - offset] = True
        covered[image_idx, high[selected].astype(np.int64) - offset] = True
        starts = covered.copy()
        starts[:, 1:] &= ~covered[:, :-1]
        groups = starts.sum(axis=1)
    else:
        groups = np.zeros(n_images, dtype=np.int64)

    invalid = (selected & ~valid).any(axis=1)
    any_uncertain = (
        np.zeros(n_images, dtype=bool)
        if uncertain is None
        else np.atleast_2d(np.asarray(uncertain, dtype=bool)).any(axis=1)
    )
    return pd.DataFrame(
        {
            "n_labels": selected.sum(axis=1),
            "n_valid": n_valid,
            "mean": mean,
            "std": std,
            "median": median,
            "mode": mode,
            "mode_count": np.where(has_any, mode_count, 0),
            "min": minimum,
            "max": maximum,
            "range": spread,
            "complete_consensus": complete,
            "overlap_consensus": overlap,
            "near_consensus": near,
            "n_unique_values": _unique_counts(ordered),
            "n_connected_groups": groups,
            "any_uncertainty": any_uncertain,
            "has_invalid_annotation": invalid,
            "wide_range": is_wide,
            "invalid": invalid,
        },
        index=None if index is None else pd.Index(index),
    )
