"""The report as a JSON-serialisable dict: the four scores, summary sentences, mean error by group."""

from __future__ import annotations

import numpy as np

from .inputs import ReportInputError, ReportOptions, _join

__all__ = ["build_report"]

# Above this many rows the DBSCAN ensemble takes seconds: show a progress bar.
_PROGRESS_ROWS = 5_000


def build_report(options: ReportOptions) -> dict:
    """Compute the report as a JSON-serialisable dict (figures not included).

    Parameters
    ----------
    options : ReportOptions
        Inputs and settings.

    Returns
    -------
    dict
        Keys ``inputs``, ``settings``, ``gender``, ``skin_tone``, ``body_shape``,
        ``intersectional`` (``None`` when not requested), ``summary`` (sentences) and
        ``groups``.

    Raises
    ------
    ReportInputError
        Invalid inputs or too few samples for a score.
    """
    from metrics import unfairness

    merged, unmatched = _join(options)
    errors = merged[options.error].to_numpy(dtype=np.float64)
    report: dict = {
        "inputs": {
            "attributes": str(options.attributes),
            "predictions": str(options.predictions),
            "id_column": options.on,
            "n_samples": len(merged),
            **unmatched,
        },
        "settings": {
            "error_column": options.error,
            "threshold": options.threshold,
            "alpha": options.alpha,
            "severity_rule": "ratio = |score| / threshold; <0.5 negligible, <1 moderate, >=1 severe",
            "cluster_error_threshold": options.cluster_error_threshold,
            "min_samples": options.min_samples,
            "min_cluster_size": options.min_cluster_size,
            "min_fraction": options.min_fraction,
        },
        "gender": None,
        "skin_tone": None,
        "body_shape": None,
        "intersectional": None,
    }
    problems = []
    results: dict = {}
    if options.gender:
        try:
            result = unfairness.categorical_unfairness(
                errors,
                merged[options.gender].astype(str).to_numpy(),
                alpha=options.alpha,
            )
            results["gender"] = result
            report["gender"] = _categorical_json(result, options)
        except ValueError as exc:
            problems.append(f"gender ({options.gender}): {exc}")
    for key, column in (
        ("skin_tone", options.skin_tone),
        ("body_shape", options.body_shape),
    ):
        if not column:
            continue
        try:
            result = unfairness.continuous_unfairness(
                errors, merged[column].to_numpy(dtype=np.float64), alpha=options.alpha
            )
            results[key] = result
            report[key] = _continuous_json(result, column, options)
        except ValueError as exc:
            problems.append(f"{key.replace('_', ' ')} ({column}): {exc}")
    if problems:
        raise ReportInputError(problems)
    if options.skin_tone and options.body_shape:
        progress = options.progress
        if progress is None:
            progress = len(merged) >= _PROGRESS_ROWS
        features = merged[[options.body_shape, options.skin_tone]].to_numpy(dtype=np.float64)
        result = unfairness.intersectional_unfairness(
            errors,
            features,
            min_samples=options.min_samples,
            min_cluster_size=options.min_cluster_size,
            error_threshold=options.cluster_error_threshold,
            min_fraction=options.min_fraction,
            progress=bool(progress),
        )
        results["intersectional"] = result
        ids = merged[options.on].to_numpy()
        report["intersectional"] = {
            "score": result.n_customers,
            "n_customers": result.n_customers,
            "fraction": result.fraction,
            "members": [str(i) for i in ids[result.members]],
            "features": [options.body_shape, options.skin_tone],
            "eps_with_underperforming_clusters": [
                {
                    "exponent": c.exponent,
                    "eps": c.eps,
                    "n_clusters": c.n_clusters,
                    "underperforming_sizes": [int(m.size) for m in c.underperforming],
                    "fractions": list(c.fractions),
                }
                for c in result.clusters
                if c.underperforming
            ],
            "n_eps": len(result.clusters),
        }
    report["summary"] = _summary(report, options)
    report["groups"] = _groups_section(options, merged)
    report["_results"] = results
    report["_merged"] = merged
    return report


