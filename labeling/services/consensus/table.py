"""The per-image table of a phase: filtering, ordering and the records of the per-image page."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from metrics import agreement

from .numbers import json_clean, num

IMAGE_COLUMNS = (
    "n_labels",
    "n_valid",
    "mean",
    "std",
    "median",
    "mode",
    "mode_count",
    "min",
    "max",
    "range",
    "complete_consensus",
    "overlap_consensus",
    "near_consensus",
    "n_unique_values",
    "n_connected_groups",
    "any_uncertainty",
    "has_invalid_annotation",
    "wide_range",
)

BOOLEAN_FILTERS = ("complete_consensus", "overlap_consensus", "near_consensus", "any_uncertainty", "wide_range")
SORTABLE = ("image_id",) + tuple(c for c in IMAGE_COLUMNS if c != "has_invalid_annotation")


def _truthy(text: str) -> bool | None:
    text = (text or "").strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off"}:
        return False
    return None


def consensus_images(images: dict, params: dict[str, str]) -> np.ndarray:
    """Row positions of the per-image table matching ``params``, in the requested order.

    ``params``: ``flag`` (``wide_range``, ``invalid`` or ``any``), booleans in
    ``BOOLEAN_FILTERS`` (``true``/``false``), ``min_range``, ``max_range``,
    ``n_unique``, ``min_labels`` (valid labels), ``ordering`` (a column of
    ``SORTABLE``, ``-`` for descending; NaN last).
    """
    table: pd.DataFrame = images["table"]
    keep = np.ones(len(table), dtype=bool)
    flag = params.get("flag", "")
    if flag == "wide_range":
        keep &= table["wide_range"].to_numpy()
    elif flag == "invalid":
        keep &= table["has_invalid_annotation"].to_numpy()
    elif flag == "any":
        keep &= (table["wide_range"] | table["has_invalid_annotation"]).to_numpy()
    for column in BOOLEAN_FILTERS:
        wanted = _truthy(params.get(column, ""))
        if wanted is not None:
            keep &= table[column].to_numpy() == wanted
    for name, column, compare in (
        ("min_range", "range", np.greater_equal),
        ("max_range", "range", np.less_equal),
        ("n_unique", "n_unique_values", np.equal),
        ("min_labels", "n_valid", np.greater_equal),
    ):
        try:
            bound = float(params.get(name, ""))
        except ValueError:
            continue
        with np.errstate(invalid="ignore"):
            keep &= compare(table[column].to_numpy(), bound)
    rows = np.flatnonzero(keep)
    ordering = params.get("ordering", "") or "image_id"
    descending = ordering.startswith("-")
    column = ordering.lstrip("-")
    if column not in SORTABLE:
        column, descending = "image_id", False
    key = (table.index.to_numpy() if column == "image_id" else table[column].to_numpy())[rows].astype(np.float64)
    if descending:
        key = -key
    key = np.where(np.isnan(key), np.inf, key)  # NaN last either way
    return rows[np.argsort(key, kind="stable")]


def _selection_text(low: float, high: float) -> str:
    if math.isnan(low):
        return ""
    if math.isnan(high):
        return str(int(low))
    return f"{int(low)}+{int(high)}"


def image_rows(images: dict, rows: np.ndarray, names: dict[int, str]) -> list[dict]:
    """JSON-safe per-image records (data-card fields) for the table rows ``rows``."""
    table: pd.DataFrame = images["table"]
    labelers = images["labeler_ids"]
    first, second = images["first"], images["second"]
    uncertain, labelled = images["uncertain"], images["labelled"]
    records = []
    subset = table.iloc[rows]
    for position, (image_id, row) in zip(rows, subset.iterrows(), strict=True):
        labels = []
        for column in np.flatnonzero(labelled[position]):
            low, high = float(first[position, column]), float(second[position, column])
            value = agreement.selection_values([low], [high])[0]
            labels.append(
                {
                    "labeler": names.get(int(labelers[column]), "?"),
                    "selection": _selection_text(low, high) or "skip",
                    "value": num(value),
                    "uncertain": bool(uncertain[position, column]),
                    "valid": math.isnan(low) or not math.isnan(value),
                }
            )
        flags = [
            name
            for name in ("wide_range", "invalid")
            if row["wide_range" if name == "wide_range" else "has_invalid_annotation"]
        ]
        record = {
            "image_id": int(image_id),
            "labels": labels,
            "valid_values": [lab["value"] for lab in labels if lab["value"] is not None],
        }
        for column in IMAGE_COLUMNS:
            record[column] = json_clean(row[column].item() if hasattr(row[column], "item") else row[column])
        record["flags"] = flags
        records.append(record)
    return records
