"""The report as a JSON-serialisable dict: verdicts, performance, seed 000's scores, summary sentences.

Every attribute part has the same ``verdict`` object (``significant``, ``level``, ``reading``, the gap
and its interval): the one source of the level words in the summary, the HTML tables, the web page and
the gates. Seed 000's own tests sit under ``seed_000`` in each part, reproduced and labelled as such.
``performance`` says where the mean error itself is above the threshold, apart from any disparity.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .inputs import MIN_GROUP_SIZE, ReportInputError, ReportOptions, _join

__all__ = ["build_report"]

# Above this many rows the DBSCAN ensemble takes seconds: show a progress bar.
_PROGRESS_ROWS = 5_000
_EXAMPLES = 5


def build_report(options: ReportOptions) -> dict[str, Any]:
    """Compute the report as a JSON-serialisable dict (figures not included).

    Parameters
    ----------
    options : ReportOptions
        Inputs and settings.

    Returns
    -------
    dict
        Keys ``inputs`` (with the clustering and its design effect), ``settings``, ``warnings``,
        ``gender``, ``skin_tone``, ``body_shape`` (each with ``verdict``, its groups or bands, and
        ``seed_000``), ``intersectional`` (``grid`` with its ``verdict``, and the seed's DBSCAN ensemble
        under ``seed_000``), ``performance``, ``label_uncertainty``, ``composition``, ``summary`` (the
        warnings first) and ``groups``.

    Raises
    ------
    ReportInputError
        Invalid inputs or too few samples for a score.
    """
    from metrics import unfairness

    merged, unmatched, body_treatment, notes = _join(options)
    errors = merged[options.error].to_numpy(dtype=np.float64)
    people = merged[options.cluster].to_numpy(dtype=object) if options.cluster else None
    cluster_threshold = (
        options.threshold if options.cluster_error_threshold is None else options.cluster_error_threshold
    )
    warnings: list[str] = []
    clustering = None
    if options.cluster:
        clustering = {
            "column": options.cluster,
            "source": options.cluster_source or f"--cluster {options.cluster}",
            **unfairness.design_effect(errors, people),
        }
        empty = _blank(merged[options.cluster])
        if empty.any():
            warnings.append(
                f"cluster column {options.cluster!r}: {int(empty.sum())} row(s) have no value (e.g. {_id_name(options)} "
                f"{_ids(merged, options, empty)}); each counts as a person of its own"
            )
    for found in notes["repeating"]:
        warnings.append(
            f"column {found['column']!r} repeats ({found['n_values']} values over {found['n_rows']} rows): if these "
            f"are several photos of the same people, the samples are not independent and every test here is too "
            f"confident; give --cluster {found['column']}"
        )
    for column, mask in notes["missing"].items():
        warnings.append(
            f"column {column!r}: {int(mask.sum())} of {mask.size} row(s) have no value (e.g. {_id_name(options)} "
            f"{_ids(merged, options, mask)}); they are left out of the scores of that attribute only"
        )
    report: dict[str, Any] = {
        "inputs": {
            "attributes": str(options.attributes),
            "predictions": str(options.predictions),
            "id_column": options.on,
            "n_samples": len(merged),
            "clusters": clustering,
            **unmatched,
        },
        "settings": _settings(options, body_treatment, cluster_threshold),
        "warnings": warnings,
        "gender": None,
        "skin_tone": None,
        "body_shape": None,
        "intersectional": None,
        "performance": None,
        "label_uncertainty": None,
        "composition": None,
    }
    problems: list[str] = []
    results: dict[str, Any] = {}
    band_labels: dict[str, np.ndarray] = {}

    def step(name: str) -> None:
        if options.on_step is not None:
            options.on_step(name)

    def rows_of(column: str) -> np.ndarray:
        mask = notes["missing"].get(column)
        return np.ones(len(merged), dtype=bool) if mask is None else ~mask

    categorical_parts = [("gender", options.gender)]
    if body_treatment == "categorical":
        categorical_parts.append(("body_shape", options.body_shape))
    for key, column in categorical_parts:
        if not column:
            continue
        step(key)
        rows = rows_of(column)
        labels = merged[column].astype(str).to_numpy()
        try:
            result, part, warned, labelled = _categorical_part(key, column, errors, labels, rows, people, options)
        except ValueError as exc:
            problems.append(f"{key.replace('_', ' ')} ({column}): {exc}")
            continue
        warnings.extend(warned)
        results[key] = result
        band_labels[key] = labelled
        report[key] = part
    continuous_parts = [("skin_tone", options.skin_tone)]
    if body_treatment == "continuous":
        continuous_parts.append(("body_shape", options.body_shape))
    for key, column in continuous_parts:
        if not column:
            continue
        step(key)
        rows = rows_of(column)
        try:
            part, found, labelled, warned = _continuous_part(key, column, merged, errors, rows, people, options)
        except ValueError as exc:
            problems.append(f"{key.replace('_', ' ')} ({column}): {exc}")
            continue
        warnings.extend(warned)
        results.update(found)
        band_labels[key] = labelled
        report[key] = part
    if problems:
        raise ReportInputError(problems)
    if options.skin_tone:
        from .composition import tone_composition

        rows = rows_of(options.skin_tone)
        try:
            report["composition"] = tone_composition(
                merged[options.skin_tone].to_numpy()[rows],
                options.tone_levels or report["skin_tone"]["bands"].get("levels"),
                clusters=None if people is None else people[rows],
            )
        except ValueError as exc:
            raise ReportInputError([f"skin tone ({options.skin_tone}): {exc}"]) from None
    if options.tone_min and options.tone_max:
        step("label_uncertainty")
        report["label_uncertainty"] = _uncertainty_part(
            merged, errors, people, options, rows_of, results.get("skin_tone_verdict")
        )
    grid_factors = _grid_factors(options, band_labels)
    if options.skin_tone and options.body_shape or len(grid_factors) >= 2:
        step("intersectional")
        report["intersectional"] = _intersectional_part(
            merged, errors, people, options, body_treatment, cluster_threshold, grid_factors, band_labels, rows_of
        )
        results["intersectional"] = report["intersectional"].pop("_seed_result", None)
    report["performance"] = _performance(report, errors, people, options)
    report["summary"], report["headline"] = _summary(report, options)
    report["groups"] = _groups_section(options, merged, people)
    report["_results"] = results
    report["_merged"] = merged
    return report


def _blank(column: Any) -> np.ndarray:
    text = column.astype(str).str.strip()
    return np.asarray((column.isna() | (text == "") | (text.str.lower() == "nan")).to_numpy())


def _ids(merged: Any, options: ReportOptions, mask: np.ndarray) -> str:
    return ", ".join(map(str, merged.loc[mask, options.on].tolist()[:_EXAMPLES]))


def _id_name(options: ReportOptions) -> str:
    return options.id_label or options.on


def _settings(options: ReportOptions, body_treatment: Any, cluster_threshold: Any) -> dict[str, Any]:
    from metrics.unfairness import DISPARITY_RULE

    return {
        "error_column": options.error,
        "threshold": options.threshold,
        "alpha": options.alpha,
        "margin": 0.5 * options.threshold,
        "disparity_rule": DISPARITY_RULE,
        "performance_rule": (
            "a band or group's mean error is above the threshold when its whole 95% interval is, may reach it when "
            "the interval contains it; performance is reported apart and never sets a disparity level"
        ),
        "significance_rule": (
            "continuous attributes: the cluster-robust trend test and the band-gap test, Holm-adjusted over the "
            "two; categorical attributes: the pairwise group-gap test (family-wise over the pairs); the grid: "
            "every cell against the rest (family-wise over the cells); seed 000's tests are reproduced and "
            "do not decide"
        ),
        "cluster": options.cluster,
        "cluster_source": options.cluster_source or (f"--cluster {options.cluster}" if options.cluster else None),
        "cluster_error_threshold": cluster_threshold,
        "cluster_error_threshold_source": (
            "the error threshold" if options.cluster_error_threshold is None else "set (--cluster-error-threshold)"
        ),
        "min_samples": options.min_samples,
        "min_samples_note": "DBSCAN min_samples is not given by seed 000; it is a parameter of this report",
        "n_bands": options.n_bands,
        "tone_bands": options.tone_bands,
        "tone_levels": options.tone_levels,
        "permutations": options.permutations,
        "band_permutations": options.band_permutations,
        "resamples_note": (
            "band_permutations: wild bootstrap resamples of the disparity tests (bands, groups, grid cells); "
            "permutations: shuffles of seed 000's DBSCAN null (and its clustered KS test)"
        ),
        "seed": options.seed,
        "min_cluster_size": options.min_cluster_size,
        "min_fraction": options.min_fraction,
        "min_cell": options.min_cell,
        "body_shape_treatment": body_treatment,
        "body_shape_kind": options.body_shape_kind,
        "body_shape_rule": _TREATMENT_RULE,
        "min_group_size": MIN_GROUP_SIZE,
        "small_group_rule": (
            f"a group of a categorical attribute with fewer than {MIN_GROUP_SIZE} rows is left out of that "
            "attribute's tests (named in the warnings); its rows stay in every other score; fewer than two "
            "groups left is an error"
        ),
    }


_TREATMENT_RULE = (
    "--body-shape-kind auto (default): continuous (trend test and bands) when every value is a number, "
    "categorical (groups, like gender) when no value is; a mix of numbers and text is refused. "
    "--body-shape-kind continuous or categorical forces one treatment."
)


def _treatment_reason(treatment: str, options: ReportOptions) -> str:
    if options.body_shape_kind != "auto":
        return f"set by --body-shape-kind {options.body_shape_kind}"
    if treatment == "continuous":
        return "every value is a number (--body-shape-kind categorical treats numeric codes as groups)"
    return "no value is a number: each distinct value is a group"


def _ci(k: int, n: int) -> list[float]:
    from metrics.intervals import wilson_interval

    return list(wilson_interval(k, n))


def _rate(k: int, n: int) -> dict[str, Any]:
    from metrics.intervals import wilson_interval

    low, high = wilson_interval(k, n)
    return {"k": int(k), "n": int(n), "rate": k / n if n else None, "ci_low": low, "ci_high": high}


def _verdict_json(verdict: Any, options: ReportOptions) -> dict[str, Any]:
    return {
        "significant": bool(verdict.significant),
        "p_value": verdict.p_value,
        "level": verdict.level,
        "reading": verdict.reading,
        "gap": verdict.gap,
        "gap_ci": list(verdict.gap_ci),
        "margin": 0.5 * options.threshold,
        "worst_band": verdict.worst_band,
        "best_band": verdict.best_band,
        "worse_end": verdict.worse_end,
        "tests": verdict.tests,
    }


def _group_rows(readings: Any) -> list[dict[str, Any]]:
    return [
        {
            "label": g.label,
            "n": g.n,
            "n_clusters": g.n_clusters,
            "mean_error": g.mean,
            "ci_low": g.ci_low,
            "ci_high": g.ci_high,
            "min_detectable_gap": g.min_detectable_gap,
            "reading": g.reading,
            "performance": g.performance,
        }
        for g in readings
    ]


def _pairs_json(pairs: Any) -> list[dict[str, Any]]:
    return [
        {
            "higher": p.higher,
            "lower": p.lower,
            "gap": p.gap,
            "ci_low": p.ci_low,
            "ci_high": p.ci_high,
            "p_adjusted": p.p_adjusted,
            "significant": p.significant,
        }
        for p in pairs
    ]


def _categorical_part(
    key: Any, column: Any, errors: Any, labels: Any, rows: Any, people: Any, options: ReportOptions
) -> Any:
    """The verdict (group gaps) and seed 000's KS tests of a categorical attribute on the rows with a value.

    Groups below ``MIN_GROUP_SIZE`` rows are left out of both (warned). Returns the seed's result, the JSON
    part, the warnings and each row's group label for the grid (empty where missing or left out).
    """
    from metrics.unfairness import categorical_unfairness, categorical_verdict, group_disparity

    what = key.replace("_", " ")
    names, counts = np.unique(labels[rows], return_counts=True)
    sizes = dict(zip(names.tolist(), counts.tolist(), strict=True))
    small = [g for g in names.tolist() if sizes[g] < MIN_GROUP_SIZE]
    tested = [g for g in names.tolist() if sizes[g] >= MIN_GROUP_SIZE]
    listing = ", ".join(f"{g!r} ({sizes[g]} row{'s' if sizes[g] != 1 else ''})" for g in names.tolist())
    if len(tested) < 2:
        raise ValueError(
            f"nothing left to test: the tests compare at least two groups of at least {MIN_GROUP_SIZE} rows, "
            f"and the column has {len(tested)} such group(s) among {listing}; merge small groups or leave "
            f"out --{key.replace('_', '-')}"
        )
    warned = [
        f"{what} ({column}): group {g!r} has {sizes[g]} row(s), fewer than the {MIN_GROUP_SIZE} a test needs; "
        f"it is left out of the {what} tests (its rows stay in every other score)"
        for g in small
    ]
    keep = rows & np.isin(labels, tested)
    cluster = None if people is None else people[keep]
    seed_result = categorical_unfairness(
        errors[keep], labels[keep], alpha=options.alpha, clusters=cluster, n_permutations=999, seed=options.seed
    )
    disparity = group_disparity(
        errors[keep],
        labels[keep],
        threshold=options.threshold,
        alpha=options.alpha,
        clusters=cluster,
        n_boot=options.band_permutations,
        seed=options.seed,
    )
    verdict = categorical_verdict(disparity)
    part = {
        "column": column,
        "treatment": "categorical",
        "n": int(keep.sum()),
        "groups_tested": [str(g) for g in tested],
        "left_out": [
            {
                "group": str(g),
                "n": int(sizes[g]),
                "mean_error": float(errors[rows & (labels == g)].mean()),
                "reason": f"fewer than {MIN_GROUP_SIZE} rows: not tested",
            }
            for g in small
        ],
        "groups": _group_rows(disparity.groups),
        "pairs": _pairs_json(disparity.pairs),
        "gap": disparity.gap,
        "gap_ci": list(disparity.gap_ci),
        "p_value": disparity.p_value,
        "critical": disparity.critical,
        "test": disparity.method,
        "verdict": _verdict_json(verdict, options),
        "seed_000": _ks_json(seed_result, options),
    }
    if key == "body_shape":
        part["treatment_reason"] = _treatment_reason("categorical", options)
    labelled = np.where(keep, labels, "")
    return seed_result, part, warned, labelled


def _ks_json(result: Any, options: ReportOptions) -> dict[str, Any]:
    return {
        "test": "two-sample Kolmogorov-Smirnov (seed 000)",
        "p_value_method": result.p_value_method,
        "correction": result.correction,
        "n_pairs": result.n_pairs,
        "statistic": result.statistic,
        "p_value": result.p_value,
        "p_value_adjusted": result.p_value_adjusted,
        "significant": result.significant,
        "score": result.score,
        "score_ratio": abs(result.score) / options.threshold,
        "higher_error_group": str(result.worst_pair.higher_error_group),
        "lower_error_group": str(result.worst_pair.lower_error_group),
        "pairs": [
            {
                "higher_error_group": str(p.higher_error_group),
                "lower_error_group": str(p.lower_error_group),
                "statistic": p.statistic,
                "p_value": p.p_value,
                "p_value_adjusted": p.p_value_adjusted,
                "significant": p.significant,
                "score": p.score,
            }
            for p in result.pairs
        ],
    }


def _tone_levels(key: str, x: np.ndarray, options: ReportOptions) -> tuple[int | None, str, list[str]]:
    """The scale the bands are cut on: given, inferred from a 1-based scale, or none (quantile bands)."""
    from metrics.rounding import round_half_up

    if key != "skin_tone":
        return None, "", []
    if options.tone_levels:
        return int(options.tone_levels), "given", []
    if x.size and x.min() >= 0.5:
        levels = max(2, int(round_half_up(float(x.max()))))
        return (
            levels,
            "the deepest tone present",
            [
                f"skin tone ({options.skin_tone}): the scale's size was not given, so its bands assume tones 1 to "
                f"{levels} (the deepest present); give --tone-levels (MST: 10) so that an absent deep tone is named"
            ],
        )
    return (
        None,
        "",
        [
            f"skin tone ({options.skin_tone}): values below 0.5 are not tones of a 1-based scale, so its bands are "
            "cut at the data's quantiles (a rare tone may share a band)"
        ],
    )


def skin_tone_band_count(x: np.ndarray, clusters: Any, levels: int | None, options: ReportOptions) -> int:
    """Bands of the skin-tone verdict: one per tone of the scale where n allows (see
    :func:`metrics.unfairness.tone_band_count` and :func:`metrics.unfairness.testable_band_count`)."""
    from metrics.unfairness import testable_band_count, tone_band_count

    n_bands = tone_band_count(levels, options.tone_bands, options.n_bands)
    if levels is None or options.tone_bands is not None:
        return n_bands
    return testable_band_count(x, levels, n_bands, clusters)


def report_levels(options: ReportOptions, tone: np.ndarray) -> int | None:
    """The scale the skin-tone bands are cut on (see :func:`_tone_levels`)."""
    return _tone_levels("skin_tone", tone, options)[0]


def _continuous_part(
    key: Any, column: Any, merged: Any, errors: Any, rows: Any, people: Any, options: ReportOptions
) -> Any:
    from metrics.unfairness import (
        attribute_bands,
        band_unfairness,
        continuous_unfairness,
        continuous_verdict,
        robust_slope,
    )

    x = merged[column].to_numpy(dtype=np.float64)[rows]
    y = errors[rows]
    cluster = None if people is None else people[rows]
    levels, source, warned = _tone_levels(key, x, options)
    seed_line = continuous_unfairness(y, x, alpha=options.alpha)
    trend = robust_slope(y, x, clusters=cluster, alpha=options.alpha)
    n_bands = options.n_bands
    if key == "skin_tone":
        n_bands = skin_tone_band_count(x, cluster, levels, options)
        if options.tone_bands is None and levels is not None and n_bands < levels:
            width = int(np.ceil(levels / n_bands))
            warned = [
                *warned,
                f"skin tone: too few images per tone for one band per tone (fewer than two tones with 2 or more "
                f"{'people' if cluster is not None else 'samples'}); bands of {width} tones instead",
            ]
    bands = band_unfairness(
        y,
        x,
        threshold=options.threshold,
        alpha=options.alpha,
        n_bands=n_bands,
        n_permutations=options.band_permutations,
        seed=options.seed,
        clusters=cluster,
        levels=levels,
    )
    verdict = continuous_verdict(trend, bands)
    index, spec = attribute_bands(x, options.n_bands, levels)
    labelled = np.full(len(merged), "", dtype=object)
    labelled[rows] = np.array([spec[i][0] for i in index], dtype=object)
    part = {
        "column": column,
        "treatment": "continuous",
        "n": int(rows.sum()),
        "bands": {
            "kind": bands.kind,
            "levels": bands.levels,
            "levels_source": source or None,
            "bands": [
                {
                    "label": b.label,
                    "low": b.low,
                    "high": b.high,
                    "n": b.n,
                    "n_clusters": b.n_clusters,
                    "mean_error": b.mean,
                    "ci_low": b.ci_low,
                    "ci_high": b.ci_high,
                    "small": b.small,
                    "min_detectable_gap": b.min_detectable_gap,
                    "reading": b.reading,
                    "performance": b.performance,
                }
                for b in bands.bands
            ],
            "gap": bands.gap,
            "gap_ci": list(bands.gap_ci),
            "gap_p_value": bands.gap_p_value,
            "gap_significant": bands.gap_significant,
            "worst_band": bands.worst_band,
            "best_band": bands.best_band,
            "worse_end": bands.worse_end,
            "critical": bands.critical,
            "bands_above_threshold": list(bands.above_threshold),
            "test": bands.method,
        },
        "trend": {
            "method": trend.method,
            "slope": trend.slope,
            "se": trend.se,
            "df": trend.df,
            "p_value": trend.p_value,
            "ci_low": trend.ci_low,
            "ci_high": trend.ci_high,
            "score": trend.score,
            "score_ci": [trend.score_ci_low, trend.score_ci_high],
            "attribute_range": list(trend.attribute_range),
        },
        "verdict": _verdict_json(verdict, options),
        "seed_000": {
            "test": "least-squares slope, t-test (seed 000: independent samples, equal variances)",
            "slope": seed_line.slope,
            "intercept": seed_line.intercept,
            "stderr": seed_line.stderr,
            "p_value": seed_line.p_value,
            "significant": seed_line.significant,
            "score": seed_line.score,
            "score_ratio": abs(seed_line.score) / options.threshold,
            "percentiles": list(seed_line.percentiles),
            "attribute_range": list(seed_line.attribute_range),
        },
    }
    if key == "body_shape":
        part["treatment_reason"] = _treatment_reason("continuous", options)
    found = {key: seed_line, f"{key}_trend": trend, f"{key}_bands": bands, f"{key}_verdict": verdict}
    return part, found, labelled, warned


def _uncertainty_part(
    merged: Any, errors: Any, people: Any, options: ReportOptions, rows_of: Any, verdict: Any
) -> dict[str, Any]:
    from metrics.unfairness import label_uncertainty
    from metrics.unfairness.uncertainty import conclusion_of

    rows = rows_of(options.skin_tone) & rows_of(options.tone_min) & rows_of(options.tone_max)
    levels = report_levels(options, merged[options.skin_tone].to_numpy(dtype=np.float64)[rows])
    # The verdict's conclusion when the check scores the same rows as the verdict, else its own.
    same_rows = bool(np.array_equal(rows, rows_of(options.skin_tone)))
    conclusion = conclusion_of(verdict) if verdict is not None and same_rows else None
    try:
        check = label_uncertainty(
            errors[rows],
            merged[options.skin_tone].to_numpy(dtype=np.float64)[rows],
            merged[options.tone_min].to_numpy(dtype=np.float64)[rows],
            merged[options.tone_max].to_numpy(dtype=np.float64)[rows],
            threshold=options.threshold,
            alpha=options.alpha,
            n_draws=options.uncertainty_draws,
            n_bands=skin_tone_band_count(
                merged[options.skin_tone].to_numpy(dtype=np.float64)[rows],
                None if people is None else people[rows],
                levels,
                options,
            ),
            seed=options.seed,
            labeler_tones={c: merged[c].to_numpy(dtype=np.float64)[rows] for c in options.labeler_columns} or None,
            clusters=None if people is None else people[rows],
            levels=levels,
            # The conclusion with the given tones is the verdict's own; each draw re-scores with 199 resamples
            # (999 per draw took 100 draws x 1.5 s at 50,000 images).
            conclusion=conclusion,
            n_permutations=min(199, options.band_permutations),
            labeler_permutations=options.band_permutations,
        )
    except ValueError as exc:
        raise ReportInputError([f"label-uncertainty check: {exc}"]) from None
    return {
        "columns": [options.tone_min, options.tone_max],
        "conclusion": check.conclusion,
        "n_draws": check.n_draws,
        "n_same": check.n_same,
        "fraction_same": check.fraction_same,
        "fraction_same_ci": list(check.fraction_same_ci),
        "fraction_significant": check.fraction_significant,
        "fraction_significant_ci": list(check.fraction_significant_ci),
        "conclusions": check.conclusions,
        "robust": check.robust,
        "per_labeler": check.per_labeler,
    }


_GRID_NAMES = ("skin_tone", "body_shape", "gender")


def _grid_factors(options: ReportOptions, band_labels: dict[str, Any]) -> list[str]:
    if options.grid_factors:
        unknown = [f for f in options.grid_factors if f not in _GRID_NAMES]
        if unknown:
            raise ReportInputError([f"grid factors must be among {', '.join(_GRID_NAMES)}, got {', '.join(unknown)}"])
        missing = [f for f in options.grid_factors if f not in band_labels]
        if missing:
            raise ReportInputError([f"grid factor(s) {', '.join(missing)} not scored: give their columns"])
        return list(dict.fromkeys(options.grid_factors))
    if "skin_tone" in band_labels and "body_shape" in band_labels:
        return ["skin_tone", "body_shape"]
    present = [f for f in _GRID_NAMES if f in band_labels]
    return present[:2] if len(present) >= 2 else []


def _intersectional_part(
    merged: Any,
    errors: Any,
    people: Any,
    options: ReportOptions,
    body_treatment: Any,
    cluster_threshold: Any,
    grid_factors: Any,
    band_labels: Any,
    rows_of: Any,
) -> dict[str, Any]:
    from metrics.unfairness import disparity_level, grid_unfairness

    part: dict[str, Any] = {"grid": None, "grid_error": None, "verdict": None, "seed_000": None}
    if len(grid_factors) >= 2:
        rows = np.ones(len(merged), dtype=bool)
        for factor in grid_factors:
            rows &= band_labels[factor] != ""
        try:
            grid = grid_unfairness(
                errors[rows],
                {factor: band_labels[factor][rows] for factor in grid_factors},
                threshold=options.threshold,
                alpha=options.alpha,
                clusters=None if people is None else people[rows],
                n_boot=options.band_permutations,
                seed=options.seed,
                min_cell=options.min_cell,
            )
        except ValueError as exc:
            part["grid_error"] = str(exc)
        else:
            tested = [c for c in grid.cells if c.tested]
            low = max(0.0, max(c.ci_low for c in tested if c.ci_low is not None))
            high = max(0.0, max(c.ci_high for c in tested if c.ci_high is not None))
            disparity = disparity_level(low, high, options.threshold)
            worst = max(tested, key=lambda c: c.gap)
            part["grid"] = {
                "factors": list(grid.factors),
                "n": int(rows.sum()),
                "n_cells": len(grid.cells),
                "n_tested": grid.n_tested,
                "p_value": grid.p_value,
                "significant": grid.significant,
                "critical": grid.critical,
                "test": grid.method,
                "cells": [_cell_json(c) for c in grid.cells],
                "flagged": [
                    {**_cell_json(c), "members": _cell_members(merged, options, band_labels, rows, c)}
                    for c in grid.flagged
                ],
            }
            part["verdict"] = {
                "significant": grid.significant,
                "p_value": grid.p_value,
                "level": disparity.level,
                "reading": disparity.reading,
                "gap": worst.gap,
                "gap_ci": [low, high],
                "margin": 0.5 * options.threshold,
                "worst_band": worst.description,
                "best_band": None,
                "worse_end": None,
                "regions": [c.description for c in grid.flagged],
                "tests": {"grid": {"p_value": grid.p_value, "p_adjusted": grid.p_value, "method": grid.method}},
            }
    if options.skin_tone and options.body_shape:
        part["seed_000"], part["_seed_result"] = _dbscan_part(
            merged, errors, people, options, body_treatment, cluster_threshold, rows_of
        )
    return part


def _cell_members(
    merged: Any, options: ReportOptions, band_labels: dict[str, Any], rows: np.ndarray, cell: Any
) -> list[str]:
    """Ids of the samples in a flagged cell (report.json; the web app shows the worst of them)."""
    inside = rows.copy()
    for factor, label in cell.labels.items():
        inside &= band_labels[factor] == label
    return [str(i) for i in merged.loc[inside, options.on].tolist()]


def _cell_json(cell: Any) -> dict[str, Any]:
    return {
        "labels": cell.labels,
        "description": cell.description,
        "n": cell.n,
        "n_clusters": cell.n_clusters,
        "mean_error": cell.mean,
        "rest_mean_error": cell.rest_mean,
        "gap": cell.gap,
        "ci_low": cell.ci_low,
        "ci_high": cell.ci_high,
        "p_adjusted": cell.p_adjusted,
        "tested": cell.tested,
        "flagged": cell.flagged,
        "level": cell.level,
        "reading": cell.reading,
        "performance": cell.performance,
    }


def _dbscan_part(
    merged: Any,
    errors: Any,
    people: Any,
    options: ReportOptions,
    body_treatment: Any,
    cluster_threshold: Any,
    rows_of: Any,
) -> Any:
    from metrics import unfairness

    rows = rows_of(options.skin_tone) & rows_of(options.body_shape)
    sub = merged.loc[rows]
    y = errors[rows]
    progress = options.progress
    if progress is None:
        progress = len(sub) >= _PROGRESS_ROWS
    settings = {
        "min_cluster_size": options.min_cluster_size,
        "error_threshold": cluster_threshold,
        "min_fraction": options.min_fraction,
    }
    if body_treatment == "categorical":
        # One-hot, not ordinal: no cluster mixes body shapes (see intersectional_unfairness's strata).
        features = sub[[options.skin_tone]].to_numpy(dtype=np.float64)
        settings["strata"] = sub[options.body_shape].to_numpy()
    else:
        features = sub[[options.body_shape, options.skin_tone]].to_numpy(dtype=np.float64)
    result = unfairness.intersectional_unfairness(
        y,
        features,
        min_samples=options.min_samples,
        progress=bool(progress),
        n_permutations=options.permutations,
        seed=options.seed,
        alpha=options.alpha,
        clusters=None if people is None else people[rows],
        **settings,
    )
    sweep = {options.min_samples: result.n_customers}
    sweep.update(
        unfairness.min_samples_sweep(
            y, features, [m for m in options.min_samples_sweep if m != options.min_samples], **settings
        )
    )
    ids = sub[options.on].to_numpy()
    strata = [options.body_shape] if body_treatment == "categorical" else []
    categorical = {
        c: sub[c].astype(str).to_numpy() for c in dict.fromkeys([*strata, options.gender, *options.groups]) if c
    }
    return _dbscan_json(result, ids, options, categorical, sweep, body_treatment), (result, rows)


def _dbscan_json(
    result: Any,
    ids: Any,
    options: ReportOptions,
    categorical: dict[str, Any],
    sweep: dict[int, int],
    body_treatment: Any,
) -> dict[str, Any]:
    from metrics.unfairness import describe_finding

    if body_treatment == "categorical":
        names = [str(options.skin_tone)]
        encoding = (
            f"{options.body_shape} is categorical: one-hot encoded and standardised with {options.skin_tone}, so "
            f"samples of different body shapes are never neighbours (at least 2.83 standardised units apart, beyond "
            f"every eps) and each region is one body shape times a {options.skin_tone} range; no order between "
            "body shapes is assumed"
        )
    else:
        names = [str(options.body_shape), str(options.skin_tone)]
        encoding = "both columns numeric, each standardised (z-score)"
    significant = bool(result.significant)
    part = {
        "test": "seed 000's DBSCAN ensemble; permutation null: errors shuffled across samples"
        + (" (whole people moved)" if options.cluster else "")
        + ", same clusters, same ensemble",
        "encoding": encoding,
        "body_shape_treatment": body_treatment,
        "score": result.n_customers,
        "n_customers": result.n_customers,
        "fraction": result.fraction,
        "fraction_ci": _ci(result.n_customers, result.n_samples),
        "members": [str(i) for i in ids[result.members]],
        "features": names,
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
        "error_threshold": result.error_threshold,
        "min_samples": result.min_samples,
        "min_samples_sweep": [{"min_samples": int(m), "n_customers": int(c)} for m, c in sorted(sweep.items())],
        "n_permutations": result.n_permutations,
        "p_value": result.p_value,
        "significant": result.significant,
        # Regions are named only when the ensemble's count beats its null: on data without any effect the
        # ensemble flags samples in most data sets.
        "findings": [
            {
                "n_customers": int(f.members.size),
                "description": describe_finding(f, names, categorical),
                "n_eps": f.n_eps,
                "consistency": f.consistency,
                "exponent_range": list(f.exponent_range),
                "feature_ranges": {name: list(r) for name, r in zip(names, f.feature_ranges, strict=True)},
                "mean_error": f.mean_error,
                "fraction_at_or_above": f.fraction_at_or_above,
                "members": [str(i) for i in ids[f.members]],
            }
            for f in result.findings
        ]
        if significant
        else [],
    }
    if result.null_counts is not None:
        null = result.null_counts
        part["null"] = {
            "mean_customers": float(null.mean()),
            "p95_customers": float(np.percentile(null, 95)),
            "max_customers": int(null.max()),
            "shuffles_flagging_any": _rate(int(np.count_nonzero(null > 0)), null.size),
        }
    return part


_ATTRIBUTE_NAMES = {"gender": "gender", "skin_tone": "skin tone", "body_shape": "body shape"}


def _performance(report: dict[str, Any], errors: np.ndarray, people: Any, options: ReportOptions) -> dict[str, Any]:
    """Where the mean error itself is above the threshold: overall, per band and per group (by intervals)."""
    from metrics.unfairness import mean_interval, performance_reading

    overall = mean_interval(errors, people, options.alpha)
    reading = performance_reading(overall.mean, overall.ci_low, overall.ci_high, options.threshold)
    by: dict[str, list[dict[str, Any]]] = {}
    above, may_reach = [], []
    for key, name in _ATTRIBUTE_NAMES.items():
        part = report.get(key)
        if not part:
            continue
        rows = part["bands"]["bands"] if part["treatment"] == "continuous" else part["groups"]
        by[key] = [
            {
                "label": r["label"],
                "n": r["n"],
                "mean_error": r["mean_error"],
                "ci_low": r["ci_low"],
                "ci_high": r["ci_high"],
                "reading": r["performance"],
            }
            for r in rows
            if r["n"]
        ]
        what = "band" if part["treatment"] == "continuous" else "group"
        above += [f"{name} {what} {r['label']}" for r in by[key] if r["reading"] == "above the threshold"]
        may_reach += [f"{name} {what} {r['label']}" for r in by[key] if r["reading"] == "may reach the threshold"]
    return {
        "threshold": options.threshold,
        "rule": report["settings"]["performance_rule"],
        "overall": {
            "n": overall.n,
            "n_clusters": overall.n_clusters,
            "mean_error": overall.mean,
            "ci_low": overall.ci_low,
            "ci_high": overall.ci_high,
            "reading": reading,
        },
        "above": above,
        "may_reach": may_reach,
        "by": by,
    }


def _summary(report: dict[str, Any], options: ReportOptions) -> tuple[list[str], list[str]]:
    """Every sentence of the summary, and the headline: the sentences a reader must not miss (the
    warnings, the clustering, performance, each attribute's verdict, the grid, the composition)."""
    lines = [f"Warning: {line}." for line in report.get("warnings", [])]
    headline = list(lines)
    clusters = report["inputs"].get("clusters")
    if clusters:
        deff = clusters.get("design_effect")
        lines.append(
            f"Clustered by {clusters['column']} ({clusters['source']}): {clusters['n_clusters']} people, "
            f"{clusters['mean_cluster_size']:.2g} samples each on average; every test and interval resamples whole "
            "people"
            + (
                f"; design effect of the mean error {deff:.2f} ({report['inputs']['n_samples']} samples carry the "
                f"information of about {clusters['effective_n']:.0f} independent ones)."
                if deff is not None
                else "."
            )
        )
        headline.append(lines[-1])
    lines.append(_performance_summary(report["performance"], options))
    headline.append(lines[-1])
    for key, label in (("gender", "Gender"), ("body_shape", "Body shape"), ("skin_tone", "Skin tone")):
        part = report[key]
        if part is None:
            continue
        if key == "body_shape":
            groups = (
                f": {len(part['groups_tested'])} groups tested ({', '.join(part['groups_tested'])})"
                if part["treatment"] == "categorical"
                else ""
            )
            lines.append(
                f"Body shape ({part['column']}) is treated as {part['treatment']}: {part['treatment_reason']}{groups}."
            )
        found = _attribute_summary(label, part, options)
        headline.append(found[0])
        lines.extend(found)
    inter = report["intersectional"]
    if inter is not None:
        found = _intersectional_summary(inter, options)
        headline.extend(line for line in found if not line.startswith("Seed 000"))
        lines.extend(found)
    composition = report.get("composition")
    if composition is not None:
        lines.append(_composition_summary(composition))
        headline.append(lines[-1])
    check = report.get("label_uncertainty")
    if check is not None:
        low, high = check["fraction_same_ci"]
        lines.append(
            f"Label uncertainty: with each image's tone drawn within its labelers' range ({check['n_draws']} draws), "
            f"the skin-tone conclusion ({check['conclusion']}) holds in {check['fraction_same']:.0%} of draws "
            f"(95% CI {low:.0%} to {high:.0%}); "
            + ("it survives the labelers' disagreement." if check["robust"] else "it does NOT survive reliably.")
        )
        headline.append(lines[-1])
    return lines, headline


def _performance_summary(perf: dict[str, Any], options: ReportOptions) -> str:
    overall = perf["overall"]
    ci = _interval(overall["ci_low"], overall["ci_high"])
    head = (
        f"Performance (apart from fairness): mean error {overall['mean_error']:.3g} ({ci}) against the threshold "
        f"{options.threshold:g}"
    )
    if overall["reading"] == "above the threshold":
        everyone = not any(
            r["reading"] in ("below the threshold", "may reach the threshold")
            for rows in perf["by"].values()
            for r in rows
        )
        head += (
            ": above it for everyone (every band and group), a performance problem, not a disparity"
            if everyone
            else ": above it overall"
        )
    elif perf["above"]:
        head += f"; above it in {', '.join(perf['above'])}"
    else:
        head += f": {overall['reading']}"
    if perf["may_reach"] and overall["reading"] != "above the threshold":
        head += f"; may reach it in {', '.join(perf['may_reach'])}"
    return head + "."


def _interval(low: Any, high: Any) -> str:
    return "no interval" if low is None else f"95% CI {low:.3g} to {high:.3g}"


def _attribute_summary(label: str, part: dict[str, Any], options: ReportOptions) -> list[str]:
    verdict = part["verdict"]
    continuous = part["treatment"] == "continuous"
    rows = part["bands"]["bands"] if continuous else part["groups"]
    by_label = {r["label"]: r for r in rows}
    what = "band" if continuous else "group"
    word = "significant" if verdict["significant"] else "not significant"
    if continuous:
        tests = verdict["tests"]
        head = (
            f"{label} disparity is {word} (robust trend test p {_p(tests['trend']['p_value'])}, band-gap test p "
            f"{_p(tests['band_gap']['p_value'])}, Holm-adjusted p {_p(verdict['p_value'])}); "
        )
    else:
        head = f"{label} disparity is {word} (group-gap test p {_p(verdict['p_value'])}, family-wise over the pairs); "
    head += f"{verdict['reading']}."
    lines = [head]
    worst, best = by_label[verdict["worst_band"]], by_label[verdict["best_band"]]
    if verdict["significant"]:
        detail = (
            f"{label}: {what} {verdict['worst_band']} fares worst (mean error {worst['mean_error']:.3g}, "
            f"{_interval(worst['ci_low'], worst['ci_high'])}, n = {worst['n']}) and {verdict['best_band']} best "
            f"({best['mean_error']:.3g}); largest gap {verdict['gap']:.3g} ({_interval(*verdict['gap_ci'])})"
        )
        if verdict["worse_end"]:
            detail += f"; the error grows towards the {verdict['worse_end']} end of the scale"
        lines.append(detail + ".")
    else:
        lines.append(
            f"{label}: no {what} is shown to fare differently; largest observed gap {verdict['gap']:.3g} "
            f"({_interval(*verdict['gap_ci'])})."
        )
    few = [r for r in rows if r["reading"] in ("too few to tell", "too few to test", "no samples")]
    gaps = [r["min_detectable_gap"] for r in few if r.get("min_detectable_gap") is not None]
    if few and len(few) == len(rows) and gaps:
        lines.append(
            f"{label}: too few to tell in every {what} (n = {min(r['n'] for r in few)} to {max(r['n'] for r in few)}; "
            f"gaps below {min(gaps):.2g} to {max(gaps):.2g} could go unseen): not significant does not mean fair."
        )
    elif few:
        lines.append(
            f"{label}: too few to tell for "
            + ", ".join(
                f"{what} {r['label']} (n = {r['n']}"
                + (
                    f"; a gap below {r['min_detectable_gap']:.2g} could go unseen"
                    if r.get("min_detectable_gap") is not None
                    else ""
                )
                + ")"
                for r in few
            )
            + ": not significant there does not mean fair."
        )
    seed = part["seed_000"]
    if continuous:
        fit = f"score {seed['score']:.3g}, {seed['score_ratio']:.0%} of the threshold {options.threshold:g}"
        extra = ""
        if verdict["significant"] and not seed["significant"] and verdict["gap_ci"][0] > abs(seed["score"]):
            extra = (
                "; it understates the band gap: a straight line spreads a step at one end of the scale over the "
                "whole range"
            )
        lines.append(
            f"Seed 000 reproduction: least-squares slope t-test p {_p(seed['p_value'])} ({fit}){extra}; it treats "
            "samples as independent and equally noisy, so it does not decide the verdict."
        )
    else:
        tested = "" if seed["n_pairs"] == 1 else f", {seed['correction']}, adjusted p {_p(seed['p_value_adjusted'])}"
        lines.append(
            f"Seed 000 reproduction: KS test p {_p(seed['p_value'])}{tested} ({seed['p_value_method']}); score "
            f"{seed['score']:.3g} ({seed['higher_error_group']} worse than {seed['lower_error_group']}). The KS test "
            "also fires when a group is only noisier; the verdict compares mean errors."
        )
    return lines


def _p(value: float) -> str:
    return "< 0.0001" if value < 1e-4 else f"= {value:.3g}"


def _intersectional_summary(inter: dict[str, Any], options: ReportOptions) -> list[str]:
    lines = []
    grid, verdict = inter.get("grid"), inter.get("verdict")
    if grid is None or verdict is None:
        if inter.get("grid_error"):
            lines.append(f"Intersectional grid: not computed ({inter['grid_error']}).")
    elif verdict["significant"]:
        lines.append(
            f"Intersectional ({' x '.join(grid['factors'])} grid, {grid['n_tested']} of {grid['n_cells']} cells "
            f"tested): significant (max-t p {_p(grid['p_value'])}); {verdict['reading']}."
        )
        for cell in grid["flagged"][:3]:
            lines.append(
                f"Region: {cell['description']}: n = {cell['n']}, mean error {cell['mean_error']:.3g} against "
                f"{cell['rest_mean_error']:.3g} elsewhere, gap {cell['gap']:.3g} "
                f"(simultaneous {_interval(cell['ci_low'], cell['ci_high'])}), {cell['level']}."
            )
        if len(grid["flagged"]) > 3:
            lines.append(f"{len(grid['flagged']) - 3} more region(s) in report.json.")
    else:
        lines.append(
            f"Intersectional ({' x '.join(grid['factors'])} grid, {grid['n_tested']} of {grid['n_cells']} cells "
            f"tested): no cell differs from the rest (max-t p {_p(grid['p_value'])}); {verdict['reading']}."
        )
    seed = inter.get("seed_000")
    if seed is not None:
        counts = ", ".join(f"{s['min_samples']} -> {s['n_customers']}" for s in seed["min_samples_sweep"])
        setting = (
            f"DBSCAN min_samples = {seed['min_samples']} (not given by seed 000; flagged samples by min_samples: "
            f"{counts}); cluster error threshold {seed['error_threshold']:g}"
        )
        if seed["p_value"] is None:
            verdict_words = "no permutation null was run (--permutations 0), so this count has no null reference"
        else:
            verdict_words = (
                f"{'significant' if seed['significant'] else 'not significant'} against {seed['n_permutations']} "
                f"shuffles (permutation p = {seed['p_value']:.3g}; shuffled data flag "
                f"{seed['null']['mean_customers']:.0f} on average)"
            )
        low, high = seed["fraction_ci"]
        lines.append(
            f"Seed 000 reproduction (DBSCAN ensemble): {seed['n_customers']} sample(s) ({seed['fraction']:.1%}, 95% CI "
            f"{low:.1%} to {high:.1%}) in underperforming clusters; {verdict_words}; {setting}."
        )
    return lines


def _composition_summary(composition: dict[str, Any]) -> str:
    n = composition["n"]
    tones = {row["tone"]: row for row in composition["tones"]}
    parts = []
    if composition["absent"]:
        parts.append(f"no image of tone(s) {', '.join(map(str, composition['absent']))}")
    if composition["under_represented"]:
        parts.append(
            "under-represented: "
            + ", ".join(f"tone {t} ({tones[t]['n']} of {n})" for t in composition["under_represented"])
        )
    if composition["below_half"]:
        parts.append(
            "below half an even share (not conclusive): "
            + ", ".join(f"tone {t} ({tones[t]['n']} of {n})" for t in composition["below_half"])
        )
    head = (
        f"Composition: NSD {composition['nsd']:.3g} over {composition['levels']} tones (seed 003's NSD, the same "
        "number as seed 002's normalised L2 discrepancy from uniform)"
    )
    if parts:
        return head + "; " + "; ".join(parts) + ": the skin-tone scores say little about these tones."
    return head + "; every tone holds at least half an even share."


def _groups_section(options: ReportOptions, merged: Any, people: Any) -> dict[str, Any] | str:
    """Mean error by each ``--groups`` column and by their intersection, with cluster-robust intervals."""
    from metrics.unfairness import group_disparity

    if not options.groups:
        return "not requested (use --groups col1,col2)"
    sections = {}
    combos = [[c] for c in options.groups]
    if len(options.groups) > 1:
        combos.append(list(options.groups))
    errors = merged[options.error].to_numpy(dtype=float)
    for columns in combos:
        labels = merged[columns].astype(str).agg(" & ".join, axis=1).to_numpy()
        names, counts = np.unique(labels, return_counts=True)
        section: dict[str, Any] = {
            "by_group": {},
            "difference_between_groups": None,
            "difference_ci": None,
            "difference_p_value": None,
            "difference_reason": None,
            "small_groups": [str(g) for g, k in zip(names, counts, strict=True) if k < 30],
            "min_group_size": 30,
        }
        try:
            result = group_disparity(
                errors,
                labels,
                threshold=options.threshold,
                alpha=options.alpha,
                clusters=people,
                n_boot=options.band_permutations,
                seed=options.seed,
            )
        except ValueError as exc:
            section["difference_reason"] = str(exc)
            for name in names:
                mean = float(errors[labels == name].mean())
                section["by_group"][str(name)] = {
                    "mean_error": mean,
                    "ci_low": None,
                    "ci_high": None,
                    "n": int((labels == name).sum()),
                    "reason": "too few to test",
                }
        else:
            for g in result.groups:
                section["by_group"][g.label] = {
                    "mean_error": g.mean,
                    "ci_low": g.ci_low,
                    "ci_high": g.ci_high,
                    "n": g.n,
                    "n_clusters": g.n_clusters,
                    "reason": None if g.tested else "fewer than 2 people: no interval",
                }
            section.update(
                difference_between_groups=result.gap,
                difference_ci=list(result.gap_ci),
                difference_p_value=result.p_value,
            )
        sections[" x ".join(columns)] = section
    return sections
