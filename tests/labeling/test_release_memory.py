"""A release's memory savings change no byte: the compact labelers tally against the per-label one it
replaced, the text batches and the streamed fetches of any size, the build's allocator setting."""

import math
from collections import defaultdict

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from labeling.models import Image, Label
from labeling.services import releases as svc
from labeling.services.consensus import MIN_IMAGES, test_retest_compute
from labeling.services.releases import bundle, finalise
from labeling.services.releases.bundle import TableWriter, file_info
from labeling.services.releases.memory import build_memory
from labeling.services.releases.tables import LABELERS_SCHEMA, PROFILE_COLUMNS, LabelerTally
from metrics import agreement
from tests.labeling.helpers import add_images, shared_world
from tests.labeling.test_releases import SECRET_NAMES, eager, media, phases_of, put  # noqa: F401  (fixtures)


class ReferenceTally:
    """``tables.LabelerTally`` as it was before the compact tally (commit 75d5f28), kept as the reference:
    per-label arrays of every counted label, concatenated into a labelers x images matrix; since session 34
    the bias is one ``labeler_bias`` call with its interval clustered by person (was in blocks, no interval)."""

    def __init__(self) -> None:
        self.n_labels: dict[int, int] = defaultdict(int)
        self.n_counted: dict[int, int] = defaultdict(int)
        self._offset = 0
        self._image: list[np.ndarray] = []
        self._labeler: list[np.ndarray] = []
        self._value: list[np.ndarray] = []
        self._people: list[int] = []

    def add(self, chunk) -> None:
        labeler, value = chunk.label_labeler, chunk.label_value
        for labeler_id, n in zip(*np.unique(labeler, return_counts=True), strict=True):
            self.n_labels[int(labeler_id)] += int(n)
        for labeler_id, n in zip(*np.unique(labeler[chunk.counted], return_counts=True), strict=True):
            self.n_counted[int(labeler_id)] += int(n)
        self._image.append(chunk.label_image[chunk.counted] + self._offset)
        self._labeler.append(labeler[chunk.counted])
        self._value.append(value[chunk.counted])
        # Each image's person: its subject, or the image itself (minus its id), coded as the tally codes them
        # (the order of the people fixes the order of the interval's sums, to the last bit).
        # Read from the database, not from the chunk's rows.
        subject = dict(Image.objects.filter(id__in=chunk.image_ids.tolist()).values_list("id", "subject_id"))
        self._people += [-i if subject[i] is None else subject[i] for i in chunk.image_ids.tolist()]
        self._offset += len(chunk.images)

    def _bias(self, reliability: np.ndarray, labelers: list[int]) -> pd.DataFrame:
        return agreement.labeler_bias(reliability, labelers=labelers, clusters=np.array(self._people, dtype=np.int64))

    def table(self, project, pseudonyms: dict[int, str]) -> pa.Table:
        image = np.concatenate(self._image) if self._image else np.zeros(0, dtype=np.int64)
        labeler = np.concatenate(self._labeler) if self._labeler else np.zeros(0, dtype=np.int64)
        value = np.concatenate(self._value) if self._value else np.zeros(0)
        ids = sorted(self.n_labels, key=lambda i: (pseudonyms.get(i, ""), i))
        bias = None
        counted_ids = sorted(set(labeler.tolist()))
        if counted_ids and self._offset:
            reliability = np.full((len(counted_ids), self._offset), np.nan)
            reliability[np.searchsorted(counted_ids, labeler), image] = value
            bias = self._bias(reliability, counted_ids)
        retest = {row["labeler"]: row for row in test_retest_compute(project)["per_labeler"]}
        profiles = {
            row[0]: row[1:]
            for row in project.memberships.filter(id__in=ids).values_list("id", "share_profile", *PROFILE_COLUMNS)
        }
        rows: dict[str, list] = {name: [] for name in LABELERS_SCHEMA.names}
        for labeler_id in ids:
            images = int(np.unique(image[labeler == labeler_id]).size)
            rows["labeler"].append(pseudonyms.get(labeler_id, "?"))
            rows["n_labels"].append(self.n_labels[labeler_id])
            rows["n_counted"].append(self.n_counted.get(labeler_id, 0))
            rows["n_images"].append(images)
            n_bias = int(bias.loc[labeler_id, "n"]) if bias is not None and labeler_id in bias.index else 0
            enough = n_bias >= MIN_IMAGES
            rows["bias_n"].append(n_bias)
            for column, name in (
                ("bias_mean_diff", "mean_diff"),
                ("bias_ci_low", "low"),
                ("bias_ci_high", "high"),
                ("bias_mean_abs_diff", "mean_abs_diff"),
            ):
                number = float(bias.loc[labeler_id, name]) if enough else None
                rows[column].append(number if number is not None and math.isfinite(number) else None)
            block = retest.get(labeler_id)
            rows["retest_n"].append(block["n"] if block else None)
            for name in ("exact", "within_one", "weighted_kappa", "mean_shift"):
                rows[f"retest_{name}"].append(block[name]["value"] if block else None)
                rows[f"retest_{name}_ci_low"].append(block[name]["low"] if block else None)
                rows[f"retest_{name}_ci_high"].append(block[name]["high"] if block else None)
            shared, *profile = profiles.get(labeler_id, (False, "", "", ""))
            rows["profile_shared"].append(bool(shared))
            for column, text in zip(PROFILE_COLUMNS, profile, strict=True):
                rows[column].append((text or None) if shared else None)
        return pa.table(rows, schema=LABELERS_SCHEMA)


