"""The project's consensus dashboard: every phase's summary, test-retest and drift, labelers by pseudonym."""

from __future__ import annotations

from django.core.cache import cache

from metrics.intervals import proportion_difference

from ...models import Membership, Phase, Project
from .caching import CACHE_PREFIX, CACHE_TIMEOUT, phase_summary, phase_versions
from .labelers import labeler_drift, test_retest_compute
from .numbers import CONFIDENCE, MAX_INTERVAL_WIDTH, MIN_IMAGES, WIDE_RANGE, wilson_share


def project_consensus(project: Project, phase: Phase | None = None) -> dict:
    """The whole dashboard for ``project`` with ``phase`` in detail (labelers by pseudonym).

    Two queries when everything is cached (the version aggregate and the
    pseudonyms) plus cache reads; a changed phase is recomputed.
    """
    versions = phase_versions(project)
    phases = [p for p in project.phases.order_by("id") if p.id in versions]
    phases.sort(key=lambda p: p.index)
    # Changes whenever a label of any phase changes (cache key of the test-retest and of the plots).
    version = "|".join(f"{p.id}={versions[p.id]}" for p in phases)
    summaries = [phase_summary(p, version=versions[p.id]) for p in phases]
    if phase is None and phases:
        phase = next((p for p in phases if p.kind == Phase.Kind.MAIN), phases[-1])
    selected = next((s for s in summaries if phase is not None and s["phase"]["id"] == phase.id), None)
    retest = _test_retest(project, version)
    names = dict(Membership.objects.filter(project=project).values_list("id", "pseudonym"))
    return {
        "project": {
            "id": project.id,
            "name": project.name,
            "scale": project.scale.name,
            "tones": [{"position": t.position, "code": t.code, "hex": t.hex_colour} for t in project.scale.tones.all()],
        },
        "version": version,
        "min_images": MIN_IMAGES,
        "max_interval_width": MAX_INTERVAL_WIDTH,
        "confidence": CONFIDENCE,
        "wide_range": WIDE_RANGE,
        "phases": [_with_names(s, names) for s in summaries],
        "selected": _with_names(selected, names) if selected else None,
        "labelers": _labelers(summaries, retest, names),
        "rate_comparisons": _rate_comparisons(summaries),
        "test_retest": {
            **{k: v for k, v in retest.items() if k != "pairs"},
            "per_labeler": [{**row, "labeler": names.get(row["labeler"], "?")} for row in retest["per_labeler"]],
            "pairs": [[names.get(labeler, "?"), a, b] for labeler, a, b in retest["pairs"]],
        },
    }


#: The rates compared between the calibration phases and the main phase.
COMPARED_RATES = ("near_consensus", "overlap_consensus", "complete_consensus")


def _rate_comparisons(summaries: list[dict]) -> list[dict]:
    """Each calibration phase's consensus rates against the main phase's, beyond chance or not.

    Seed 000 found the rates "comparable" between calibration and main phases, which
    gave confidence in the data; here the claim is tested: the difference of the two
    shares of images with Newcombe's 95% interval and Fisher's exact p
    (:func:`metrics.intervals.proportion_difference`). Needs at least
    ``MIN_IMAGES`` images with 2+ labels in both phases.
    """
    main = next((s for s in summaries if s["phase"]["kind"] == Phase.Kind.MAIN), None)
    if main is None or main["n_images_2plus"] < MIN_IMAGES:
        return []
    rows = []
    for summary in summaries:
        if summary["phase"]["kind"] not in (Phase.Kind.CALIBRATION_1, Phase.Kind.CALIBRATION_2):
            continue
        if summary["n_images_2plus"] < MIN_IMAGES:
            continue
        row = {"phase": summary["phase"], "against": main["phase"], "rates": []}
        for name in COMPARED_RATES:
            n1, n2 = summary["n_images_2plus"], main["n_images_2plus"]
            cell1, cell2 = summary["agreement"][name], main["agreement"][name]
            k1, k2 = _hits(cell1, n1), _hits(cell2, n2)
            if k1 is None or k2 is None:
                continue
            result = proportion_difference(k1, n1, k2, n2)
            row["rates"].append(
                {
                    "rate": name,
                    # Each rate with its own Wilson interval (a rate too uncertain to read alone is
                    # still compared: the interval of the difference says how little is known).
                    "calibration": wilson_share(k1, n1, unit="images with 2+ labels"),
                    "main": wilson_share(k2, n2, unit="images with 2+ labels"),
                    "difference": round(result.difference, 6),
                    "low": round(result.low, 6),
                    "high": round(result.high, 6),
                    "p_value": round(result.p_value, 6),
                    "differs": result.differs,
                }
            )
        rows.append(row)
    return rows


def _hits(cell: dict, n: int) -> int | None:
    """Images counted by a rate: its ``k``, else its value times ``n``; None when undefined."""
    if cell.get("k") is not None and not str(cell.get("reason") or "").startswith("undefined"):
        return int(cell["k"])
    return None if cell.get("value") is None else round(cell["value"] * n)


def _test_retest(project: Project, version: str) -> dict:
    """The project's test-retest, cached under the labels' version of every phase."""
    key = f"{CACHE_PREFIX}:retest:{project.id}:{version}"
    retest = cache.get(key)
    if retest is None:
        retest = test_retest_compute(project)
        cache.set(key, retest, CACHE_TIMEOUT)
    return retest


def _labelers(summaries: list[dict], retest: dict, names: dict[int, str]) -> list[dict]:
    """Each labeler's history over the phases and test-retest, by pseudonym."""
    retest_by_labeler = {row["labeler"]: row for row in retest["per_labeler"]}
    return [
        {
            "labeler": names.get(labeler_id, "?"),
            "baseline": history,
            "test_retest": retest_by_labeler.get(labeler_id),
        }
        for labeler_id, history in sorted(labeler_drift(summaries).items(), key=lambda item: names.get(item[0], ""))
    ]


def _with_names(summary: dict, names: dict[int, str]) -> dict:
    """A copy of a phase summary with membership ids replaced by pseudonyms."""
    out = dict(summary)
    out["labelers"] = [names.get(i, "?") for i in summary["labelers"]]
    out["kappa"] = {**summary["kappa"], "labelers": out["labelers"]}
    out["per_labeler"] = [{**row, "labeler": names.get(row["labeler"], "?")} for row in summary["per_labeler"]]
    bands = summary.get("tone_bands")
    if bands:
        out["tone_bands"] = {
            **bands,
            "labelers": [names.get(i, "?") for i in bands["labelers"]],
            "bands": [
                {**band, "bias": [{**row, "labeler": names.get(row["labeler"], "?")} for row in band["bias"]]}
                for band in bands["bands"]
            ],
        }
    return out