def _categorical_json(result, options: ReportOptions) -> dict:
    from metrics.unfairness import severity

    sev = severity(result.score, options.threshold)
    return {
        "column": options.gender,
        "test": "two-sample Kolmogorov-Smirnov",
        "statistic": result.statistic,
        "p_value": result.p_value,
        "significant": result.significant,
        "score": result.score,
        "higher_error_group": str(result.worst_pair.higher_error_group),
        "lower_error_group": str(result.worst_pair.lower_error_group),
        "severity": sev.level,
        "severity_ratio": sev.ratio,
        "group_means": {str(k): v for k, v in result.group_means.items()},
        "group_sizes": {str(k): v for k, v in result.group_sizes.items()},
        "pairs": [
            {
                "higher_error_group": str(p.higher_error_group),
                "lower_error_group": str(p.lower_error_group),
                "statistic": p.statistic,
                "p_value": p.p_value,
                "significant": p.significant,
                "score": p.score,
            }
            for p in result.pairs
        ],
    }


def _continuous_json(result, column: str, options: ReportOptions) -> dict:
    from metrics.unfairness import severity

    sev = severity(result.score, options.threshold)
    return {
        "column": column,
        "test": "least-squares slope, t-test",
        "slope": result.slope,
        "intercept": result.intercept,
        "p_value": result.p_value,
        "significant": result.significant,
        "score": result.score,
        "percentiles": list(result.percentiles),
        "attribute_range": list(result.attribute_range),
        "severity": sev.level,
        "severity_ratio": sev.ratio,
    }


def _summary(report: dict, options: ReportOptions) -> list[str]:
    lines = []
    unit_threshold = f"the error threshold {options.threshold:g}"
    for key, label in (
        ("gender", "Gender"),
        ("body_shape", "Body shape"),
        ("skin_tone", "Skin tone"),
    ):
        part = report[key]
        if part is None:
            continue
        if part["significant"]:
            lines.append(
                f"{label} unfairness is significant (p = {part['p_value']:.3g} < "
                f"{options.alpha:g}); score {part['score']:.3g} is {part['severity']} "
                f"({part['severity_ratio']:.0%} of {unit_threshold})."
            )
        else:
            lines.append(
                f"{label} unfairness is not significant (p = {part['p_value']:.3g} >= "
                f"{options.alpha:g}); the score {part['score']:.3g} would be "
                f"{part['severity']} ({part['severity_ratio']:.0%} of {unit_threshold})."
            )
    inter = report["intersectional"]
    if inter is not None:
        if inter["n_customers"]:
            lines.append(
                f"Intersectional: {inter['n_customers']} customer(s) "
                f"({inter['fraction']:.1%}) are in underperforming clusters "
                f"({len(inter['eps_with_underperforming_clusters'])} of {inter['n_eps']} "
                "DBSCAN runs found at least one)."
            )
        else:
            lines.append("Intersectional: no underperforming cluster in any DBSCAN run.")
    return lines


def _groups_section(options: ReportOptions, merged=None) -> dict | str:
    """Mean error disaggregated by each ``--groups`` column and by their intersection.

    Uses :class:`metrics.groups.MetricFrame` (Fairlearn's semantics) with a seeded
    bootstrap interval, small-group flags and explicit reasons for undefined values.
    """
    import warnings

    from ..groups import MetricFrame, SmallGroupWarning, mean_error

    if not options.groups:
        return "not requested (use --groups col1,col2)"
    if merged is None:
        return "not computed"
    sections = {}
    combos = [[c] for c in options.groups]
    if len(options.groups) > 1:
        combos.append(list(options.groups))
    errors = merged[options.error].to_numpy(dtype=float)
    for columns in combos:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SmallGroupWarning)
            frame = MetricFrame(
                metrics={"mean_error": mean_error},
                y_true=np.zeros_like(errors),
                y_pred=errors,
                sensitive_features=merged[columns].astype(str),
                n_boot=200,
                seed=0,
            )
        groups = {}
        for key, value in frame.values("mean_error").items():
            name = " & ".join(map(str, key)) if isinstance(key, tuple) else str(key)
            groups[name] = {
                "mean_error": value.value,
                "ci_low": value.ci_low,
                "ci_high": value.ci_high,
                "reason": value.reason,
            }
        difference = frame.difference()["mean_error"]
        ratio = frame.ratio()["mean_error"]
        sections[" x ".join(columns)] = {
            "by_group": groups,
            "difference_between_groups": difference.value,
            "difference_reason": difference.reason,
            "ratio_between_groups": ratio.value,
            "ratio_reason": ratio.reason,
            "small_groups": [" & ".join(map(str, g)) if isinstance(g, tuple) else str(g) for g in frame.small_groups],
            "min_group_size": frame.min_group_size,
        }
    return sections
