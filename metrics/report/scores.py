"""The report as a JSON-serialisable dict: the four scores, summary sentences, mean error by group."""

from __future__ import annotations

import numpy as np

from .inputs import MIN_GROUP_SIZE, ReportInputError, ReportOptions, _join

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
        Keys ``inputs``, ``settings``, ``warnings`` (groups left out of a test, and why),
        ``gender``, ``skin_tone``, ``body_shape`` (``treatment``: ``"continuous"`` or
        ``"categorical"``), ``intersectional`` (``None`` when not requested), ``summary``
        (sentences, the warnings first) and ``groups``.

    Raises
    ------
    ReportInputError
        Invalid inputs or too few samples for a score.
    """
    from metrics import unfairness

    merged, unmatched, body_treatment = _join(options)
    errors = merged[options.error].to_numpy(dtype=np.float64)
    cluster_threshold = (
        options.threshold if options.cluster_error_threshold is None else options.cluster_error_threshold
    )
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
            "band_rule": (
                "continuous attributes: the verdict is the worst of the P5-P95 score's severity, the largest "
                "band gap's severity, and severe when a band's mean error reaches the threshold"
            ),
            "cluster_error_threshold": cluster_threshold,
            "cluster_error_threshold_source": (
                "the error threshold" if options.cluster_error_threshold is None else "set (--cluster-error-threshold)"
            ),
            "min_samples": options.min_samples,
            "min_samples_note": "DBSCAN min_samples is not given by seed 000; it is a parameter of this report",
            "n_bands": options.n_bands,
            "permutations": options.permutations,
            "band_permutations": options.band_permutations,
            "seed": options.seed,
            "min_cluster_size": options.min_cluster_size,
            "min_fraction": options.min_fraction,
            "body_shape_treatment": body_treatment,
            "body_shape_kind": options.body_shape_kind,
            "body_shape_rule": _TREATMENT_RULE,
            "min_group_size": MIN_GROUP_SIZE,
            "small_group_rule": (
                f"a group of a categorical attribute with fewer than {MIN_GROUP_SIZE} rows is left out of that "
                "attribute's KS tests (named in the warnings); its rows stay in every other score; fewer than two "
                "groups left is an error"
            ),
        },
        "warnings": [],
        "gender": None,
        "skin_tone": None,
        "body_shape": None,
        "intersectional": None,
        "label_uncertainty": None,
        "composition": None,
    }
    problems = []
    results: dict = {}

    def step(name: str) -> None:
        if options.on_step is not None:
            options.on_step(name)

    categorical_parts = [("gender", options.gender)]
    if body_treatment == "categorical":
        categorical_parts.append(("body_shape", options.body_shape))
    for key, column in categorical_parts:
        if not column:
            continue
        step(key)
        labels = merged[column].astype(str).to_numpy()
        try:
            result, part, warned = _categorical_part(key, column, errors, labels, options)
        except ValueError as exc:
            problems.append(f"{key.replace('_', ' ')} ({column}): {exc}")
            continue
        report["warnings"].extend(warned)
        results[key] = result
        report[key] = part
    continuous_parts = [("skin_tone", options.skin_tone)]
    if body_treatment == "continuous":
        continuous_parts.append(("body_shape", options.body_shape))
    for key, column in continuous_parts:
        if not column:
            continue
        step(key)
        try:
            attribute = merged[column].to_numpy(dtype=np.float64)
            result = unfairness.continuous_unfairness(errors, attribute, alpha=options.alpha)
            bands = unfairness.band_unfairness(
                errors,
                attribute,
                threshold=options.threshold,
                alpha=options.alpha,
                n_bands=options.n_bands,
                n_permutations=options.band_permutations,
                seed=options.seed,
            )
            results[key] = result
            results[f"{key}_bands"] = bands
            report[key] = _continuous_json(result, column, options)
            report[key]["bands"] = _bands_json(bands)
            report[key]["verdict"] = _verdict_json(unfairness.continuous_verdict(result, bands))
            if key == "body_shape":
                report[key]["treatment"] = "continuous"
                report[key]["treatment_reason"] = _treatment_reason("continuous", options)
        except ValueError as exc:
            problems.append(f"{key.replace('_', ' ')} ({column}): {exc}")
    if problems:
        raise ReportInputError(problems)
    if options.skin_tone:
        from .composition import tone_composition

        try:
            report["composition"] = tone_composition(merged[options.skin_tone].to_numpy(), options.tone_levels)
        except ValueError as exc:
            raise ReportInputError([f"skin tone ({options.skin_tone}): {exc}"]) from None
    if options.tone_min and options.tone_max:
        step("label_uncertainty")
        try:
            check = unfairness.label_uncertainty(
                errors,
                merged[options.skin_tone].to_numpy(dtype=np.float64),
                merged[options.tone_min].to_numpy(dtype=np.float64),
                merged[options.tone_max].to_numpy(dtype=np.float64),
                threshold=options.threshold,
                alpha=options.alpha,
                n_draws=options.uncertainty_draws,
                n_bands=options.n_bands,
                seed=options.seed,
                labeler_tones={c: merged[c].to_numpy(dtype=np.float64) for c in options.labeler_columns} or None,
            )
        except ValueError as exc:
            raise ReportInputError([f"label-uncertainty check: {exc}"]) from None
        report["label_uncertainty"] = {
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
    if options.skin_tone and options.body_shape:
        step("intersectional")
        progress = options.progress
        if progress is None:
            progress = len(merged) >= _PROGRESS_ROWS
        settings = {
            "min_cluster_size": options.min_cluster_size,
            "error_threshold": cluster_threshold,
            "min_fraction": options.min_fraction,
        }
        if body_treatment == "categorical":
            # One-hot, not ordinal: no cluster mixes body shapes (see intersectional_unfairness's strata).
            features = merged[[options.skin_tone]].to_numpy(dtype=np.float64)
            settings["strata"] = merged[options.body_shape].to_numpy()
        else:
            features = merged[[options.body_shape, options.skin_tone]].to_numpy(dtype=np.float64)
        result = unfairness.intersectional_unfairness(
            errors,
            features,
            min_samples=options.min_samples,
            progress=bool(progress),
            n_permutations=options.permutations,
            seed=options.seed,
            alpha=options.alpha,
            **settings,
        )
        sweep = {options.min_samples: result.n_customers}
        sweep.update(
            unfairness.min_samples_sweep(
                errors, features, [m for m in options.min_samples_sweep if m != options.min_samples], **settings
            )
        )
        results["intersectional"] = result
        ids = merged[options.on].to_numpy()
        strata = [options.body_shape] if body_treatment == "categorical" else []
        categorical = {
            c: merged[c].astype(str).to_numpy() for c in dict.fromkeys([*strata, options.gender, *options.groups]) if c
        }
        report["intersectional"] = _intersectional_json(result, ids, options, categorical, sweep, body_treatment)
    report["summary"] = _summary(report, options)
    report["groups"] = _groups_section(options, merged)
    report["_results"] = results
    report["_merged"] = merged
    return report


def _ci(k: int, n: int) -> list[float]:
    from metrics.intervals import wilson_interval

    return list(wilson_interval(k, n))


def _rate(k: int, n: int) -> dict:
    from metrics.intervals import wilson_interval

    low, high = wilson_interval(k, n)
    return {"k": int(k), "n": int(n), "rate": k / n if n else None, "ci_low": low, "ci_high": high}


def _intersectional_json(
    result, ids, options: ReportOptions, categorical: dict, sweep: dict, body_treatment: str | None = None
) -> dict:
    from metrics.unfairness import describe_finding

    if body_treatment == "categorical":
        names = [options.skin_tone]
        encoding = (
            f"{options.body_shape} is categorical: one-hot encoded and standardised with {options.skin_tone}, so "
            f"samples of different body shapes are never neighbours (at least 2.83 standardised units apart, beyond "
            f"every eps) and each region is one body shape times a {options.skin_tone} range; no order between "
            "body shapes is assumed"
        )
    else:
        names = [options.body_shape, options.skin_tone]
        encoding = "both columns numeric, each standardised (z-score)"
    part = {
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
        "test": "permutation: errors shuffled across customers, same clusters, same ensemble",
        "n_permutations": result.n_permutations,
        "p_value": result.p_value,
        "significant": result.significant,
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
        ],
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


def _bands_json(bands) -> dict:
    return {
        "kind": bands.kind,
        "bands": [
            {
                "label": b.label,
                "low": b.low,
                "high": b.high,
                "n": b.n,
                "mean_error": b.mean,
                "ci_low": b.ci_low,
                "ci_high": b.ci_high,
                "small": b.small,
                "reaches_threshold": b.label in bands.above_threshold,
            }
            for b in bands.bands
        ],
        "gap": bands.gap,
        "gap_ci": list(bands.gap_ci),
        "gap_p_value": bands.gap_p_value,
        "gap_significant": bands.gap_significant,
        "gap_severity": bands.gap_severity.level,
        "gap_severity_ratio": bands.gap_severity.ratio,
        "worst_band": bands.worst_band,
        "best_band": bands.best_band,
        "worse_end": bands.worse_end,
        "bands_reaching_threshold": list(bands.above_threshold),
        "test": bands.method,
        "confidence": 1 - bands.alpha,
    }


def _verdict_json(verdict) -> dict:
    return {
        "significant": verdict.significant,
        "p_value": verdict.p_value,
        "level": verdict.level,
        "driver": verdict.driver,
        "worst_band": verdict.worst_band,
        "worse_end": verdict.worse_end,
        "rule": "significant: slope t-test or band-gap test, Holm-adjusted over the two",
    }


_TREATMENT_RULE = (
    "--body-shape-kind auto (default): continuous (slope t-test and bands) when every value is a number, "
    "categorical (groups, like gender: pairwise KS tests, Holm-corrected) when no value is; a mix of numbers "
    "and text is refused. --body-shape-kind continuous or categorical forces one treatment."
)


def _treatment_reason(treatment: str, options: ReportOptions) -> str:
    if options.body_shape_kind != "auto":
        return f"set by --body-shape-kind {options.body_shape_kind}"
    if treatment == "continuous":
        return "every value is a number (--body-shape-kind categorical treats numeric codes as groups)"
    return "no value is a number: each distinct value is a group"


def _categorical_part(key: str, column: str, errors: np.ndarray, labels: np.ndarray, options: ReportOptions):
    """KS tests over the groups of a categorical attribute, groups below ``MIN_GROUP_SIZE`` left out.

    Returns the result, its JSON part and the warnings; raises ValueError when fewer than two groups can
    be tested.
    """
    from metrics.unfairness import categorical_unfairness

    what = key.replace("_", " ")
    names, counts = np.unique(labels, return_counts=True)
    sizes = dict(zip(names.tolist(), counts.tolist(), strict=True))
    small = [g for g in names.tolist() if sizes[g] < MIN_GROUP_SIZE]
    tested = [g for g in names.tolist() if sizes[g] >= MIN_GROUP_SIZE]
    listing = ", ".join(f"{g!r} ({sizes[g]} row{'s' if sizes[g] != 1 else ''})" for g in names.tolist())
    if len(tested) < 2:
        raise ValueError(
            f"nothing left to test: the KS test compares at least two groups of at least {MIN_GROUP_SIZE} rows, "
            f"and the column has {len(tested)} such group(s) among {listing}; merge small groups or leave "
            f"out --{key.replace('_', '-')}"
        )
    warned = [
        f"{what} ({column}): group {g!r} has {sizes[g]} row(s), fewer than the {MIN_GROUP_SIZE} a KS test needs; "
        f"it is left out of the {what} tests (its rows stay in every other score)"
        for g in small
    ]
    keep = np.isin(labels, tested)
    result = categorical_unfairness(errors[keep], labels[keep], alpha=options.alpha)
    part = _categorical_json(result, options, column)
    part["treatment"] = "categorical"
    if key == "body_shape":
        part["treatment_reason"] = _treatment_reason("categorical", options)
    part["groups_tested"] = [str(g) for g in tested]
    part["left_out"] = [
        {
            "group": str(g),
            "n": int(sizes[g]),
            "mean_error": float(errors[labels == g].mean()),
            "reason": f"fewer than {MIN_GROUP_SIZE} rows: not tested",
        }
        for g in small
    ]
    return result, part, warned


def _categorical_json(result, options: ReportOptions, column: str | None = None) -> dict:
    from metrics.unfairness import severity

    sev = severity(result.score, options.threshold)
    return {
        "column": options.gender if column is None else column,
        "test": "two-sample Kolmogorov-Smirnov",
        "correction": result.correction,
        "n_pairs": result.n_pairs,
        "p_value_adjusted": result.p_value_adjusted,
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
                "p_value_adjusted": p.p_value_adjusted,
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
    lines = [f"Warning: {line}." for line in report.get("warnings", [])]
    if report["gender"] is not None:
        lines.append(_categorical_summary("Gender", report["gender"], options))
    for key, label in (("body_shape", "Body shape"), ("skin_tone", "Skin tone")):
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
                f"Body shape ({part['column']}) is treated as {part['treatment']} ({part['treatment_reason']}){groups}."
            )
        if part.get("treatment") == "categorical":
            lines.append(_categorical_summary(label, part, options))
        else:
            lines.extend(_continuous_summary(label, part, options))
    inter = report["intersectional"]
    if inter is not None:
        lines.extend(_intersectional_summary(inter, options))
    composition = report.get("composition")
    if composition is not None:
        under = composition["under_represented"]
        least = composition["tones"][composition["least_represented"] - 1]
        lines.append(
            f"Composition: NSD {composition['nsd']:.3g} and normalised discrepancy from uniform "
            f"{composition['discrepancy_l2']:.3g} over {composition['levels']} tones; "
            + (
                f"under-represented: tone(s) {', '.join(map(str, under))} (share's 95% upper bound below half "
                f"of 1/{composition['levels']}), so the skin-tone scores say little about them."
                if under
                else f"no tone is clearly under-represented (least: tone {least['tone']}, {least['share']:.1%})."
            )
        )
    check = report.get("label_uncertainty")
    if check is not None:
        low, high = check["fraction_same_ci"]
        lines.append(
            f"Label uncertainty: with each image's tone drawn within its labelers' range ({check['n_draws']} draws), "
            f"the skin-tone conclusion ({check['conclusion']}) holds in {check['fraction_same']:.0%} of draws "
            f"(95% CI {low:.0%} to {high:.0%}); "
            + ("it survives the labelers' disagreement." if check["robust"] else "it does NOT survive reliably.")
        )
    return lines


def _categorical_summary(label: str, part: dict, options: ReportOptions) -> str:
    unit_threshold = f"the error threshold {options.threshold:g}"
    tested = "" if part["n_pairs"] == 1 else f", {part['correction']}, adjusted p = {part['p_value_adjusted']:.3g}"
    if part["significant"]:
        return (
            f"{label} unfairness is significant (KS p = {part['p_value']:.3g}{tested} < "
            f"{options.alpha:g}); score {part['score']:.3g} ({part['higher_error_group']} worse than "
            f"{part['lower_error_group']}) is {part['severity']} ({part['severity_ratio']:.0%} of {unit_threshold})."
        )
    return (
        f"{label} unfairness is not significant (KS p = {part['p_value']:.3g}{tested} >= "
        f"{options.alpha:g}); the score {part['score']:.3g} would be "
        f"{part['severity']} ({part['severity_ratio']:.0%} of {unit_threshold})."
    )


def _continuous_summary(label: str, part: dict, options: ReportOptions) -> list[str]:
    bands, verdict = part["bands"], part["verdict"]
    by_label = {b["label"]: b for b in bands["bands"]}
    worst, best = by_label[bands["worst_band"]], by_label[bands["best_band"]]
    word = "significant" if verdict["significant"] else "not significant"
    head = (
        f"{label} unfairness is {word} (slope t-test p {_p(part['p_value'])}, band-gap test p "
        f"{_p(bands['gap_p_value'])}, Holm-adjusted p {_p(verdict['p_value'])}); "
    )
    fit = f"{part['score']:.3g}, {part['severity_ratio']:.0%} of the error threshold {options.threshold:g}"
    if verdict["level"] == "negligible":
        head += (
            f"severity negligible: seed 000's P5-P95 score ({fit}), the largest band gap "
            f"({bands['gap']:.3g}) and every band mean stay below the severity rule."
        )
    else:
        because = {
            "score": f"seed 000's P5-P95 score ({fit})",
            "band gap": f"the gap between bands {bands['worst_band']} and {bands['best_band']}",
            "band mean": f"band {bands['worst_band']}'s mean error reaching the threshold",
        }[verdict["driver"]]
        head += f"severity {verdict['level']}, set by {because}"
        if verdict["driver"] != "score":
            head += (
                f"; seed 000's P5-P95 score alone ({fit}) understates it: "
                "a straight line spreads a step at one end over the whole scale"
            )
        head += "."
    gap_low, gap_high = bands["gap_ci"]
    detail = (
        f"{label} by band: mean error highest in {bands['worst_band']} ({worst['mean_error']:.3g}, "
        f"95% CI {_fmt(worst['ci_low'])} to {_fmt(worst['ci_high'])}, n = {worst['n']}) and lowest in "
        f"{bands['best_band']} ({best['mean_error']:.3g}); the gap {bands['gap']:.3g} (95% CI {gap_low:.3g} "
        f"to {gap_high:.3g}) is {bands['gap_severity']} ({bands['gap_severity_ratio']:.0%} of the threshold); "
        f"the {bands['worse_end']} end of the scale is worse."
    )
    if bands["bands_reaching_threshold"]:
        detail += f" Mean error reaches the threshold in band(s) {', '.join(bands['bands_reaching_threshold'])}."
    return [head, detail]


def _p(value: float) -> str:
    return "< 0.0001" if value < 1e-4 else f"= {value:.3g}"


def _fmt(value) -> str:
    return "undefined" if value is None else f"{value:.3g}"


def _intersectional_summary(inter: dict, options: ReportOptions) -> list[str]:
    low, high = inter["fraction_ci"]
    counts = ", ".join(f"{s['min_samples']} -> {s['n_customers']}" for s in inter["min_samples_sweep"])
    setting = (
        f"DBSCAN min_samples = {inter['min_samples']} (not given by seed 000; flagged customers by "
        f"min_samples: {counts}); cluster error threshold {inter['error_threshold']:g}."
    )
    if inter.get("body_shape_treatment") == "categorical":
        setting += f" Encoding: {inter['encoding']}."
    if inter["p_value"] is None:
        verdict = "no permutation null was run (--permutations 0), so this count has no null reference"
    else:
        null = inter["null"]
        verdict = (
            f"{'significant' if inter['significant'] else 'not significant'} against "
            f"{inter['n_permutations']} shuffles of the errors (permutation p = {inter['p_value']:.3g}; shuffled "
            f"data flag {null['mean_customers']:.0f} customers on average)"
        )
    if not inter["n_customers"]:
        return [f"Intersectional: no underperforming cluster in any DBSCAN run; {verdict}. {setting}"]
    lines = [
        f"Intersectional: {inter['n_customers']} customer(s) ({inter['fraction']:.1%}, 95% CI {low:.1%} to "
        f"{high:.1%}) are in underperforming clusters ({len(inter['eps_with_underperforming_clusters'])} of "
        f"{inter['n_eps']} DBSCAN runs found at least one); {verdict}. {setting}"
    ]
    for finding in inter["findings"][:3]:
        lo, hi = finding["exponent_range"]
        lines.append(
            f"Region: {finding['description']}: {finding['n_customers']} customers, flagged at "
            f"{finding['n_eps']} of {inter['n_eps']} eps (log10 eps {lo:g} to {hi:g}), mean error "
            f"{finding['mean_error']:.3g}."
        )
    if len(inter["findings"]) > 3:
        lines.append(f"{len(inter['findings']) - 3} more region(s) in report.json.")
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
