"""Final skin tone per image of a dataset release, from per-label arrays (vectorised).

A release has one row per label (image, selected tones, uncertain flag); this
module reduces them to one final tone per image plus the data-card fields, with
NumPy only and no Python loop per image: the valid labels are sorted once by
(image, value) and every per-image quantity is a ``bincount``, a ``reduceat``
or a comparison of neighbours in that order.

Values are handled as *twice the value* (an integer: tone ``t`` -> ``2t``, the
adjacent pair ``t, t+1`` -> ``2t + 1``), so that equality, sorting and the
mode's "nearest the mean" tie rule are exact.

The consensus fields have the definitions of
:func:`metrics.agreement.image_consensus` (the property test of
``tests/metrics/test_finalise.py`` compares them image by image), vectorised:

* a valid selection is the tone interval ``[v2 // 2, (v2 + 1) // 2]``, and both
  ends grow with ``v2``; so in value order the selections of an image share a
  tone iff the lower end of the largest value is at most the upper end of the
  smallest (``overlap_consensus``), they are identical iff there is one distinct
  value (``complete_consensus``);
* ``n_connected_groups`` counts runs of consecutive tones among the lowest and
  highest tone of every selection, invalid pairs included (the public data
  card's atypical example, light+deep invalid, mid-light+medium, light, has 2).
"""

from __future__ import annotations

import operator

import numpy as np
import numpy.typing as npt

from .rounding import round_half_up

__all__ = ["AGGREGATIONS", "TIE_RULES", "final_tones"]

#: How ``final_value`` is chosen from an image's valid values.
AGGREGATIONS = ("mean", "median", "mode")
#: How a mode tie is broken: the lighter (lower) value, the deeper (higher)
#: value, or the tied value nearest the mean (then the lower one).
TIE_RULES = ("lower", "higher", "nearest_mean")

#: Largest tone position accepted (keeps the integer arithmetic exact).
_MAX_TONE = 2**20


def _int_array(name: str, values: npt.ArrayLike) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array, got {array.ndim} dimensions.")
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    if array.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integers, got dtype {array.dtype}.")
    if array.dtype.kind == "u" and array.max() > np.iinfo(np.int64).max:
        raise ValueError(f"{name} holds values too large for int64.")
    return array.astype(np.int64, copy=False)


def _bool_array(name: str, values: npt.ArrayLike) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array, got {array.ndim} dimensions.")
    if array.size == 0:
        return np.zeros(0, dtype=bool)
    if array.dtype.kind == "b":
        return array
    if array.dtype.kind in "iu" and np.isin(array, (0, 1)).all():
        return array.astype(bool)
    raise ValueError(f"{name} must hold booleans (or 0/1), got dtype {array.dtype}.")


