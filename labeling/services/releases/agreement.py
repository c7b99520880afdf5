"""A phase's agreement for the data card, read in chunks of images (never the whole phase in memory).

The numbers of the consensus service's phase summary (``consensus.phase_summary_compute``) that the card
shows: label, image and labeler counts, near / overlap / complete consensus rates, Krippendorff's alpha
(ordinal, with its image-bootstrap interval, and interval), the k-of-n table, the distribution of
distinct values and the flags. The service pivots the whole phase into images x labelers arrays and a
per-image DataFrame (with the per-labeler statistics, kappa matrix and cached per-image table the card
does not use: about 500 MB at 250,000 images x 4 labels); here the labels are streamed by image id and
each chunk of images is reduced at once (``metrics.agreement.consensus_table``, ``k_of_n_agreement``,
``unique_values_distribution`` are per image, so chunk sums are the whole phase's counts). Alpha needs
every image: only its images x values count matrix is kept, one byte per cell, row for row the matrix
the service builds (images by id, the phase's value domain), so alpha and its bootstrap are the same
numbers to the last bit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np

from metrics import agreement

from ...models import Label, Phase
from ..consensus import MIN_IMAGES, WIDE_RANGE, too_little
from ..consensus.summary import alpha_block, consensus_rate, image_subject_units
from .finalise import STREAM_ROWS, _whole_result_plans

#: Images reduced at a time. Measured at 250,000 images x 4 labels: 10,000 a chunk added 60 MB of RSS while
#: the labels streamed, 2,000 added 31 MB (then the alpha bootstrap adds about 45: a 64-bit copy of the counts).
AGREEMENT_CHUNK_IMAGES = 2000

_FIELDS = ("image_id", "labeler_id", "tone_low", "tone_high", "uncertain", "is_repeat")


def _label_chunks(phase: Phase, chunk_images: int) -> Iterator[list[tuple]]:
    """The phase's labels by image id, in lists holding every label of up to ``chunk_images`` images."""
    rows = Label.objects.filter(phase=phase).order_by("image_id").values_list(*_FIELDS).iterator(chunk_size=STREAM_ROWS)
    with _whole_result_plans():
        row = next(rows, None)  # the server-side cursor is declared here
    chunk: list[tuple] = []
    n_images, last = 0, None
    while row is not None:
        if row[0] != last:
            if n_images == chunk_images:
                yield chunk
                chunk, n_images = [], 0
            n_images, last = n_images + 1, row[0]
        chunk.append(row)
        row = next(rows, None)
    if chunk:
        yield chunk


def _positions(column: tuple) -> np.ndarray:
    """Tone positions as floats, NaN for none (None or 0), as ``consensus.phase_labels_load`` reads them."""
    array = np.array(column, dtype=np.float64)  # None -> NaN
    return np.where(array > 0, array, np.nan)


def _value_domain(phase: Phase) -> np.ndarray:
    """The phase's distinct valid values of non-repeat labels, sorted: the alpha value domain of the service."""
    pairs = list(
        Label.objects.filter(phase=phase, is_repeat=False).order_by().values_list("tone_low", "tone_high").distinct()
    )
    if not pairs:
        return np.zeros(0)
    low, high = zip(*pairs, strict=True)
    values = agreement.selection_values(_positions(low), _positions(high))
    return np.unique(values[~np.isnan(values)])


