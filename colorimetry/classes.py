"""ITA skin-colour classes and ITA -> Fitzpatrick type tables."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FITZPATRICK_ITA_CHARDON_CLASSES",
    "FITZPATRICK_ITA_GROH_2021_EMPIRICAL",
    "FITZPATRICK_ITA_KINYANJUI_2020",
    "ITA_CLASSES",
    "FitzpatrickMapping",
    "classify_ita",
    "fitzpatrick_from_ita",
]

#: ITA skin-colour classes of Chardon et al. (1991) [Chardon1991], as extended by
#: Del Bino et al. (2006) [DelBino2006] with "brown" and "dark": (exclusive lower bound,
#: class); a value belongs to the first class whose bound it exceeds.
ITA_CLASSES: tuple[tuple[float, str], ...] = (
    (55.0, "very_light"),
    (41.0, "light"),
    (28.0, "intermediate"),
    (10.0, "tan"),
    (-30.0, "brown"),
    (-math.inf, "dark"),
)


@dataclass(frozen=True)
class FitzpatrickMapping:
    """An ITA -> Fitzpatrick type table with its source.

    Attributes
    ----------
    name : str
        Short identifier stored with results.
    source : str
        Citation of the table.
    lower_bounds : tuple of (float, int)
        ``(exclusive lower ITA bound, Fitzpatrick type)`` in decreasing bound
        order; the last bound must be ``-inf``.
    """

    name: str
    source: str
    lower_bounds: tuple[tuple[float, int], ...]


#: ITA -> Fitzpatrick thresholds I > 55; II 41-55; III 28-41; IV 19-28;
#: V 10-19; VI <= 10: what the public code of Groh et al. (2021 [Groh2021], "Evaluating
#: deep neural networks trained on clinical images in dermatology with the
#: Fitzpatrick 17k dataset", CVPR Workshops; repository mattgroh/fitzpatrick17k)
#: labels as the mapping of Kinyanjui et al. (2020 [Kinyanjui2020], "Fairness of classifiers
#: across skin tones in dermatology", MICCAI). Groh et al. themselves report
#: results with empirical thresholds instead
#: (:data:`FITZPATRICK_ITA_GROH_2021_EMPIRICAL`). It splits the Chardon "tan"
#: class at 19 degrees and puts everything at or below 10 degrees into type VI.
#: The default here (name kept as ``kinyanjui2020`` so stored parameter sets
#: stay valid). ITA classes are not Fitzpatrick types: every table is an
#: estimate with its own source.
FITZPATRICK_ITA_KINYANJUI_2020 = FitzpatrickMapping(
    name="kinyanjui2020",
    source=(
        "thresholds 55/41/28/19/10, labelled Kinyanjui et al. 2020 (MICCAI) in the public code of "
        "Groh et al. 2021 (Fitzpatrick 17k, mattgroh/fitzpatrick17k); Groh et al. report results "
        "with empirical thresholds instead (groh2021_empirical)"
    ),
    lower_bounds=(
        (55.0, 1),
        (41.0, 2),
        (28.0, 3),
        (19.0, 4),
        (10.0, 5),
        (-math.inf, 6),
    ),
)

#: ITA -> Fitzpatrick with the empirical thresholds Groh et al. (2021,
#: Fitzpatrick 17k, CVPR Workshops) report their ITA results with:
#: I > 45; II 28-45; III 17-28; IV 5-17; V -20-5; VI <= -20.
FITZPATRICK_ITA_GROH_2021_EMPIRICAL = FitzpatrickMapping(
    name="groh2021_empirical",
    source="empirical thresholds 45/28/17/5/-20 of Groh et al. 2021 (Fitzpatrick 17k, CVPR Workshops)",
    lower_bounds=(
        (45.0, 1),
        (28.0, 2),
        (17.0, 3),
        (5.0, 4),
        (-20.0, 5),
        (-math.inf, 6),
    ),
)

#: One Fitzpatrick type per Chardon/Del Bino ITA class (very light -> I, ...,
#: dark -> VI), a one-to-one reading common in public code. Offered for
#: comparison; Del Bino & Bernerd (2013) [DelBinoBernerd2013] stress that ITA classes and
#: phototypes are related but not equivalent.
FITZPATRICK_ITA_CHARDON_CLASSES = FitzpatrickMapping(
    name="chardon_classes",
    source=("Chardon et al. 1991 / Del Bino et al. 2006 ITA classes, read one class per Fitzpatrick type"),
    lower_bounds=tuple((bound, index + 1) for index, (bound, _label) in enumerate(ITA_CLASSES)),
)


def classify_ita(ita: float | None, classes: Sequence[tuple[float, str]] = ITA_CLASSES) -> str | None:
    """ITA skin-colour class (Chardon 1991 / Del Bino 2006).

    Parameters
    ----------
    ita : float or None
        ITA in degrees.
    classes : sequence of (float, str)
        ``(exclusive lower bound, label)`` pairs in decreasing bound order.

    Returns
    -------
    str or None
        ``very_light`` (> 55), ``light`` (41-55], ``intermediate`` (28-41],
        ``tan`` (10-28], ``brown`` (-30-10], ``dark`` (<= -30); ``None`` for
        an undefined ITA.

    Examples
    --------
    >>> classify_ita(50.32), classify_ita(-30.0)
    ('light', 'dark')
    """
    label: str | None = _lookup(ita, classes)
    return label


def fitzpatrick_from_ita(
    ita: float | None,
    mapping: FitzpatrickMapping | Sequence[tuple[float, int]] = FITZPATRICK_ITA_KINYANJUI_2020,
) -> int | None:
    """Fitzpatrick type estimated from ITA with a configurable table.

    Published ITA -> Fitzpatrick tables disagree; the table used is recorded
    in the results' ``parameters``.

    Parameters
    ----------
    ita : float or None
        ITA in degrees.
    mapping : FitzpatrickMapping or sequence of (float, int)
        Table of ``(exclusive lower ITA bound, type)`` in decreasing bound
        order. Default :data:`FITZPATRICK_ITA_KINYANJUI_2020`.

    Returns
    -------
    int or None
        Fitzpatrick type (1-6 with the built-in tables), ``None`` for an
        undefined ITA.

    Examples
    --------
    >>> fitzpatrick_from_ita(50.32), fitzpatrick_from_ita(15.0)
    (2, 5)
    >>> fitzpatrick_from_ita(15.0, FITZPATRICK_ITA_CHARDON_CLASSES)
    4
    >>> fitzpatrick_from_ita(15.0, FITZPATRICK_ITA_GROH_2021_EMPIRICAL)
    4
    """
    bounds = mapping.lower_bounds if isinstance(mapping, FitzpatrickMapping) else mapping
    found: int | None = _lookup(ita, bounds)
    return found


def _lookup(value: float | None, table: Sequence[tuple[float, Any]]) -> Any:
    if value is None or not math.isfinite(value):
        return None
    for bound, label in table:
        if value > bound:
            return label
    return table[-1][1]
