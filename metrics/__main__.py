"""Command line: ``python -m metrics report --attributes A --predictions P --out DIR`` and
``python -m metrics gate report.json --fail-on significant-severe --max-score skin_tone=1.0``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m metrics")
    commands = parser.add_subparsers(dest="command", required=True)
    report = commands.add_parser(
        "report",
        help="seed 000's four unfairness scores as report.json and report.html",
        description="Join per-sample attributes and model errors on an id column and "
        "write report.json and report.html (figures embedded) into --out.",
    )
    report.add_argument("--attributes", required=True, type=Path, help="CSV, JSONL or Parquet")
    report.add_argument("--predictions", required=True, type=Path, help="CSV, JSONL or Parquet")
    report.add_argument("--out", required=True, type=Path, help="output directory")
    report.add_argument("--on", default="image_id", help="id column in both files")
    report.add_argument("--error", default="error", help="per-sample error column")
    report.add_argument("--skin-tone", help="skin-tone column (numeric)")
    report.add_argument("--gender", help="gender column (categorical)")
    report.add_argument(
        "--body-shape",
        help="body-shape column: numbers are scored as a continuous attribute, text (slim, average, ...) as groups",
    )
    report.add_argument(
        "--body-shape-kind",
        choices=("auto", "continuous", "categorical"),
        default="auto",
        help="auto (default): continuous when every value is a number, categorical when none is; "
        "categorical also turns numeric codes into groups",
    )
    report.add_argument("--threshold", type=float, default=2.0, help="error threshold")
    report.add_argument("--alpha", type=float, default=0.05, help="significance level")
    report.add_argument(
        "--cluster-error-threshold",
        type=float,
        default=None,
        help="error at or above which a cluster member counts as underperformed (default: --threshold)",
    )
    report.add_argument(
        "--min-samples", type=int, default=10, help="DBSCAN min_samples (not given by seed 000; default 10)"
    )
    report.add_argument(
        "--min-samples-sweep",
        default="5,20",
        help="other min_samples values whose flagged counts the report shows (comma-separated; '' for none)",
    )
    report.add_argument(
        "--permutations",
        type=int,
        default=199,
        help="shuffles of the errors for the intersectional permutation p-value (0: none)",
    )
    report.add_argument(
        "--band-permutations",
        "--bootstraps",
        dest="band_permutations",
        type=int,
        default=999,
        help="wild bootstrap resamples of the disparity tests: bands, groups, grid cells (default 999)",
    )
    report.add_argument(
        "--cluster",
        help="column naming the person of each sample (e.g. subject_id): photos of one person are resampled "
        "together in every test and interval",
    )
    report.add_argument(
        "--grid",
        default="",
        help="attributes crossed by the intersectional grid, comma-separated among skin_tone, body_shape, gender "
        "(default: skin_tone,body_shape when both are given)",
    )
    report.add_argument("--min-cell", type=int, default=10, help="fewest samples a grid cell needs to be tested")
    report.add_argument("--bands", type=int, default=5, help="largest number of bands per continuous attribute")
    report.add_argument(
        "--tone-bands",
        type=int,
        default=None,
        help="bands of the skin-tone verdict on a scale (default: one per tone, MST 10; 5 gives pairs of tones)",
    )
    report.add_argument("--seed", type=int, default=0, help="seed of every permutation and draw")
    report.add_argument(
        "--no-figures",
        dest="figures",
        action="store_false",
        help="write report.json and report.html without drawing the figures (most of a small report's time)",
    )
    report.add_argument("--tone-min", help="column with each image's smallest skin-tone label")
    report.add_argument(
        "--tone-max",
        help="column with each image's largest skin-tone label (with --tone-min: the label-uncertainty check)",
    )
    report.add_argument(
        "--tone-levels", type=int, default=None, help="tones of the skin-tone scale for the composition (MST: 10)"
    )
    report.add_argument(
        "--labeler-columns",
        default="",
        help="comma-separated columns, one labeler's tone each (empty where none): scored alone in the check",
    )
    report.add_argument("--uncertainty-draws", type=int, default=100, help="draws of the label-uncertainty check")
    report.add_argument("--min-cluster-size", type=int, default=10)
    report.add_argument("--min-fraction", type=float, default=0.7)
    report.add_argument(
        "--allow-unmatched",
        action="store_true",
        help="score the ids present in both files instead of failing",
    )
    report.add_argument("--groups", default="", help="comma-separated columns for disaggregated results")
    bar = report.add_mutually_exclusive_group()
    bar.add_argument("--progress", dest="progress", action="store_true", default=None)
    bar.add_argument("--no-progress", dest="progress", action="store_false")
    gate = commands.add_parser(
        "gate",
        help="pass or fail a report.json against rules (exit 1 on failure)",
        description="Check report.json against gate rules; print the reasons and exit 1 when a rule fails, "
        "0 when all pass, 2 for invalid input. --fail-on (repeatable), on each disparity verdict: significant; "
        "significant-moderate / significant-severe (significant and at least that level, read from the gap's "
        "interval); severe; not-negligible (a gap of half the threshold is not excluded); and on performance: "
        "performance (a band or group's mean error above the threshold by its interval), performance-possible "
        "(also where the interval contains it). --max-score ATTR=VALUE (repeatable, ATTR in gender, body_shape, "
        "skin_tone, intersectional): fail when the largest gap or seed 000's score (intersectional: seed 000's "
        "flagged samples) exceeds VALUE. Without rules: --fail-on significant-severe.",
    )
    gate.add_argument("report", type=Path, help="report.json written by 'python -m metrics report'")
    gate.add_argument("--fail-on", action="append", default=None, metavar="RULE")
    gate.add_argument("--max-score", action="append", default=[], metavar="ATTR=VALUE")
    return parser


def _gate(args: argparse.Namespace) -> int:
    import json

    from metrics.gate import evaluate, parse_rules

    try:
        default = [] if args.max_score else ["significant-severe"]
        rules = parse_rules(args.fail_on or default, args.max_score)
        report = json.loads(Path(args.report).read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = evaluate(report, rules)
    for line in result.checked:
        print(f"checked {line}")
    for line in result.reasons:
        print(f"FAIL {line}")
    print("gate passed" if result.passed else "gate failed")
    return 0 if result.passed else 1


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit code (2 for invalid input)."""
    args = _parser().parse_args(argv)
    if args.command == "gate":
        return _gate(args)
    from metrics.report import ReportInputError, ReportOptions, write_report

    problems = []
    if not 0 < args.alpha < 1:
        problems.append(f"--alpha must be in (0, 1), got {args.alpha}")
    if not args.threshold > 0:
        problems.append(f"--threshold must be positive, got {args.threshold}")
    if args.permutations < 0 or args.band_permutations < 1 or args.uncertainty_draws < 1 or args.bands < 2:
        problems.append("--permutations >= 0, --band-permutations >= 1, --uncertainty-draws >= 1, --bands >= 2")
    if args.tone_bands is not None and args.tone_bands < 2:
        problems.append(f"--tone-bands must be at least 2, got {args.tone_bands}")
    if args.min_cell < 2:
        problems.append(f"--min-cell must be at least 2, got {args.min_cell}")
    try:
        [int(m) for m in args.min_samples_sweep.split(",") if m.strip()]
    except ValueError:
        problems.append(f"--min-samples-sweep must be comma-separated whole numbers, got {args.min_samples_sweep!r}")
    if problems:
        for line in problems:
            print(f"error: {line}", file=sys.stderr)
        return 2
    options = ReportOptions(
        attributes=args.attributes,
        predictions=args.predictions,
        out=args.out,
        on=args.on,
        error=args.error,
        skin_tone=args.skin_tone,
        gender=args.gender,
        body_shape=args.body_shape,
        body_shape_kind=args.body_shape_kind,
        threshold=args.threshold,
        alpha=args.alpha,
        cluster_error_threshold=args.cluster_error_threshold,
        min_samples=args.min_samples,
        min_cluster_size=args.min_cluster_size,
        min_fraction=args.min_fraction,
        allow_unmatched=args.allow_unmatched,
        progress=args.progress,
        groups=[g for g in args.groups.split(",") if g],
        n_bands=args.bands,
        tone_bands=args.tone_bands,
        permutations=args.permutations,
        band_permutations=args.band_permutations,
        min_samples_sweep=[int(m) for m in args.min_samples_sweep.split(",") if m.strip()],
        tone_min=args.tone_min,
        tone_max=args.tone_max,
        uncertainty_draws=args.uncertainty_draws,
        tone_levels=args.tone_levels,
        labeler_columns=[c for c in args.labeler_columns.split(",") if c],
        seed=args.seed,
        cluster=args.cluster or None,
        grid_factors=[g.strip() for g in args.grid.split(",") if g.strip()] or None,
        min_cell=args.min_cell,
        figures=args.figures,
    )
    try:
        content = write_report(options)
    except ReportInputError as exc:
        for line in exc.problems:
            print(f"error: {line}", file=sys.stderr)
        return 2
    for line in content["summary"]:
        print(line)
    figures = f" and the figures in {args.out / 'figures'}" if args.figures else " (no figures: --no-figures)"
    print(f"wrote {args.out / 'report.json'}, {args.out / 'report.html'}{figures}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
