"""The release's machine-readable descriptions: ``croissant.json`` and the imagefolder's ``README.md``.

- :func:`croissant_jsonld` / :func:`croissant_write`: MLCommons Croissant 1.0 [Croissant2024] JSON-LD with the Responsible AI
  vocabulary (``rai:``, http://mlcommons.org/croissant/RAI/). ``distribution``: one ``cr:FileObject`` per
  release file (``contentUrl`` relative to the release folder, ``sha256`` the manifest's), except
  ``manifest.json`` (written after, it lists this file's checksum) and ``croissant.json`` itself; the
  imagefolder's photos as one ``cr:FileSet`` per extension (their checksums are in ``manifest.json``: one
  node per photo would make the file as long as the manifest and slow to load). ``recordSet``: ``images``,
  ``labels`` and ``labelers``, one typed ``cr:Field`` per column of their Parquet files, described with the
  data card's meanings. The RAI properties are filled from the data card's facts (``card_facts``) and the
  labelers table; ``rai:annotatorDemographics`` only from the profiles labelers agreed to share.
- :func:`imagefolder_readme`: the Hugging Face dataset card (YAML header: licence, task, configs with
  data_files) that lets ``imagefolder/`` be pushed to a Hub as it is: the split ``test`` is the evaluation
  set, the images the release rule leaves out are in their own configuration (``excluded/``), and it says so.

Deterministic: the same facts and files give the same bytes (no clock; dates from the release's own
``created_at``).
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa

from .bundle import file_info
from .card_texts import RELEASE_MAINTENANCE as MAINTENANCE
from .card_texts import SENSITIVE_STATEMENT
from .tables import FIXED_IMAGE_COLUMNS

CROISSANT_NAME = "croissant.json"
README_NAME = "README.md"
CROISSANT_CONFORMS_TO = ["http://mlcommons.org/croissant/1.0", "http://mlcommons.org/croissant/RAI/1.0"]
#: The @context of Croissant 1.0 (as in the specification and ``mlcroissant``), the RAI prefix included.
CROISSANT_CONTEXT: dict[str, Any] = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}
ENCODING_FORMATS = {
    "csv": "text/csv",
    "jsonl": "application/jsonlines",
    "parquet": "application/x-parquet",
    "json": "application/json",
    "md": "text/markdown",
    "html": "text/html",
    "png": "image/png",
    "jpg": "image/jpeg",
}
IMAGE_EXTENSIONS = ("jpg", "png")

#: The imagefolder's split (and subfolder) of the images the release rule leaves out of the evaluation set.
EXCLUDED_SPLIT = "excluded"
#: The tables described as record sets: (name, key column, what one record is).
RECORD_SETS = (
    (
        "images",
        "image_id",
        "One record per image of the release (included and excluded: see excluded): a whole photo, or one "
        "person's box in a photo of several (box_x, box_y, box_width, box_height).",
    ),
    ("labels", "label_id", "One record per label: one labeler, one image, one phase (every label, counted or not)."),
    ("labelers", "labeler", "One record per labeler, by pseudonym."),
)
#: Columns that point at another record set's key.
REFERENCES = {("labels", "image_id"): "images/image_id", ("labels", "labeler"): "labelers/labeler"}
#: Licences recognised in the lead's licence text: (pattern on the text in capitals, SPDX id, Hub id).
LICENCES = (
    (r"CC[- ]?BY[- ]NC[- ]SA[- ]4\.0", "CC-BY-NC-SA-4.0", "cc-by-nc-sa-4.0"),
    (r"CC[- ]?BY[- ]NC[- ]ND[- ]4\.0", "CC-BY-NC-ND-4.0", "cc-by-nc-nd-4.0"),
    (r"CC[- ]?BY[- ]NC[- ]4\.0", "CC-BY-NC-4.0", "cc-by-nc-4.0"),
    (r"CC[- ]?BY[- ]SA[- ]4\.0", "CC-BY-SA-4.0", "cc-by-sa-4.0"),
    (r"CC[- ]?BY[- ]ND[- ]4\.0", "CC-BY-ND-4.0", "cc-by-nd-4.0"),
    (r"CC[- ]?BY[- ]4\.0", "CC-BY-4.0", "cc-by-4.0"),
    (r"CC0(?:[- ]1\.0)?", "CC0-1.0", "cc0-1.0"),
    (r"ODBL(?:[- ]1\.0)?", "ODbL-1.0", "odbl"),
)
PHOTOS_PREPROCESSING = (
    "Every released photo lost its metadata (EXIF including GPS location, XMP, IPTC, comments, text chunks) "
    "after its EXIF orientation was applied; the images table's sha256 is the checksum of the file as imported."
)
#: The lead's texts of the card's Collection section, in rai:dataCollection (title, key).
COLLECTION_FIELDS = (
    ("collection_source", "Source"),
    ("collection_time_frame", "Time frame"),
    ("collection_devices", "Cameras and devices"),
    ("collected_by", "Collected by"),
    ("consent", "Consent of the people photographed"),
)
#: The lead's texts about the labelers (CrowdWorkSheets), in rai:dataAnnotationProtocol.
ANNOTATOR_FIELDS = (
    ("labeler_recruitment", "Labeler recruitment"),
    ("labeler_training", "Labeler training"),
    ("compensation", "Compensation"),
    ("working_conditions", "Working conditions"),
)
NO_PHOTOS = "This release holds no photo: images are named by external_id and the sha256 of the file as imported."
PREPROCESSING = (
    "Colorimetric baselines (ITA, CIELAB L*, hue angle, apparent albedo) were computed from the skin pixels of "
    "each photo with the parameters named by baseline_parameters_hash; they are cross-checks, not labels.",
)


def _text(value: Any) -> str:
    return " ".join(str(value).split()) if value is not None else ""


def _card_text(facts: dict[str, Any]) -> dict[str, str]:
    return {item.get("field"): item.get("text", "") for item in facts.get("card_text") or [] if item.get("field")}


def licence_ids(text: str) -> tuple[str, str] | None:
    """(SPDX id, Hugging Face Hub id) of the one licence the lead's licence text names, or None (none or several)."""
    upper = (text or "").upper().replace("_", " ")
    found = {
        (spdx, hub) for pattern, spdx, hub in LICENCES if re.search(rf"(?<![A-Z0-9-]){pattern}(?![A-Z0-9])", upper)
    }
    return found.pop() if len(found) == 1 else None


