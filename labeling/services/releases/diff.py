"""What changed between two releases of a project, from their ``ReleaseImage`` rows."""

from __future__ import annotations

from typing import Any

from ...models import Release, ReleaseImage

#: Images listed per kind of change (the counts are complete).
MAX_LISTED = 500

#: One image of a release: (image id, external id, final value, final tone, excluded reason).
ImageRow = tuple[int | None, str, float | None, int | None, str]


def release_image_rows(release: Release) -> dict[Any, ImageRow]:
    """The release's images keyed by image id (by external id once the image is deleted)."""
    rows = (
        ReleaseImage.objects.filter(release=release)
        .order_by("image_id", "id")
        .values_list("image_id", "external_id", "final_value", "final_tone", "excluded_reason")
    )
    return {(row[0] if row[0] is not None else f"external:{row[1]}"): row for row in rows.iterator(chunk_size=5000)}


def _entry(row: ImageRow) -> dict[str, Any]:
    return {"image_id": row[0], "external_id": row[1]}


def rows_diff(before: dict[Any, ImageRow], after: dict[Any, ImageRow]) -> dict[str, Any]:
    """Images whose final tone moved, added, removed, newly excluded and newly included (``before`` -> ``after``)."""
    moved, added, removed, newly_excluded, newly_included = [], [], [], [], []
    for key in sorted(set(before) | set(after), key=str):
        old, new = before.get(key), after.get(key)
        if old is None:
            added.append({**_entry(new), "final_tone": new[3], "excluded_reason": new[4]})
            continue
        if new is None:
            removed.append(_entry(old))
            continue
        if old[3] != new[3]:
            moved.append({**_entry(new), "from": old[3], "to": new[3], "from_value": old[2], "to_value": new[2]})
        if new[4] and not old[4]:
            newly_excluded.append({**_entry(new), "reason": new[4]})
        elif old[4] and not new[4]:
            newly_included.append({**_entry(new), "was": old[4]})
    lists = {
        "moved": moved,
        "added": added,
        "removed": removed,
        "newly_excluded": newly_excluded,
        "newly_included": newly_included,
    }
    return {
        "counts": {name: len(items) for name, items in lists.items()},
        **{name: items[:MAX_LISTED] for name, items in lists.items()},
    }


def release_diff(a: Release, b: Release) -> dict[str, Any]:
    """What changed from release ``a`` to release ``b`` (same project): moved tones (from/to), added,
    removed, newly excluded and newly included images; at most :data:`MAX_LISTED` of each, counted fully."""
    if a.project_id != b.project_id:
        raise ValueError("Releases of different projects cannot be compared.")
    return {"from": a.version, "to": b.version, **rows_diff(release_image_rows(a), release_image_rows(b))}