def _validated(
    image_index: npt.ArrayLike,
    low: npt.ArrayLike,
    high: npt.ArrayLike,
    uncertain: npt.ArrayLike,
    n_images: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    try:
        n_images = operator.index(n_images)
    except TypeError:
        raise ValueError(f"n_images must be an integer, got {n_images!r}.") from None
    if n_images < 0:
        raise ValueError(f"n_images must be >= 0, got {n_images}.")
    image = _int_array("image_index", image_index)
    low_ = _int_array("low", low)
    high_ = _int_array("high", high)
    flags = _bool_array("uncertain", uncertain)
    lengths = {len(image), len(low_), len(high_), len(flags)}
    if len(lengths) != 1:
        raise ValueError(
            "image_index, low, high and uncertain must have the same length, got "
            f"{len(image)}, {len(low_)}, {len(high_)} and {len(flags)}."
        )
    if image.size:
        if image.min() < 0 or image.max() >= n_images:
            raise ValueError(f"image_index must be in [0, n_images) = [0, {n_images}).")
        if low_.min() < 0 or high_.min() < 0:
            raise ValueError("low and high must be >= 0 (0: skipped label / single tone).")
        if max(low_.max(), high_.max()) > _MAX_TONE:
            raise ValueError(f"tone positions above {_MAX_TONE} are not supported.")
        if ((low_ == 0) & (high_ != 0)).any():
            raise ValueError("a skipped label (low == 0) must have high == 0.")
        if ((high_ != 0) & (high_ <= low_)).any():
            raise ValueError("high must be 0 (single tone) or greater than low.")
    return image, low_, high_, flags, n_images


def _sorted_valid(image: np.ndarray, twice: np.ndarray, n_images: int) -> tuple[np.ndarray, np.ndarray]:
    """The valid labels' images and doubled values, sorted by (image, value)."""
    if twice.size == 0:
        return image, twice
    width = int(twice.max()) + 1
    if n_images * width < 2**62:
        key = np.sort(image * width + twice)
        return key // width, key % width
    order = np.lexsort((twice, image))
    return image[order], twice[order]


def final_tones(
    image_index: npt.ArrayLike,
    low: npt.ArrayLike,
    high: npt.ArrayLike,
    uncertain: npt.ArrayLike,
    *,
    n_images: int,
    aggregation: str = "mean",
    tie: str = "lower",
) -> dict[str, np.ndarray]:
    """Final tone and data-card fields of every image, from one entry per label.

    A label is one tone (``high == 0``), two adjacent tones (``high == low + 1``,
    value ``low + 0.5``), an invalid pair (``high > low + 1``: counted in
    ``n_labels`` and ``has_invalid_annotation``, no value) or a skip
    (``low == 0``: counted in ``n_skipped`` only).

    Parameters
    ----------
    image_index : array_like of int, shape (n_labels,)
        Image of each label, in ``[0, n_images)``; any order.
    low : array_like of int, shape (n_labels,)
        Selected tone position (1-based), ``0`` for a skipped label.
    high : array_like of int, shape (n_labels,)
        ``0`` for a single tone, else the second selected tone (``> low``).
    uncertain : array_like of bool, shape (n_labels,)
        The labeler's uncertain flag.
    n_images : int
        Number of images (length of every output array); images without a
        label get the empty values below.
    aggregation : {"mean", "median", "mode"}
        Which statistic is ``final_value``.
    tie : {"lower", "higher", "nearest_mean"}
        How a mode tie is broken (for ``mode`` and a ``"mode"`` aggregation):
        the lowest (lightest) tied value, the highest (deepest), or the tied
        value nearest the mean (then the lower one). ``"lower"`` is the rule of
        :func:`metrics.agreement.image_consensus`.

    Returns
    -------
    dict of str to numpy.ndarray
        Arrays of length ``n_images``:

        * ``n_labels`` (non-skipped labels, invalid ones included), ``n_valid``,
          ``n_skipped``, ``n_uncertain`` (non-skipped labels flagged uncertain):
          int64;
        * ``mean``, ``median``, ``mode``, ``std`` (population, ``ddof=0``),
          ``min``, ``max``, ``final_value``: float64 over the valid values,
          ``NaN`` without a valid value; ``mode_count``: int64, 0 without one;
        * ``final_tone``: int64, ``final_value`` rounded half up
          (:func:`metrics.rounding.round_half_up`), ``-1`` without a valid value;
        * ``complete_consensus``, ``overlap_consensus``, ``near_consensus``,
          ``any_uncertainty``, ``has_invalid_annotation``: bool;
          ``n_unique_values``, ``n_connected_groups``: int64; the values of
          :func:`metrics.agreement.image_consensus` for the image's labels
          (so ``any_uncertainty`` also sees a skipped label's flag, unlike
          ``n_uncertain``).

    Raises
    ------
    ValueError
        Arrays not 1-D, of different lengths or of the wrong kind; an image
        index outside ``[0, n_images)``; a negative tone, ``high`` neither 0
        nor above ``low``, a skip with a ``high``; an unknown ``aggregation``
        or ``tie``.

    Examples
    --------
    The data card's typical example (mid-deep = 4, deep = 5): mid-deep+deep
    twice, mid-deep twice.

    >>> typical = final_tones([0, 0, 0, 0], [4, 4, 4, 4], [5, 5, 0, 0], [False] * 4, n_images=1)
    >>> [typical[name].tolist() for name in ("mean", "std", "median", "final_tone")]
    [[4.25], [0.25], [4.25], [4]]
    >>> [typical[name].tolist() for name in ("complete_consensus", "overlap_consensus", "near_consensus")]
    [[False], [True], [True]]
    >>> typical["n_connected_groups"].tolist(), typical["mode"].tolist(), typical["mode_count"].tolist()
    ([1], [4.0], [2])

    The atypical example: light+deep (invalid), mid-light+medium, light.

    >>> atypical = final_tones([0, 0, 0], [1, 2, 1], [5, 3, 0], [False, False, True], n_images=1)
    >>> atypical["n_labels"].tolist(), atypical["n_valid"].tolist(), atypical["mean"].tolist()
    ([3], [2], [1.75])
    >>> [atypical[name].tolist() for name in ("overlap_consensus", "near_consensus", "has_invalid_annotation")]
    [[False], [False], [True]]
    >>> atypical["n_connected_groups"].tolist()
    [2]

    Unsorted labels, a skip, an image without labels; the mode by each tie
    rule when image 0 has values 3, 3.5 and image 2 has 2, 3, 2, 3, 4 (mean 2.8):

    >>> images, low = [2, 0, 2, 2, 0, 2, 2, 2], [2, 3, 3, 0, 3, 2, 3, 4]
    >>> high, flags = [0, 0, 0, 0, 4, 0, 0, 0], [False] * 8
    >>> [final_tones(images, low, high, flags, n_images=3, aggregation="mode", tie=rule)["final_tone"].tolist()
    ...  for rule in TIE_RULES]
    [[3, -1, 2], [4, -1, 3], [3, -1, 3]]
    >>> final_tones(images, low, high, flags, n_images=3)["n_skipped"].tolist()
    [0, 0, 1]
    """
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}.")
    if tie not in TIE_RULES:
        raise ValueError(f"tie must be one of {TIE_RULES}, got {tie!r}.")
    image, low_, high_, flags, n_images = _validated(image_index, low, high, uncertain, n_images)

    def count(mask: np.ndarray) -> np.ndarray:
        return np.bincount(image[mask], minlength=n_images).astype(np.int64, copy=False)

    selected = low_ > 0
    pair = high_ > 0
    adjacent = high_ == low_ + 1
    valid = selected & (~pair | adjacent)
    n_valid = count(valid)
    has = n_valid > 0
    several = n_valid >= 2

    # Valid labels sorted by (image, doubled value); each image's labels are the
    # slice first[i] : first[i] + n_valid[i].
    s_image, s_twice = _sorted_valid(image[valid], np.where(pair, low_ + high_, 2 * low_)[valid], n_images)
    first = np.cumsum(n_valid) - n_valid
    starts, sizes = first[has], n_valid[has]
    twice_sum = np.zeros(n_images, dtype=np.int64)
    twice_min = np.zeros(n_images, dtype=np.int64)
    twice_max = np.zeros(n_images, dtype=np.int64)
    if s_twice.size:
        twice_sum[has] = np.add.reduceat(s_twice, starts)
        twice_min[has] = s_twice[starts]
        twice_max[has] = s_twice[starts + sizes - 1]

    def per_image(values: np.ndarray) -> np.ndarray:
        out = np.full(n_images, np.nan)
        out[has] = values
        return out

    mean = per_image(twice_sum[has] / (2 * sizes))
    deviation = s_twice / 2 - mean[s_image]
    std = per_image(np.sqrt(np.bincount(s_image, weights=deviation * deviation, minlength=n_images)[has] / sizes))
    if s_twice.size:
        median = per_image((s_twice[starts + (sizes - 1) // 2] + s_twice[starts + sizes // 2]) / 4)
    else:
        median = per_image(np.zeros(0))
    minimum, maximum = per_image(twice_min[has] / 2), per_image(twice_max[has] / 2)

    # Runs of equal (image, value): the distinct values of each image, in order.
    new_run = np.ones(s_twice.size, dtype=bool)
    new_run[1:] = (s_image[1:] != s_image[:-1]) | (s_twice[1:] != s_twice[:-1])
    run_start = np.flatnonzero(new_run)
    run_length = np.diff(np.append(run_start, s_twice.size))
    run_image, run_twice = s_image[run_start], s_twice[run_start]
    n_unique = np.bincount(run_image, minlength=n_images).astype(np.int64, copy=False)

    mode_count = np.zeros(n_images, dtype=np.int64)
    mode_twice = np.zeros(n_images, dtype=np.int64)
    if run_start.size:
        run_first = np.cumsum(n_unique) - n_unique
        mode_count[has] = np.maximum.reduceat(run_length, run_first[has])
        tied = np.flatnonzero(run_length == mode_count[run_image])  # by image, then value
        tied_image, tied_twice = run_image[tied], run_twice[tied]
        if tie == "nearest_mean":
            # |value - mean| * 2 n, exact in integers; keep the nearest, then the first (lowest).
            distance = np.abs(n_valid[tied_image] * tied_twice - twice_sum[tied_image])
            nearest = np.full(n_images, np.iinfo(np.int64).max)
            np.minimum.at(nearest, tied_image, distance)
            keep = distance == nearest[tied_image]
            tied_image, tied_twice = tied_image[keep], tied_twice[keep]
        boundary = np.ones(tied_image.size, dtype=bool)
        if tie == "higher":
            boundary[:-1] = tied_image[1:] != tied_image[:-1]  # last of each image
        else:
            boundary[1:] = tied_image[1:] != tied_image[:-1]  # first of each image
        mode_twice[tied_image[boundary]] = tied_twice[boundary]
    mode = per_image(mode_twice[has] / 2)

    # Connected groups: runs of consecutive tones among the lowest and highest tone
    # of every selection, invalid pairs included (image_consensus's definition).
    tone_image = np.concatenate([image[selected], image[pair]])
    tone = np.concatenate([low_[selected], high_[pair]]).astype(np.int64)
    n_groups = np.zeros(n_images, dtype=np.int64)
    if tone.size:
        span = int(tone.max()) + 2
        keys = np.unique(tone_image.astype(np.int64) * span + tone)
        key_image, key_tone = keys // span, keys % span
        group_start = np.ones(keys.size, dtype=bool)
        group_start[1:] = (key_image[1:] != key_image[:-1]) | (key_tone[1:] - key_tone[:-1] > 1)
        n_groups = np.bincount(key_image[group_start], minlength=n_images).astype(np.int64, copy=False)

    final_value = {"mean": mean, "median": median, "mode": mode}[aggregation]
    final_tone = np.where(has, round_half_up(final_value), -1).astype(np.int64)

    return {
        "n_labels": count(selected),
        "n_valid": n_valid,
        "n_skipped": count(~selected),
        "n_uncertain": count(selected & flags),
        "mean": mean,
        "median": median,
        "mode": mode,
        "mode_count": mode_count,
        "std": std,
        "min": minimum,
        "max": maximum,
        "final_value": final_value.copy(),
        "final_tone": final_tone,
        "complete_consensus": several & (n_unique == 1),
        "overlap_consensus": several & (twice_max // 2 <= (twice_min + 1) // 2),
        "near_consensus": several & (twice_max - twice_min <= 2),
        "n_unique_values": n_unique,
        "n_connected_groups": n_groups,
        "any_uncertainty": count(flags) > 0,
        "has_invalid_annotation": count(pair & ~adjacent) > 0,
    }