def _data_type(data_type: pa.DataType) -> tuple[str, bool]:
    """(Croissant dataType, repeated) of a release table column."""
    repeated = pa.types.is_list(data_type) or pa.types.is_large_list(data_type)
    if repeated:
        data_type = data_type.value_type
    if pa.types.is_boolean(data_type):
        return "sc:Boolean", repeated
    if pa.types.is_integer(data_type):
        return "sc:Integer", repeated
    if pa.types.is_floating(data_type):
        return "sc:Float", repeated
    return "sc:Text", repeated


def _record_set(name: str, key: str, description: str, schema: pa.Schema, meanings: dict[str, str]) -> dict:
    fields = []
    for column in schema:
        data_type, repeated = _data_type(column.type)
        field: dict[str, Any] = {
            "@type": "cr:Field",
            "@id": f"{name}/{column.name}",
            "name": column.name,
            "description": meanings.get(column.name) or column.name,
            "dataType": data_type,
        }
        if repeated:
            field["repeated"] = True
        field["source"] = {"fileObject": {"@id": f"{name}.parquet"}, "extract": {"column": column.name}}
        if (name, column.name) in REFERENCES:
            field["references"] = {"field": {"@id": REFERENCES[(name, column.name)]}}
        fields.append(field)
    return {
        "@type": "cr:RecordSet",
        "@id": name,
        "name": name,
        "description": f"{description} Read from {name}.parquet (the same rows are in {name}.csv and {name}.jsonl).",
        "key": {"@id": f"{name}/{key}"},
        "field": fields,
    }


