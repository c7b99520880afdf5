"""The data card's leaner reads (issue 25) give the numbers of the reads they replaced.

The per-band section reads a phase's labels through a server-side cursor (``card_bands.phase_values``)
instead of ``consensus.phase_labels_load``'s column arrays; the image means and medians of labels vs ITA
are summarised batch by batch from labels the database sorts (``baselines.comparison._human_values``)
instead of every label at once. Tiny batches cut images across batches here.
"""

import numpy as np
import pytest

from labeling.models import Membership
from labeling.services.baselines import comparison
from labeling.services.consensus.loading import phase_labels_load
from labeling.services.releases import card_bands
from tests.labeling.test_release_memory import _shared_world, noisy_study  # noqa: F401  (fixtures)
from tests.labeling.test_releases import eager, media  # noqa: F401  (fixtures)


def _phases(project):
    return sorted(project.phases.all(), key=lambda p: (p.index, p.id))


@pytest.mark.parametrize("rows", [1, 7, 20_000])
def test_band_values_are_phase_labels_load_s(noisy_study, monkeypatch, rows):  # noqa: F811
    monkeypatch.setattr(card_bands, "LABEL_ROWS", rows)
    for phase in _phases(noisy_study["project"]):
        values, labeler_ids, image_ids = card_bands.phase_values(phase)
        data = phase_labels_load(phase)
        expected = data.values.T
        assert values.shape == expected.shape and values.dtype == expected.dtype
        np.testing.assert_array_equal(values, expected)  # NaN where NaN
        np.testing.assert_array_equal(labeler_ids, data.labeler_ids)
        np.testing.assert_array_equal(image_ids, data.image_ids)
        assert labeler_ids.dtype == data.labeler_ids.dtype and image_ids.dtype == data.image_ids.dtype


def test_band_section_is_the_one_from_phase_labels_load(noisy_study, monkeypatch):  # noqa: F811
    project = noisy_study["project"]
    phases = _phases(project)
    pseudonyms = dict(Membership.objects.filter(project=project).values_list("id", "pseudonym"))
    monkeypatch.setattr(card_bands, "LABEL_ROWS", 5)
    lean = card_bands.agreement_by_band_facts(project, phases, pseudonyms)

    def loaded(phase):
        data = phase_labels_load(phase)
        return data.values.T, data.labeler_ids, data.image_ids

    monkeypatch.setattr(card_bands, "phase_values", loaded)
    assert lean == card_bands.agreement_by_band_facts(project, phases, pseudonyms)
    assert any(band["n_images"] for phase in lean["phases"] for band in phase["bands"])


def reference_human_values(project, phase):
    """``comparison._human_values`` before issue 25 (commit 298cd4f), verbatim: every label, sorted in NumPy."""
    labels = comparison.Label.objects.filter(
        phase__project=project, is_repeat=False, is_valid=True, value__isnull=False
    )
    if phase is not None:
        labels = labels.filter(phase=phase)
    pairs = np.fromiter(
        labels.order_by().values_list("image_id", "value").iterator(chunk_size=20_000),
        dtype=[("image", np.int64), ("value", np.float64)],
    )
    order = np.lexsort((pairs["value"], pairs["image"]))
    images, values = pairs["image"][order], pairs["value"][order]
    image_ids, starts, counts = np.unique(images, return_index=True, return_counts=True)
    if not image_ids.size:
        empty = np.zeros(0)
        return comparison.HumanValues(image_ids, empty, empty, counts)
    mean = np.add.reduceat(values, starts) / counts
    median = (values[starts + (counts - 1) // 2] + values[starts + counts // 2]) / 2.0
    return comparison.HumanValues(image_ids, mean, median, counts)


@pytest.mark.parametrize("rows", [1, 3, 20_000])
def test_human_values_streamed_are_the_sorted_ones(noisy_study, monkeypatch, rows):  # noqa: F811
    monkeypatch.setattr(comparison, "HUMAN_ROWS", rows)
    project = noisy_study["project"]
    for phase in [None, *_phases(project)]:
        lean, reference = comparison._human_values(project, phase), reference_human_values(project, phase)
        for got, expected in zip(lean, reference, strict=True):
            assert got.dtype == expected.dtype
            np.testing.assert_array_equal(got, expected)
    assert len(comparison._human_values(project, None)) > 0


def test_human_values_without_labels(project):
    lean = comparison._human_values(project, None)
    assert len(lean) == 0 and lean.image_ids.dtype == np.int64 and lean.n.dtype == np.int64
