"""Fairness report: seed 000's four unfairness scores from two tables, as JSON and HTML.

Used by ``python -m metrics report``. Inputs are read by extension (``.csv``,
``.jsonl``/``.ndjson``, ``.parquet``), joined on an id column, validated (every
problem is collected as one line of :class:`ReportInputError`), scored with
:mod:`metrics.unfairness`, and written as ``report.json`` and a self-contained
``report.html`` (figures embedded as base64 PNG; no external URL).

Layout
------
Import from ``metrics.report`` (the names in ``__all__``). The steps:
``inputs`` (options, reading and joining the tables, validation), ``scores``
(the report as a dict: scores, summary sentences, mean error by group) and
``render`` (figures, ``report.json`` and ``report.html``).
"""

from .composition import tone_composition
from .inputs import ERROR_KINDS, ReportInputError, ReportOptions, derive_errors, load_table
from .render import write_report
from .scores import build_report

__all__ = [
    "ERROR_KINDS",
    "ReportInputError",
    "ReportOptions",
    "build_report",
    "derive_errors",
    "load_table",
    "tone_composition",
    "write_report",
]