def _distribution(files: dict[str, dict]) -> list[dict]:
    nodes = []
    image_sets: dict[tuple[str, str], int] = {}  # (folder, extension) -> photos
    for path, info in sorted(files.items()):
        extension = path.rsplit(".", 1)[-1].lower() if "." in path else ""
        if path.startswith("imagefolder/") and extension in IMAGE_EXTENSIONS:
            key = (path.rsplit("/", 1)[0], extension)
            image_sets[key] = image_sets.get(key, 0) + 1
            continue
        node = {
            "@type": "cr:FileObject",
            "@id": path,
            "name": path,
            "contentUrl": path,
            "encodingFormat": ENCODING_FORMATS.get(extension, "application/octet-stream"),
            "contentSize": f"{info['bytes']} B",
            "sha256": info["sha256"],
        }
        if "rows" in info:
            node["description"] = f"{info['rows']} rows."
        nodes.append(node)
    for (folder, extension), n in sorted(image_sets.items()):
        name = folder.replace("/", "-") + f"-{extension}"
        which = " (the images the release rule leaves out of the evaluation set)" if folder != "imagefolder" else ""
        nodes.append(
            {
                "@type": "cr:FileSet",
                "@id": name,
                "name": name,
                "description": f"The {n} photos of {folder}/{which} stored as .{extension}, without their "
                "metadata, named <image_id>.<extension>; each one's SHA-256 is in manifest.json.",
                "encodingFormat": ENCODING_FORMATS[extension],
                "includes": f"{folder}/*.{extension}",
            }
        )
    return nodes


def _phase_texts(facts: dict[str, Any]) -> list[str]:
    phases = (facts.get("process") or {}).get("phases") or []
    return [
        f"{p.get('name', p.get('kind'))}: {p.get('labels_per_image')} labels per image asked, "
        f"{p.get('n_labels', 0)} labels on {p.get('n_labelled_images', 0)} images by {p.get('n_labelers', 0)} labelers"
        + (f" ({p['n_repeat_labels']} repeat labels, never counted)" if p.get("n_repeat_labels") else "")
        for p in phases
        if p.get("n_labels")
    ]


def _annotation_protocol(facts: dict[str, Any]) -> list[str]:
    process = facts.get("process") or {}
    scale = facts.get("scale") or {}
    final = facts.get("final_labels") or {}
    options = []
    if process.get("allow_adjacent_pairs"):
        options.append("two adjacent tones when unsure between them (their midpoint is the value)")
    if process.get("offer_uncertain"):
        options.append("an 'uncertain' flag")
    if process.get("skip_reasons"):
        options.append("a skip with a reason (" + ", ".join(map(str, process["skip_reasons"])) + ")")
    texts = [
        f"Each labeler chose the skin tone of a photo on the {scale.get('name', 'project')} scale "
        f"({scale.get('n_tones', '?')} tones, 1 = lightest)"
        + (f", or {'; or '.join(options)}" if options else "")
        + ". The order in which the tones were shown is recorded with every label (tone_order), and the display "
        "the labeler reported (display).",
        "Phases: calibration 1, calibration 2 (with repeats of calibration-1 images, for test-retest), main "
        "labeling and post-calibration (the phases a release counts are in its rule).",
        *_phase_texts(facts),
    ]
    if final:
        texts.append(
            f"Final value per image: the {final.get('aggregation')} of the counted valid labels (phases: "
            f"{final.get('phases')}; ties: {final.get('tie')}; at least {final.get('min_valid_labels')} valid "
            "labels), rounded half up to a tone for final_tone; labels.counted says which labels were used."
        )
    return texts