def _build_noisy_study():
    """Sixty images labelled by four labelers with noise, gaps, skips, pairs and calibration repeats."""
    from tests.factories import MembershipFactory, ProjectFactory, UserFactory, make_lead

    project = ProjectFactory(created_by=make_lead("noisy-lead"))
    team = [  # as ``test_releases.team``, under names of their own (the ``team`` fixture may run beside it)
        MembershipFactory(project=project, user=UserFactory(username=f"noisy-{name}"), pseudonym=f"L{i}")
        for i, name in enumerate(SECRET_NAMES, start=1)
    ]
    rng = np.random.default_rng(7)
    images = add_images(project, 60, subjects=12)
    p = phases_of(project)
    for k, image in enumerate(images):
        phase = p["calibration_1"] if k < 10 else p["calibration_2"] if k < 20 else p["main"]
        truth = 1 + k % 10
        for m, member in enumerate(team):
            if (k + m) % 7 == 0:
                continue  # this labeler did not label the image
            if (k * 3 + m) % 11 == 0:
                put(phase, image, member, [], skip="no skin visible")
                continue
            tone = int(np.clip(truth + rng.integers(-1, 2), 1, 10))
            tones = [tone, tone + 1] if tone < 10 and (k + m) % 5 == 0 else [tone]
            put(phase, image, member, tones, uncertain=(k + m) % 9 == 0)
    for image in images[:6]:
        for member in team[:3]:
            put(p["calibration_2"], image, member, [1 + images.index(image) % 10], repeat=True)
    # Labels in the main phase's images relabelled in post-calibration (the latest phase counts).
    for image in images[30:34]:
        put(p["post_calibration"], image, team[0], [4])
    return {"project": project, "team": team, "images": images}


# Built once per module (sixty images and their labels were most of these tests' time); the card's lean reads
# (test_release_card_memory) import the pair.
_shared_world, noisy_study = shared_world("noisy_study", _build_noisy_study)


def _tallies(project, *, chunk_images: int):
    rule = svc.rule_clean({"include": dict.fromkeys(svc.CATEGORIES, True)})
    new, old = LabelerTally(), ReferenceTally()
    for chunk in svc.release_chunks(project, rule, chunk_images=chunk_images):
        new.add(chunk)
        old.add(chunk)
    pseudonyms = dict(project.memberships.values_list("id", "pseudonym"))
    return new.table(project, pseudonyms), old.table(project, pseudonyms)


