"""How well the automatic skin detector measures each Monk tone: the stored evaluation figures.

``skin_evaluation.json`` beside this module is written by
``bench/bench_skin_detector.py`` from the evaluation set of
``tests/colorimetry/skin_evaluation_set.py`` (portraits recoloured to the ten
Monk swatches under exposure changes, casts, crops, mirroring and distractors,
with the face's true ITA known). Per tone and case set (``development``: used
while building the detector; ``held_out``: checked last) it holds the number
of cases, how many found a face (coverage), how many were within 5 degrees of
ITA of the truth, and the median, maximum and mean signed error; the same for
the rule-based detector for comparison. The test suite checks the stored
development figures against a fresh measurement and the stored algorithm
version against :data:`colorimetry.stats.ALGORITHM_VERSION`, so the figures a
lead reads are the current method's.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

__all__ = ["EVALUATION_FILE", "skin_detector_evaluation"]

EVALUATION_FILE = Path(__file__).with_name("skin_evaluation.json")


@functools.cache
def _load() -> dict[str, Any]:
    with EVALUATION_FILE.open(encoding="utf-8") as handle:
        loaded: dict[str, Any] = json.load(handle)
    return loaded


def skin_detector_evaluation() -> dict[str, Any]:
    """The stored per-tone coverage and error figures of the skin detectors.

    Returns
    -------
    dict
        ``algorithm_version``, ``max_error`` (degrees), ``description`` and
        ``sets``: ``{set name: {detector: [row per Monk tone]}}``, each row
        ``tone``, ``cases``, ``measured`` (a face found, for the face
        detector), ``within``, ``median_abs_error``,
        ``max_abs_error``, ``mean_error`` (errors ``None`` when nothing was
        measured).

    Examples
    --------
    >>> figures = skin_detector_evaluation()
    >>> [row["tone"] for row in figures["sets"]["development"]["face"]]
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    """
    copy: dict[str, Any] = json.loads(json.dumps(_load()))  # a copy: callers may annotate it
    return copy