def _annotations_per_item(facts: dict[str, Any], counts: dict[str, Any]) -> str:
    process = facts.get("process") or {}
    per_phase = [
        f"{p.get('name', p.get('kind'))} {p['labels_per_labelled_image']:.2f}"
        for p in process.get("phases") or []
        if p.get("labels_per_labelled_image")
    ]
    n_images = int(counts.get("images") or 0)
    counted = int(counts.get("counted_labels") or 0)
    text = f"{counted} counted labels on {n_images} images ({counted / n_images:.2f} per image)" if n_images else ""
    asked = ", ".join(
        f"{p.get('name', p.get('kind'))} {p.get('labels_per_image')}"
        for p in process.get("phases") or []
        if p.get("n_labels")
    )
    parts = [text] if text else []
    if asked:
        parts.append(f"labels per image asked: {asked}")
    if per_phase:
        parts.append(f"labels per labelled image: {', '.join(per_phase)}")
    return "; ".join(parts) + "." if parts else "No labels."


def _annotator_demographics(labelers: pa.Table | None) -> list[str] | None:
    """The profiles labelers agreed to share, counted over them (never per pseudonym); None if none shared."""
    if labelers is None or "profile_shared" not in labelers.column_names:
        return None
    rows = [row for row in labelers.to_pylist() if row.get("profile_shared")]
    if not rows:
        return None
    texts = [f"{len(rows)} of {labelers.num_rows} labelers shared their profile; counted over those only."]
    for column, title in (
        ("gender", "Gender"),
        ("region_of_upbringing", "Region of upbringing"),
        ("expertise", "Expertise"),
    ):
        counts: dict[str, int] = {}
        for row in rows:
            value = (row.get(column) or "").strip() or "(not given)"
            counts[value] = counts.get(value, 0) + 1
        listed = ", ".join(f"{value} {n}" for value, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])))
        texts.append(f"{title}: {listed}.")
    return texts


def _biases(facts: dict[str, Any]) -> list[str]:
    final = facts.get("final_labels") or {}
    texts = []
    tones = final.get("tones") or []
    readings = [
        f"{t.get('name')} {t.get('reading')} ({(t.get('share') or {}).get('k')} of {(t.get('share') or {}).get('n')})"
        for t in tones
        if t.get("under_represented")
    ]
    if readings:
        texts.append(
            "Tone composition of the included images: "
            + "; ".join(readings)
            + f". Rule: {final.get('under_represented_rule')}."
        )
    wanted = {
        "Labels are subjective",
        "A small labeler team",
        "Under-represented tones",
        "The scale and its display order",
    }
    texts += [
        f"{item['title']}: {item['text']}" for item in facts.get("limitations") or [] if item.get("title") in wanted
    ]
    composition = facts.get("composition") or {}
    if composition.get("n_subjects"):
        texts.append(
            f"{composition.get('n_images')} images show {composition.get('n_subjects_with_images')} people; several "
            "images of one person are not independent (subject_id)."
        )
    return texts


def _collection(facts: dict[str, Any], card: dict[str, str]) -> str:
    composition = facts.get("composition") or {}
    text = (
        f"{composition.get('n_images', 0)} photos, {composition.get('n_images_with_subject', 0)} of them of "
        f"{composition.get('n_subjects_with_images', 0)} identified people (subjects, with their attributes as "
        "imported), were imported into FairTone from the project's source collection, each with its id there "
        "(external_id)."
    )
    for key, title in COLLECTION_FIELDS:
        if card.get(key):
            text += f" {title}: {_text(card[key])}"
    return text


#: ISO dates (2024-03-01, or a month: 2024-03) in the lead's collection time frame.
_ISO_DATE = re.compile(r"(?<![\d-])(\d{4})-(0[1-9]|1[0-2])(?:-(0[1-9]|[12]\d|3[01]))?(?![\d-])")


def collection_dates(text: str) -> list[str]:
    """The first and last ISO dates the lead's time frame names (``YYYY-MM-DD``; a month is its first day),
    in the order written; ``[]`` when it names none or an impossible date."""
    dates = []
    for year, month, day in _ISO_DATE.findall(text or ""):
        try:
            dates.append(datetime.date(int(year), int(month), int(day or 1)).isoformat())
        except ValueError:
            return []
    return [dates[0], dates[-1]] if len(dates) > 1 else dates