def phase_agreement(phase: Phase, *, chunk_images: int = AGREEMENT_CHUNK_IMAGES) -> dict[str, Any]:
    """The card's part of a phase's consensus summary, from the labels read in chunks of images.

    Returns
    -------
    dict
        The keys of ``consensus.phase_summary`` that the card reads, with the same values: ``n_labels``,
        ``n_repeats``, ``n_images``, ``n_images_2plus``, ``n_labelers``, ``agreement`` (``alpha``,
        ``near_consensus``, ``overlap_consensus``, ``complete_consensus``), ``k_of_n``, ``unique_values``
        and ``flags`` (``wide_range``, ``invalid``, ``uncertain``).
    """
    labeler_ids = np.array(
        sorted(Label.objects.filter(phase=phase).order_by().values_list("labeler_id", flat=True).distinct()),
        dtype=np.int64,
    )
    domain = _value_domain(phase)
    count_type = np.int8 if labeler_ids.size <= np.iinfo(np.int8).max else np.int32
    counts_parts: list[np.ndarray] = []
    image_parts: list[np.ndarray] = []
    k_of_n: Counter = Counter()
    unique_values: Counter = Counter()
    totals = Counter()
    for rows in _label_chunks(phase, chunk_images):
        image, labeler, low, high, uncertain, repeat = zip(*rows, strict=True)
        repeat = np.array(repeat, dtype=bool)
        totals["n_labels"] += len(rows)
        totals["n_repeats"] += int(repeat.sum())
        keep = ~repeat
        if not keep.any():
            continue
        # Images x labelers, as ``consensus.phase_labels_load`` pivots them (repeats left out).
        image_ids, image_code = np.unique(np.array(image, dtype=np.int64)[keep], return_inverse=True)
        labeler_code = np.searchsorted(labeler_ids, np.array(labeler, dtype=np.int64)[keep])
        shape = (image_ids.size, labeler_ids.size)
        first, second = np.full(shape, np.nan), np.full(shape, np.nan)
        cell_uncertain = np.zeros(shape, dtype=bool)
        first[image_code, labeler_code] = _positions(low)[keep]
        second[image_code, labeler_code] = _positions(high)[keep]
        cell_uncertain[image_code, labeler_code] = np.array(uncertain, dtype=bool)[keep]
        table = agreement.consensus_table(first, second, cell_uncertain, wide_range=WIDE_RANGE)
        several = table["n_valid"].to_numpy() >= 2
        totals["n_images"] += image_ids.size
        totals["n_images_2plus"] += int(several.sum())
        for name in ("near_consensus", "overlap_consensus", "complete_consensus"):
            totals[name] += int(table[name].to_numpy()[several].sum())
        totals["wide_range"] += int(table["wide_range"].sum())
        totals["invalid"] += int(table["has_invalid_annotation"].sum())
        totals["uncertain"] += int(table["any_uncertainty"].sum())
        reliability = agreement.selection_values(first, second).T
        counts_parts.append(agreement.value_counts(reliability, domain)[1].astype(count_type))
        image_parts.append(image_ids)
        for n, k, n_items in agreement.k_of_n_agreement(reliability)[["n_labels", "k_agreed", "n_items"]].itertuples(
            index=False
        ):
            k_of_n[(int(n), int(k))] += int(n_items)
        distinct = agreement.unique_values_distribution(reliability, min_labels=2)
        for n_unique, n_items in distinct[["n_unique_values", "n_items"]].itertuples(index=False):
            unique_values[int(n_unique)] += int(n_items)
    counts = np.concatenate(counts_parts) if counts_parts else np.zeros((0, domain.size), dtype=count_type)
    del counts_parts
    n_2plus = totals["n_images_2plus"]
    reason = None if n_2plus >= MIN_IMAGES else too_little(n_2plus)

    def rate(name: str) -> dict[str, Any]:
        return consensus_rate(totals[name], n_2plus, reason)

    return {
        "n_labels": totals["n_labels"],
        "n_repeats": totals["n_repeats"],
        "n_images": totals["n_images"],
        "n_images_2plus": n_2plus,
        "n_labelers": int(labeler_ids.size),
        "agreement": {
            "near_consensus": rate("near_consensus"),
            "overlap_consensus": rate("overlap_consensus"),
            "complete_consensus": rate("complete_consensus"),
            "alpha": alpha_block(
                counts,
                domain,
                n_2plus,
                lean=True,
                clusters=image_subject_units(
                    phase.project_id, np.concatenate(image_parts) if image_parts else np.zeros(0, dtype=np.int64)
                ),
            ),
        },
        "k_of_n": [{"n_labels": n, "k_agreed": k, "n_items": c} for (n, k), c in sorted(k_of_n.items())],
        "unique_values": [{"n_unique_values": u, "n_items": c} for u, c in sorted(unique_values.items())],
        "flags": {name: totals[name] for name in ("wide_range", "invalid", "uncertain")},
    }
