"""Evaluate and time the skin detectors on the evaluation set; write colorimetry/skin_evaluation.json.

Run: ``python bench/bench_skin_detector.py [--write]``.

The evaluation set is ``tests/colorimetry/skin_evaluation_set.py``: two
public-domain portraits (scikit-image's astronaut, Matplotlib's Grace Hopper)
with the facial skin recoloured to each of the ten Monk swatches, under
exposure changes, colour casts, crops, mirroring and distractors. Truth: the
face's median per-pixel ITA as recorded.

A fourth set, ``camera`` (``tests/colorimetry/skin_evaluation_camera.py``, issue 21), recolours the
same portraits with a model that does not keep the grey-level face identical across tones (specular
highlights that do not follow the pigment, brows that keep theirs, sensor noise and a JPEG round
trip); it was written down and committed before any detector ran on it.

For every case it measures ``skin_tone_stats`` with the default detector (``landmarks_or_face``:
MediaPipe's BlazeFace and Face Mesh, the cascades when they find no face), with the cascades alone
(``face``, the default before issue 21) and with the rule-based detector (the method before issue
12), and prints per tone: cases, faces found, cases within 5 degrees of ITA, median / max absolute
error and mean signed error, for every set. ``--write`` stores the figures in ``colorimetry/skin_evaluation.json``
(shown on the baselines page; the suite checks the development figures
against a fresh run).

Timing, measured in the same run on the same images: each face detector's time
per image as a ratio to the rule-based detector's (the reference).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colorimetry import ALGORITHM_VERSION, skin_tone_stats  # noqa: E402
from colorimetry.evaluation import EVALUATION_FILE  # noqa: E402
from tests.colorimetry import skin_evaluation_camera as camera  # noqa: E402
from tests.colorimetry import skin_evaluation_set as evaluation  # noqa: E402

MAX_ERROR = 5.0
#: The detectors compared (values of skin_tone_stats' skin_detector), the default first.
DETECTORS = ("landmarks_or_face", "face", "rules")


def tone_rows(cases: list, detector: str) -> tuple[list[dict], list[float]]:
    errors: dict[int, list[float | None]] = {}
    times = []
    for case in cases:
        start = time.perf_counter()
        stats = skin_tone_stats(case.rgb, skin_detector=detector)
        times.append(time.perf_counter() - start)
        measured = stats["ita_median"]
        errors.setdefault(case.tone, []).append(None if measured is None else measured - case.truth_ita)
    rows = []
    for tone in sorted(errors):
        found = [e for e in errors[tone] if e is not None]
        absolute = np.abs(found)
        rows.append(
            {
                "tone": tone,
                "cases": len(errors[tone]),
                "measured": len(found),
                "within": int((absolute <= MAX_ERROR).sum()),
                "median_abs_error": round(float(np.median(absolute)), 2) if found else None,
                "max_abs_error": round(float(absolute.max()), 2) if found else None,
                "mean_error": round(float(np.mean(found)), 2) if found else None,
            }
        )
    return rows, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="store the figures in colorimetry/skin_evaluation.json")
    args = parser.parse_args()
    sets = {
        "development": evaluation.development_cases(),
        "held_out": evaluation.held_out_cases(),
        "held_out_2": evaluation.held_out_2_cases(),
        "camera": camera.camera_cases(),
    }
    figures: dict = {
        "algorithm_version": ALGORITHM_VERSION,
        "max_error": MAX_ERROR,
        "description": (
            "Portraits (scikit-image astronaut, the development cases; Matplotlib Grace Hopper and new "
            "conditions on both, the held-out sets) with the facial skin "
            "recoloured to each Monk swatch, texture and shading kept, under exposure changes (-1 to +1 stop), "
            "warm and cool casts, crops, mirroring, half and third size, and distractors (orange, beige, brown "
            "objects, a patch of another Monk tone). Error: measured median ITA minus the face's true median ITA "
            "(degrees), as recorded. The camera set recolours both portraits with a second model that does not "
            "keep the grey-level face identical across tones (specular highlights at the original's intensity, "
            "brows keeping their pigment, sensor noise, JPEG), written down before any detector ran on it."
        ),
        "sets": {},
    }
    timings = {}
    for name, cases in sets.items():
        figures["sets"][name] = {}
        for detector in DETECTORS:
            rows, times = tone_rows(cases, detector)
            figures["sets"][name][detector] = rows
            timings.setdefault(detector, []).extend(times)
            print(f"\n{name}, {detector} detector ({len(cases)} cases)")
            print("MST | cases | measured | within 5 deg | median |err| | max |err| | mean err")
            for row in rows:
                measured = row["measured"]
                print(
                    f"{row['tone']:>3} | {row['cases']:>5} | {measured:>8} | {row['within']:>12} | "
                    f"{row['median_abs_error']!s:>12} | {row['max_abs_error']!s:>9} | {row['mean_error']!s:>8}"
                )
    rules = statistics.median(timings["rules"])
    for detector in DETECTORS[:2]:
        median = statistics.median(timings[detector])
        print(f"median time per image: {detector} {median * 1000:.1f} ms, ratio to the rules {median / rules:.1f}x")
    print(f"median time per image: rules {rules * 1000:.1f} ms (the reference)")
    if args.write:
        EVALUATION_FILE.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
        print(f"written {EVALUATION_FILE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