def _protocol_texts(facts: dict[str, Any], card: dict[str, str]) -> list[str]:
    """What the labelers saw and how they worked (the card's annotation protocol), and what the lead says of them."""
    protocol = facts.get("annotation_protocol") or {}
    texts = []
    if protocol.get("instructions"):
        texts.append("Instructions the labelers read: " + _text(protocol["instructions"]))
    examples = protocol.get("tone_examples") or []
    if examples:
        n_examples = sum(int(t.get("n_examples") or 0) for t in examples)
        texts.append(
            "The scale's swatches were shown beside every photo in a fixed order (tone_order); "
            + (f"{n_examples} example photos were shown with the instructions." if n_examples else "no example photo.")
        )
    display = protocol.get("display") or {}
    if display.get("n_submissions"):
        shown = [
            f"{p['title']}: " + ", ".join(f"{v['value']} {v['n']}" for v in p["values"])
            for p in display.get("properties") or []
            if p.get("values")
        ]
        texts.append(
            f"Display conditions: {display.get('n_recorded', 0)} of {display['n_submissions']} submissions reported "
            "the labeler's display (labels.display)" + (f"; {'; '.join(shown)}." if shown else ".")
        )
    for r in protocol.get("reflections") or []:
        texts.append(
            f"Reflections after {r['name']}: {r['n_reflections']} of {r['n_participants']} labelers (counted only; "
            "their words stay with the lead)."
        )
    for t in protocol.get("time_per_label") or []:
        if t.get("median_s") is not None:
            texts.append(
                f"Time per label, {t['name']}: median {t['median_s']:.1f} s, interquartile range {t['p25_s']:.1f} to "
                f"{t['p75_s']:.1f} s, 90th percentile {t['p90_s']:.1f} s ({t['n']} timed labels)."
            )
    for key, title in ANNOTATOR_FIELDS:
        if card.get(key):
            texts.append(f"{title}: {_text(card[key])}")
    return texts


def _baseline_version(code_version: str) -> str:
    parts = [part.strip() for part in (code_version or "").split(";")]
    return next((part for part in parts if part.startswith("baselines ")), "")


def _cite_as(release: dict[str, Any]) -> str:
    """A BibTeX entry naming the project, the release and its year (the lead's contacts are on the card)."""
    key = re.sub(r"[^a-z0-9]+", "-", str(release.get("project") or "").lower()).strip("-") or "project"
    year = str(release.get("created_at") or "")[:4]
    title = f"{release.get('project')}: FairTone release {release.get('version')}".replace("{", "").replace("}", "")
    return (
        f"@misc{{fairtone-{key}-v{release.get('version')},\n  title = {{{title}}},\n  year = {{{year}}},\n"
        f"  note = {{Dataset release {release.get('version')}, made with FairTone}}\n}}"
    )


