"""Command line: ``python -m metrics report --attributes A --predictions P --out DIR``."""

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
    report.add_argument("--body-shape", help="body-shape column (numeric)")
    report.add_argument("--threshold", type=float, default=2.0, help="error threshold")
    report.add_argument("--alpha", type=float, default=0.05, help="significance level")
    report.add_argument(
        "--cluster-error-threshold",
        type=float,
        default=1.7,
        help="error at or above which a cluster member counts as underperformed",
    )
    report.add_argument("--min-samples", type=int, default=10, help="DBSCAN min_samples")
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
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit code (2 for invalid input)."""
    args = _parser().parse_args(argv)
    from metrics.report import ReportInputError, ReportOptions, write_report

    problems = []
    if not 0 < args.alpha < 1:
        problems.append(f"--alpha must be in (0, 1), got {args.alpha}")
    if not args.threshold > 0:
        problems.append(f"--threshold must be positive, got {args.threshold}")
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
        threshold=args.threshold,
        alpha=args.alpha,
        cluster_error_threshold=args.cluster_error_threshold,
        min_samples=args.min_samples,
        min_cluster_size=args.min_cluster_size,
        min_fraction=args.min_fraction,
        allow_unmatched=args.allow_unmatched,
        progress=args.progress,
        groups=[g for g in args.groups.split(",") if g],
    )
    try:
        content = write_report(options)
    except ReportInputError as exc:
        for line in exc.problems:
            print(f"error: {line}", file=sys.stderr)
        return 2
    for line in content["summary"]:
        print(line)
    print(f"wrote {args.out / 'report.json'} and {args.out / 'report.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
