"""A release's croissant.json (Croissant 1.0 + RAI) and its imagefolder's Hugging Face dataset card (issue 22).

croissant.json is validated and read by ``mlcroissant`` itself: every record of the images, labels and labelers
record sets equals the row of the Parquet file it names, and the checksums it states are the manifest's (the
library checks each file it reads against them). The imagefolder's README.md is loaded by ``datasets`` as a
Hub would: its YAML configs give the split, and excluded images are in it, marked, to be filtered as it says.
"""

import json
import math
import shutil

import pyarrow.parquet as pq
import pytest
import yaml

from labeling.models import ImageBaseline, Release
from labeling.services import releases as svc
from labeling.services.releases.bundle import file_info
from labeling.services.releases.croissant import imagefolder_readme, licence_ids
from tests.factories import ProjectFactory, make_lead
from tests.labeling.helpers import shared_world
from tests.labeling.test_releases import (  # noqa: F401  (fixtures)
    INCLUDE_ALL,
    build_study,
    eager,
    make_release,
    make_team,
)

RAI = (
    "rai:dataCollection",
    "rai:dataAnnotationProtocol",
    "rai:annotationsPerItem",
    "rai:dataBiases",
    "rai:dataLimitations",
    "rai:personalSensitiveInformation",
    "rai:dataReleaseMaintenancePlan",
)
RECORD_SETS = {"images": "image_id", "labels": "label_id", "labelers": "labeler"}


def _build_released():
    """A release with photos: image 4 excluded (no baseline), labeler L1 sharing a profile, L2 not. Built once
    for the module (``shared_world``; each test with its own copy of the files)."""
    lead = make_lead("croissant-lead")
    project = ProjectFactory(created_by=lead)
    study = build_study(project, make_team(project))
    first, second = study["team"][:2]
    for member, shared in ((first, True), (second, False)):
        member.gender, member.region_of_upbringing, member.expertise = "woman", "West Africa", "dermatologist"
        member.share_profile = shared
        member.save()
    second.gender = "secret-gender-of-L2"
    second.save()
    ImageBaseline.objects.filter(image=study["images"][4]).delete()
    release = make_release(study["project"], lead, include={**INCLUDE_ALL, "no_baseline": False}, with_images=True)
    assert release.status == Release.Status.PUBLISHED, release.error
    return release


_shared_world, released = shared_world("released", _build_released, private_media=True)