def croissant_jsonld(
    facts: dict[str, Any],
    files: dict[str, dict],
    schemas: dict[str, pa.Schema],
    summary: dict[str, Any],
    labelers: pa.Table | None = None,
) -> dict[str, Any]:
    """The release's Croissant 1.0 + RAI JSON-LD document.

    Parameters
    ----------
    facts : dict
        The data card's facts (``card_facts``).
    files : dict
        Relative path -> ``{"sha256", "bytes", ("rows")}`` of every file written so far (the manifest's entries).
    schemas : dict
        ``images``, ``labels``, ``labelers`` -> the Arrow schema of their Parquet file.
    summary : dict
        The release's counts (``images``, ``included``, ``excluded``, ``labels``, ``counted_labels``, ``labelers``).
    labelers : pyarrow.Table, optional
        The labelers table, for the shared profiles (``rai:annotatorDemographics``).
    """
    release = facts.get("release") or {}
    card = _card_text(facts)
    scale = facts.get("scale") or {}
    n_images = int(summary.get("images") or 0)
    meanings = {
        table: {f["name"]: f.get("meaning", "") for f in fields}
        for table, fields in (facts.get("fields") or {}).items()
    }
    licence = card.get("licence", "")
    ids = licence_ids(licence)
    licences = [f"https://spdx.org/licenses/{ids[0]}.html"] if ids else []
    if licence and (not ids or _text(licence) != ids[0]):
        licences.append(_text(licence))
    description = (
        f"Skin-tone labels on the {scale.get('name', '')} scale for {n_images} face images "
        f"({summary.get('included', n_images)} included in the evaluation set), from FairTone project "
        f"{release.get('project')!s}, release {release.get('version')}: a dataset for evaluating the fairness of "
        "face models across skin tones. See data_card.md for every number with its interval."
    )
    if card.get("motivation"):
        description += f" Motivation: {_text(card['motivation'])}"
    if card.get("funding"):
        description += f" Funding: {_text(card['funding'])}"
    attributes = [name for name in schemas["images"].names if name not in FIXED_IMAGE_COLUMNS]
    uses = [
        f"Intended uses: {_text(card['intended_uses'])}" if card.get("intended_uses") else "",
        f"Out-of-scope uses: {_text(card['out_of_scope_uses'])}" if card.get("out_of_scope_uses") else "",
    ]
    document: dict[str, Any] = {
        "@context": CROISSANT_CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": CROISSANT_CONFORMS_TO,
        "name": f"{release.get('project')} (FairTone release {release.get('version')})",
        "description": description,
        "citeAs": _cite_as(release),
        "license": licences or ["(no licence given)"],
        "version": f"{int(release.get('version') or 0)}.0.0",
        "datePublished": release.get("created_at"),
        "keywords": ["skin tone", "fairness evaluation", str(scale.get("name", "")), "face images", "annotations"],
        "isAccessibleForFree": True,
        "distribution": _distribution(files),
        "recordSet": [
            _record_set(name, key, text, schemas[name], meanings.get(name, {})) for name, key, text in RECORD_SETS
        ],
        "rai:dataCollection": _collection(facts, card),
        "rai:dataPreprocessingProtocol": [
            *([f"Pre-filtering: {_text(card['pre_filtering'])}"] if card.get("pre_filtering") else []),
            PHOTOS_PREPROCESSING if any(path.startswith("imagefolder/") for path in files) else NO_PHOTOS,
            *PREPROCESSING,
        ],
        "rai:dataAnnotationProtocol": [*_annotation_protocol(facts), *_protocol_texts(facts, card)],
        "rai:dataAnnotationPlatform": [f"FairTone web application ({release.get('code_version')})"],
        "rai:dataAnnotationAnalysis": [
            "Agreement per phase (Krippendorff's alpha with its 95% interval, read from the interval; consensus "
            "rates with Wilson intervals), test-retest per labeler and labels against ITA: data_card.md, "
            "agreement and test-retest sections; each labeler's bias: labelers table."
        ],
        "rai:annotationsPerItem": _annotations_per_item(facts, summary),
        "rai:machineAnnotationTools": [
            "Colorimetric baseline (ITA, L*, hue angle, apparent albedo from the skin pixels; not a label): "
            + (_baseline_version(release.get("code_version") or "") or "FairTone's baselines")
        ],
        "rai:dataBiases": _biases(facts),
        "rai:dataUseCases": [text for text in uses if text],
        "rai:dataLimitations": [f"{item['title']}: {item['text']}" for item in facts.get("limitations") or []],
        "rai:personalSensitiveInformation": [
            SENSITIVE_STATEMENT,
            *(
                ["Subject attributes released as columns of the images table: " + ", ".join(attributes) + "."]
                if attributes
                else []
            ),
        ],
        "rai:dataReleaseMaintenancePlan": " ".join(
            [
                *([_text(card["maintenance_plan"])] if card.get("maintenance_plan") else []),
                MAINTENANCE,
                *([f"Contacts: {_text(card['contacts'])}"] if card.get("contacts") else []),
            ]
        ),
    }
    if card.get("collection_time_frame"):
        # The RAI 1.0 term (rai:dataCollectionTimeframe) with the lead's words; mlcroissant reads its own
        # spelling (rai:dataCollectionTimeFrame) as dates: the first and last ISO dates the words name.
        document["rai:dataCollectionTimeframe"] = _text(card["collection_time_frame"])
        dates = collection_dates(card["collection_time_frame"])
        if dates:
            document["rai:dataCollectionTimeFrame"] = dates
    if card.get("social_impact"):
        document["rai:dataSocialImpact"] = _text(card["social_impact"])
    demographics = _annotator_demographics(labelers)
    if demographics:
        document["rai:annotatorDemographics"] = demographics
    return document


