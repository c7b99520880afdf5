"""Is the project ready for a release? The images of each category, before the lead decides what to include."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...models import Project
from .finalise import context_load, release_chunks
from .rules import CATEGORIES, rule_clean

#: Example images listed per category.
MAX_EXAMPLES = 50


def release_readiness(project: Project, rule: dict[str, Any] | None = None) -> dict[str, Any]:
    """Counts and up to :data:`MAX_EXAMPLES` example images per category, for ``rule`` (defaults filled).

    Returns
    -------
    dict
        ``rule`` (cleaned), ``n_images``, ``n_included``, ``n_excluded`` (by the rule's ``include``),
        ``n_with_labels``, and ``categories``: ``{name: {"description", "count", "include",
        "examples": [{"image_id", "external_id"}]}}`` in the order of :data:`CATEGORIES`. An image
        can be in several categories.

    Raises
    ------
    django.core.exceptions.ValidationError
        A bad rule (see :func:`rule_clean`).
    """
    rule = rule_clean(rule)
    context = context_load(project, rule)
    counts = dict.fromkeys(CATEGORIES, 0)
    examples: dict[str, list[dict]] = {name: [] for name in CATEGORIES}
    n_images = n_excluded = n_with_labels = 0
    excluded_names = [name for name in CATEGORIES if not rule["include"][name]]
    for chunk in release_chunks(project, rule, context=context):
        n_images += len(chunk.images)
        n_with_labels += int(((chunk.final["n_labels"] + chunk.final["n_skipped"]) > 0).sum())
        excluded = np.zeros(len(chunk.images), dtype=bool)
        for name in CATEGORIES:
            flags = chunk.categories[name]
            counts[name] += int(flags.sum())
            room = MAX_EXAMPLES - len(examples[name])
            if room > 0:
                for i in np.flatnonzero(flags)[:room]:
                    row = chunk.images[i]
                    examples[name].append({"image_id": row[0], "external_id": row[1]})
            if name in excluded_names:
                excluded |= flags
        n_excluded += int(excluded.sum())
    return {
        "rule": rule,
        "n_images": n_images,
        "n_with_labels": n_with_labels,
        "n_included": n_images - n_excluded,
        "n_excluded": n_excluded,
        "categories": {
            name: {
                "description": description,
                "count": counts[name],
                "include": rule["include"][name],
                "examples": examples[name],
            }
            for name, description in CATEGORIES.items()
        },
    }