def plain(value):
    """A value as mlcroissant gives it, made comparable with pyarrow's: text as str, NaN as None."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def test_croissant_lists_every_file_with_the_manifest_checksum_and_the_rai_fields(released):
    root = svc.release_dir(released)
    manifest = json.loads((root / "manifest.json").read_text())["files"]
    # croissant.json is a release file like the others: in the manifest, with its right checksum.
    assert manifest["croissant.json"] == {**file_info(root / "croissant.json")}
    assert released.manifest["files"]["croissant.json"] == manifest["croissant.json"]
    doc = json.loads((root / "croissant.json").read_text())

    assert doc["@context"]["cr"] == "http://mlcommons.org/croissant/"
    assert doc["@context"]["rai"] == "http://mlcommons.org/croissant/RAI/"
    assert "http://mlcommons.org/croissant/1.0" in doc["conformsTo"]
    assert doc["@type"] == "sc:Dataset" and doc["version"] == "1.0.0"
    assert doc["license"][0] == "https://spdx.org/licenses/CC-BY-4.0.html"
    assert doc["datePublished"] == released.created_at.isoformat()
    objects = {node["@id"]: node for node in doc["distribution"] if node["@type"] == "cr:FileObject"}
    file_sets = [node for node in doc["distribution"] if node["@type"] == "cr:FileSet"]
    photos = {p for p in manifest if p.startswith("imagefolder/") and p.endswith((".png", ".jpg"))}
    assert len(photos) == 8
    # The evaluation set's photos and, apart, the one the release rule leaves out (its own split).
    assert [s["includes"] for s in file_sets] == ["imagefolder/*.png", "imagefolder/excluded/*.png"]
    assert "The 7 photos of imagefolder/ " in file_sets[0]["description"]
    assert "The 1 photos of imagefolder/excluded/ (the images" in file_sets[1]["description"]
    # Every other file but the manifest (written after, it lists this one) and croissant.json itself.
    assert set(objects) == set(manifest) - photos - {"manifest.json", "croissant.json"}
    assert {"images.parquet", "labels.csv", "data_card.md", "imagefolder/README.md"} <= set(objects)
    for path, node in objects.items():
        assert node["contentUrl"] == path and not path.startswith("/")
        assert node["sha256"] == manifest[path]["sha256"] == file_info(root / path)["sha256"]
        assert node["encodingFormat"]
    assert objects["images.parquet"]["encodingFormat"] == "application/x-parquet"

    for key in RAI:
        assert doc[key], key
    assert "GDPR Art. 9" in " ".join(doc["rai:personalSensitiveInformation"])
    assert "Every person photographed agreed in writing." in doc["rai:dataCollection"]
    assert "25 counted labels on 8 images" in doc["rai:annotationsPerItem"]
    # Demographics only from the profiles shared: L1's; L2's never, not even counted.
    demographics = " ".join(doc["rai:annotatorDemographics"])
    assert "1 of 4 labelers shared" in demographics and "dermatologist 1" in demographics
    assert "secret-gender-of-L2" not in (root / "croissant.json").read_text()
    fields = {rs["@id"]: {f["name"]: f for f in rs["field"]} for rs in doc["recordSet"]}
    assert set(fields) == set(RECORD_SETS)
    for name in RECORD_SETS:
        assert list(fields[name]) == pq.read_schema(root / f"{name}.parquet").names
    assert fields["images"]["final_tone"]["dataType"] == "sc:Integer"
    assert fields["images"]["ita"]["dataType"] == "sc:Float"
    assert fields["images"]["excluded"]["dataType"] == "sc:Boolean"
    assert fields["labels"]["tones"]["repeated"] is True
    assert fields["images"]["excluded"]["source"] == {
        "fileObject": {"@id": "images.parquet"},
        "extract": {"column": "excluded"},
    }


def test_mlcroissant_validates_the_release_and_loads_every_record_set(released, tmp_path):
    mlc = pytest.importorskip("mlcroissant")
    root = svc.release_dir(released)

    dataset = mlc.Dataset(jsonld=str(root / "croissant.json"))  # raises on any validation error
    assert not dataset.metadata.ctx.issues.errors and not dataset.metadata.ctx.issues.warnings
    assert {rs.id for rs in dataset.metadata.record_sets} == set(RECORD_SETS)
    for name, key in RECORD_SETS.items():
        expected = pq.read_table(root / f"{name}.parquet").to_pylist()
        records = [{k.split("/", 1)[1]: plain(v) for k, v in r.items()} for r in dataset.records(record_set=name)]
        assert len(records) == len(expected) > 0, name
        assert [r[key] for r in records] == [row[key] for row in expected]
        assert records == [{k: plain(v) for k, v in row.items()} for row in expected], name
    images = {r["image_id"]: r for r in pq.read_table(root / "images.parquet").to_pylist()}
    assert sum(r["excluded"] for r in images.values()) == 1

    # The checksums are read: a wrong one makes mlcroissant refuse the file (here on a copy of the release).
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    doc = json.loads((copy / "croissant.json").read_text())
    for node in doc["distribution"]:
        if node["@id"] == "labelers.parquet":
            node["sha256"] = "0" * 64
    (copy / "croissant.json").write_text(json.dumps(doc))
    with pytest.raises(Exception, match=r"Download\(labelers\.parquet\)") as caught:
        list(mlc.Dataset(jsonld=str(copy / "croissant.json")).records(record_set="labelers"))
    assert "Hash of downloaded file" in str(caught.value.__cause__ or caught.value.__context__)


def test_imagefolder_readme_is_a_hub_dataset_card_that_loads_and_says_how_to_filter(released, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    import datasets  # after the variables above: it reads them on import

    folder = svc.release_dir(released) / "imagefolder"
    text = (folder / "README.md").read_text()
    assert text.startswith("---\n")
    header = yaml.safe_load(text.split("---\n", 2)[1])
    assert header["license"] == "cc-by-4.0"
    assert header["task_categories"] == ["image-classification"]
    config, excluded = header["configs"]
    assert config["config_name"] == "default"
    assert config["data_files"] == [{"split": "test", "path": ["*.png", "metadata.jsonl"]}]
    assert excluded == {
        "config_name": "excluded",
        "data_files": [{"split": "test", "path": ["excluded/*.png", "excluded/metadata.jsonl"]}],
    }
    assert 'evaluation = load_dataset("path/to/imagefolder", split="test")' in text
    assert "The 1 image(s) the release rule leaves out" in text and "no_baseline 1" in text
    assert "GDPR Art. 9" in text

    # Loaded from the folder alone, as a Hub would: the README's default config is the evaluation set with
    # nothing to filter; the excluded image is in its own config.
    dataset = datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "hf-cache"))
    assert list(dataset) == ["test"]
    evaluation = dataset["test"]
    left_out = datasets.load_dataset(str(folder), "excluded", split="test", cache_dir=str(tmp_path / "hf-cache"))
    assert evaluation.num_rows == released.summary["included"] == 7 and not any(evaluation["excluded"])
    assert left_out.num_rows == 1 and all(left_out["excluded"]) and left_out["excluded_reason"] == ["no_baseline"]
    assert sorted(p.name for p in folder.iterdir() if not p.name.endswith(".png")) == [
        "README.md",
        "excluded",
        "metadata.jsonl",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("CC BY 4.0 (see https://creativecommons.org/licenses/by/4.0/)", ("CC-BY-4.0", "cc-by-4.0")),
        ("cc-by-nc-sa 4.0", ("CC-BY-NC-SA-4.0", "cc-by-nc-sa-4.0")),
        ("Released under CC0.", ("CC0-1.0", "cc0-1.0")),
        ("CC BY 4.0 for the labels, CC BY-NC 4.0 for the photos", None),  # two: not guessed
        ("Internal research use only; ask the contacts.", None),
    ],
)
def test_licence_ids_name_one_known_licence_or_none(text, expected):
    assert licence_ids(text) == expected


def test_a_licence_the_hub_does_not_know_is_other_with_the_leads_words_in_the_card():
    facts = {
        "release": {"project": 'Odd: "quoted" name', "version": 3},
        "card_text": [{"field": "licence", "text": "Internal research use only."}],
        "scale": {"name": "Fitzpatrick", "kind": "fitzpatrick"},
    }
    files = {"imagefolder/1.jpg": {}, "imagefolder/2.png": {}, "imagefolder/metadata.jsonl": {}}
    text = imagefolder_readme(facts, files, {"images": 2, "excluded": 0})
    header = yaml.safe_load(text.split("---\n", 2)[1])
    assert header["license"] == "other" and header["license_name"] == "custom"
    assert header["pretty_name"] == 'Odd: "quoted" name: FairTone release 3'
    assert header["configs"][0]["data_files"][0]["path"] == ["*.jpg", "*.png", "metadata.jsonl"]
    assert "## Licence\n\nInternal research use only." in text