def croissant_write(
    out_dir: Path,
    facts: dict[str, Any],
    files: dict[str, dict],
    schemas: dict[str, pa.Schema],
    summary: dict[str, Any],
    labelers: pa.Table | None = None,
) -> dict[str, dict]:
    """Write ``out_dir/croissant.json`` (indent 2, trailing newline); ``{"croissant.json": file info}``."""
    document = croissant_jsonld(facts, files, schemas, summary, labelers)
    path = Path(out_dir) / CROISSANT_NAME
    path.write_bytes((json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8"))
    return {CROISSANT_NAME: file_info(path)}


# --------------------------------------------------------------------------- the imagefolder's dataset card


def _size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return name
    return "1M<n<10M"


def _yaml(value: str) -> str:
    """A YAML scalar: JSON's double-quoted string is valid YAML."""
    return json.dumps(value, ensure_ascii=False)


def imagefolder_readme(facts: dict[str, Any], files: dict[str, dict], summary: dict[str, Any]) -> str:
    """The imagefolder's ``README.md``: a Hugging Face dataset card (YAML header, then what the folder holds).

    ``files``: the imagefolder's files (relative to the release, ``imagefolder/...``), for the extensions the
    config's ``data_files`` list (only those present, so that every pattern matches a file).
    """
    release = facts.get("release") or {}
    card = _card_text(facts)
    scale = facts.get("scale") or {}
    n_images = int(summary.get("images") or 0)
    n_excluded = int(summary.get("excluded") or 0)
    licence = card.get("licence", "")
    ids = licence_ids(licence)

    def extensions_in(folder: str) -> list[str]:
        return sorted(
            {
                path.rsplit(".", 1)[-1]
                for path in files
                if path.rsplit("/", 1)[0] == folder and path.endswith(IMAGE_EXTENSIONS)
            }
        )

    extensions = extensions_in("imagefolder")
    excluded_extensions = extensions_in(f"imagefolder/{EXCLUDED_SPLIT}")
    # Its own config, not a second split of the default one: datasets infers the features of each metadata
    # file and refuses splits whose features differ (an excluded image without a baseline has null columns).
    excluded_config = [
        f"- config_name: {EXCLUDED_SPLIT}",
        "  data_files:",
        "  - split: test",
        "    path:",
        *(f"    - {_yaml(f'{EXCLUDED_SPLIT}/*.{extension}')}" for extension in excluded_extensions),
        f"    - {EXCLUDED_SPLIT}/metadata.jsonl",
    ]
    title = f"{release.get('project')}: FairTone release {release.get('version')}"
    header = ["---", f"pretty_name: {_yaml(title)}"]
    if ids:
        header.append(f"license: {ids[1]}")
    else:
        header += ["license: other", "license_name: custom", "license_link: README.md"]
    header += [
        "task_categories:",
        "- image-classification",
        "tags:",
        "- fairness",
        "- skin-tone",
        f"- {_yaml(str(scale.get('kind') or 'custom') + '-scale')}",
        "size_categories:",
        f"- {_size_category(n_images)}",
        "configs:",
        "- config_name: default",
        "  data_files:",
        "  - split: test",
        "    path:",
        *(f"    - {_yaml(f'*.{extension}')}" for extension in extensions),
        "    - metadata.jsonl",
        *(excluded_config if excluded_extensions else []),
        "---",
    ]
    by_reason = [f"{name} {n}" for name, n in sorted((summary.get("excluded_by_reason") or {}).items()) if n]
    body = [
        f"# {title}",
        "",
        f"Face photos with skin-tone labels on the {scale.get('name', '')} scale (1 = lightest), for evaluating "
        f"the fairness of face models across skin tones: {n_images} images, {n_images - n_excluded} of them in the "
        "evaluation set. Every photo lost its metadata (EXIF with location, XMP, IPTC, comments) when it was "
        "released.",
        "",
        "A photo of several people is one row per person: `box_x`, `box_y`, `box_width` and `box_height` give "
        "that person's box in the photo (pixels, empty for a whole photo), and each row has its own copy of the "
        "photo, named by its `image_id`.",
        "",
        "This folder is a Hugging Face `imagefolder`: the photos, named `<image_id>.<extension>`, and "
        "`metadata.jsonl`, one row per photo with `file_name` and every column of the release's images table "
        "(final tone, consensus, colorimetric baselines, subject attributes). It can be pushed to a Hub as it is, "
        'or loaded with `datasets.load_dataset("path/to/imagefolder")`: the split `test` is the evaluation set'
        + (f"; the configuration `{EXCLUDED_SPLIT}` holds the images left out of it." if excluded_extensions else ".")
        + " The labels of each "
        "labeler, the labelers, the data card (`data_card.md`), `croissant.json` (Croissant metadata with its "
        "Responsible AI fields) and `manifest.json` (every file's SHA-256) are in the folder above.",
        "",
        "## Excluded images",
        "",
        *(
            [
                f"The split `test` (this folder) is the evaluation set: {n_images - n_excluded} image(s), none of "
                f"them excluded. The {n_excluded} image(s) the release rule leaves out of the evaluation set are "
                f"apart, in the configuration `{EXCLUDED_SPLIT}` (the folder `{EXCLUDED_SPLIT}/`), with `excluded` true; "
                "`excluded_reason` says why (readiness categories separated by `;`) and `lead_exclusion_reason` "
                "gives a lead's own reason."
                + (
                    f" Excluded by category: {', '.join(by_reason)} (an image can count under several)."
                    if by_reason
                    else ""
                ),
                "",
                "Compute metrics on the default configuration's split `test` only:",
                "",
                "```python",
                "from datasets import load_dataset",
                "",
                'evaluation = load_dataset("path/to/imagefolder", split="test")',
                f'left_out = load_dataset("path/to/imagefolder", "{EXCLUDED_SPLIT}", split="test")  # excluded_reason',
                "```",
            ]
            if n_excluded
            else [f"No image is excluded: the split `test` holds all {n_images} image(s) of the release."]
        ),
        "",
        "The tables one folder up (`images.parquet`, `images.csv`) hold every image, included and excluded: "
        'there, keep the rows where `excluded` is false (`images[~images["excluded"]]`).',
        "",
        "## Uses",
        "",
        f"Intended uses: {_text(card.get('intended_uses')) or '(not given)'}",
        "",
        f"Out-of-scope uses: {_text(card.get('out_of_scope_uses')) or '(not given)'}",
        "",
        "## Personal and sensitive information",
        "",
        SENSITIVE_STATEMENT,
        "",
        f"Consent of the people photographed: {_text(card.get('consent')) or '(not given)'}",
        "",
        "## Licence",
        "",
        _text(licence) or "(not given)",
        "",
        "## Contacts",
        "",
        _text(card.get("contacts")) or "(not given)",
        "",
    ]
    return "\n".join(header) + "\n\n" + "\n".join(body)


def imagefolder_readme_write(
    out_dir: Path, facts: dict[str, Any], files: dict[str, dict], summary: dict[str, Any]
) -> dict[str, dict]:
    """Write ``out_dir/imagefolder/README.md``; ``{"imagefolder/README.md": file info}``."""
    path = Path(out_dir) / "imagefolder" / README_NAME
    path.write_bytes(imagefolder_readme(facts, files, summary).encode("utf-8"))
    return {f"imagefolder/{README_NAME}": file_info(path)}