def _written(tmp_path, name: str, table: pa.Table) -> dict:
    with TableWriter(tmp_path / name, "labelers", LABELERS_SCHEMA) as writer:
        writer.write(table)
        return {path: info["sha256"] for path, info in writer.close().items()}


@pytest.mark.parametrize("chunk_images", [2000, 7, 1])
def test_compact_labelers_tally_gives_the_same_bytes_as_the_per_label_one(noisy_study, tmp_path, chunk_images):
    new, old = _tallies(noisy_study["project"], chunk_images=chunk_images)
    assert new.equals(old), (new.to_pylist(), old.to_pylist())
    assert sum(new.column("bias_n").to_pylist()) > 0
    assert any(v is not None for v in new.column("bias_mean_diff").to_pylist())
    # Each bias with its interval, clustered by person (twelve people for sixty photos).
    for row in new.to_pylist():
        if row["bias_mean_diff"] is not None:
            assert row["bias_ci_low"] < row["bias_mean_diff"] < row["bias_ci_high"]
    assert _written(tmp_path, "new", new) == _written(tmp_path, "old", old)


def test_a_value_that_is_not_a_float32_keeps_its_64_bits(noisy_study, tmp_path, monkeypatch):
    """Values imported as any number (not a tone or a half-step): the tally widens to float64 midway."""
    project = noisy_study["project"]
    main = [label for label in Label.objects.filter(phase__project=project, phase__kind="main", value__isnull=False)]
    for label in main[len(main) // 2 :: 3]:
        label.value = label.value + 0.1
        label.save(update_fields=["value"])
    new, old = _tallies(project, chunk_images=5)
    assert new.equals(old), (new.to_pylist(), old.to_pylist())
    assert _written(tmp_path, "new", new) == _written(tmp_path, "old", old)


def test_release_files_do_not_depend_on_the_fetch_or_text_batch_sizes(noisy_study, tmp_path, monkeypatch):
    """STREAM_ROWS (rows per database fetch) and CHUNK_ROWS (rows formatted to text at a time) only bound
    the memory: the files of a release are the same bytes with tiny ones."""
    project = noisy_study["project"]
    release = svc.release_request(
        project=project,
        user=project.created_by,
        rule={"include": dict.fromkeys(svc.CATEGORIES, True)},
        card_text={name: "x" for name in svc.CARD_FIELDS},
    )
    from labeling.services.releases.build import release_write

    reference = release_write(release, tmp_path / "reference")["files"]
    monkeypatch.setattr(finalise, "STREAM_ROWS", 3)
    monkeypatch.setattr(bundle, "CHUNK_ROWS", 2)
    with build_memory():
        small = release_write(release, tmp_path / "small")["files"]
    assert small == reference
    assert {"labels.csv", "labels.jsonl", "labels.parquet", "labelers.csv", "data_card.json"} <= set(small)
    assert small["labels.csv"]["rows"] > 100
    for path, info in small.items():
        assert file_info(tmp_path / "small" / path)["sha256"] == info["sha256"]


def test_build_memory_puts_arrow_back_on_its_pool():
    previous = pa.default_memory_pool().backend_name
    with build_memory():
        assert pa.default_memory_pool().backend_name == "system"
        assert pa.array(np.arange(1000)).sum().as_py() == 499500
    assert pa.default_memory_pool().backend_name == previous


def test_memory_is_released_between_stages_of_a_large_build_only(monkeypatch):
    """``memory_release`` collects (and trims) between the stages of a large build; in a small build and
    outside a build (the card's facts for a page, a table written alone) it leaves the process alone."""
    import gc

    from labeling.services.releases import memory

    collected = []
    monkeypatch.setattr(gc, "collect", lambda *args: collected.append(1) or 0)
    memory.memory_release()
    assert collected == []  # outside a build
    with build_memory(memory.SMALL_BUILD_LABELS - 1):
        memory.memory_release()
    assert collected == []
    with build_memory(memory.SMALL_BUILD_LABELS):
        memory.memory_release()
        assert collected == [1]
    assert len(collected) == 2  # and once more as the large build ends
    with build_memory():  # size unknown: large
        memory.memory_release()
    assert len(collected) == 4
