"""Evaluation runs: a model's results joined with a release and scored by ``metrics`` in a background job.

:func:`evaluation_create` validates the upload and the options, joins the results with the release at
once (the user sees what matched before anything is stored; nothing is kept when the join fails) and
queues :func:`evaluation_run`, which calls ``metrics.report.write_report`` on the joined table. Every
number of the report comes from ``metrics``; this module only reads, joins and stores.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from metrics.report import ReportInputError, ReportOptions, tone_composition, write_report

from ...models import EvaluationRun, Job, Project, Release
from .. import queue
from ..heartbeat import JobBeat
from ..media_files import local_copy, storage_delete_tree, storage_local_path, upload_file, upload_tree
from ..project_lifecycle import project_refuse_if_archived
from ..releases import release_file_local, release_file_name
from ..releases.tables import FIXED_IMAGE_COLUMNS
from .joining import (
    KEY,
    LABELER_PREFIX,
    JoinSpec,
    ResultsError,
    join_release,
    results_columns,
    samples_for_join,
)

logger = logging.getLogger(__name__)

#: Largest results file accepted (bytes).
MAX_RESULTS_BYTES = 200 * 1024 * 1024
#: Uploads up to this size are read in the web process (their shape is bounded first: at most a few MB of
#: memory); larger ones in a process of their own with ``RESULTS_MEMORY_BYTES`` of memory, never in a web
#: worker (a 233 KB Parquet file once decoded to 3.6 GB there).
IN_PROCESS_BYTES = 1 << 20
RESULTS_MEMORY_BYTES = 2 << 30
#: The reading process is stopped after this many seconds.
RESULTS_SECONDS = 120
#: The worst images of a flagged region shown as thumbnails.
WORST_IMAGES = 12
#: Options a run accepts, with their defaults (seed 000's where the seed gives one).
DEFAULT_OPTIONS: dict[str, Any] = {
    "threshold": 2.0,
    "alpha": 0.05,
    "cluster_error_threshold": None,
    "min_samples": 10,
    "min_cluster_size": 10,
    "min_fraction": 0.7,
    "permutations": 199,
    "band_permutations": 999,
    "uncertainty_draws": 100,
    "n_bands": 5,
    # Bands of the skin-tone verdict on the project's scale: None, one per tone.
    "tone_bands": None,
    "seed": 0,
    "gender_column": None,
    "body_shape_column": None,
    "groups": None,
    # "auto": by subject whenever the release's subject ids repeat among the matched samples; "none"; or a
    # text attribute naming the person of each sample.
    "cluster": "auto",
    # Draw the report's figures (PNG and SVG; about two thirds of a small run's time). False: report.json,
    # report.html and the page's tables only, e.g. for a gate in CI that reads the verdict (the CLI's
    # ``--no-figures``).
    "figures": True,
}
#: Answers a yes/no option accepts (any case), as a JSON boolean or as a form field's text.
_YES, _NO = ("true", "yes", "1", "on"), ("false", "no", "0", "off")
#: An attribute option set to this is switched off (the run scores the others).
OFF = "none"
#: Hard and soft time limits of the evaluation task (seconds): 50,000 samples with the permutation null take
#: about two minutes on a loaded 2-core machine.
EVALUATION_TASK_TIME_LIMIT = 1800
EVALUATION_TASK_SOFT_TIME_LIMIT = 1740
#: Threshold when the error is a classification's 0/1 mistake (a group's mean error is its error rate).
CLASSIFICATION_THRESHOLD = 0.1


def evaluation_prefix(run: EvaluationRun) -> str:
    """The storage folder of a run's files: ``joined.parquet`` (the upload joined with the release) and
    ``report/`` (report.json, report.html, figures/)."""
    return f"evaluations/{int(run.project_id)}/{int(run.pk)}"


def evaluation_dir(run: EvaluationRun) -> Path:
    """The run's local folder (local disk only: tests and benches)."""
    path = storage_local_path(evaluation_prefix(run))
    if path is None:
        raise NotImplementedError("evaluation files are not stored on the local disk")
    return path


def evaluation_file_name(run: EvaluationRun, relative: str) -> str | None:
    """The storage name of a file of a finished run (report.json, report.html, figures/*.png|svg), or None;
    nothing else is served."""
    if run.status != EvaluationRun.Status.DONE:
        return None
    allowed = {"report.json", "report.html"} | {
        name for f in (run.report or {}).get("figures", []) for name in (f.get("png"), f.get("svg")) if name
    }
    if relative not in allowed or relative.startswith("/") or ".." in relative.split("/"):
        return None
    name = f"{evaluation_prefix(run)}/report/{relative}"
    local = storage_local_path(name)
    if local is not None:
        base = storage_local_path(f"{evaluation_prefix(run)}/report").resolve()  # type: ignore[union-attr]
        resolved = local.resolve()
        return name if base in resolved.parents and resolved.is_file() else None
    return name if default_storage.exists(name) else None


def evaluation_file_path(run: EvaluationRun, relative: str) -> Path | None:
    """The local path of a finished run's file (local disk only: tests and benches), or None."""
    name = evaluation_file_name(run, relative)
    return None if name is None else storage_local_path(name)


def _release_images(release: Release) -> pd.DataFrame:
    with release_file_local(release, "images.parquet") as path:
        if path is None:
            raise ValidationError({"release": "This release has no images table (was it published?)."})
        return pq.read_table(path).to_pandas()


def _release_labels(release: Release) -> pd.DataFrame | None:
    """The release's labels table (the columns that give each labeler's tone), or None."""
    with release_file_local(release, "labels.parquet") as path:
        if path is None:
            return None
        columns = ["image_id", "labeler", "value", "counted", "valid"]
        if not set(columns) <= set(pq.read_schema(path).names):
            return None
        return pq.read_table(path, columns=columns).to_pandas()


def _join_elsewhere(raw: Path, columns, release: Release, attributes, spec: JoinSpec, out: Path) -> dict:
    """:func:`joining.join_release` in a Python process of its own, with a memory and a time limit."""
    with (
        release_file_local(release, "labels.parquet") as labels,
        release_file_local(release, "images.parquet") as images,
    ):
        return _join_in_subprocess(raw, columns, attributes, spec, out, images, labels)


def _join_in_subprocess(raw: Path, columns, attributes, spec: JoinSpec, out: Path, images, labels) -> dict:
    import subprocess
    import sys
    from dataclasses import asdict

    from . import joining

    request = out.parent / "join-request.json"
    request.write_text(
        json.dumps(
            {
                "results": str(raw),
                "columns": columns,
                "images": str(images),
                "labels": str(labels) if labels else None,
                "attributes": attributes,
                "spec": {k: v for k, v in asdict(spec).items() if k != "problems"},
                "out": str(out),
                "memory_bytes": RESULTS_MEMORY_BYTES,
            }
        ),
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": str(settings.BASE_DIR)}
    try:
        done = subprocess.run(
            [sys.executable, joining.__file__, str(request)],
            capture_output=True,
            text=True,
            timeout=RESULTS_SECONDS,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ResultsError(
            [f"reading the file took longer than {RESULTS_SECONDS} s: keep only the id and error columns"],
            too_large=True,
        ) from None
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        logger.warning("the results reader ended with code %s and no answer", done.returncode)
        raise ResultsError(["the results file could not be read (the reader stopped unexpectedly)"]) from None
    if "problems" in answer:
        raise ResultsError(answer["problems"], answer.get("join"), too_large=answer.get("too_large", False))
    return answer["join"]


def release_attributes(release: Release) -> tuple[list[str], list[str]]:
    """(categorical, numeric) subject-attribute columns of a release's images table."""
    name = release_file_name(release, "images.parquet")
    if name is None:
        return [], []
    with local_copy(name) as path:
        schema = pq.read_schema(path)
    categorical, numeric = [], []
    for f in schema:
        if f.name in FIXED_IMAGE_COLUMNS:
            continue
        if pa.types.is_string(f.type) or pa.types.is_large_string(f.type) or pa.types.is_dictionary(f.type):
            categorical.append(f.name)
        elif pa.types.is_integer(f.type) or pa.types.is_floating(f.type):
            numeric.append(f.name)
    return categorical, numeric


def _number(options: dict, name: str, kind, *, low=None, high=None, problems: dict) -> None:
    value = options.get(name, DEFAULT_OPTIONS.get(name))
    if value is None or value == "":
        options[name] = None if DEFAULT_OPTIONS.get(name) is None else DEFAULT_OPTIONS[name]
        return
    try:
        number = kind(value)
        if kind is float and not np.isfinite(number):
            raise ValueError
    except (TypeError, ValueError):
        problems[name] = f"{name.replace('_', ' ')} must be a {'whole ' if kind is int else ''}number, got {value!r}"
        return
    if (low is not None and number < low) or (high is not None and number > high):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        problems[name] = f"{name.replace('_', ' ')} must be {bounds}, got {number}"
        return
    options[name] = number


def _yes_no(options: dict, name: str, *, problems: dict) -> None:
    value = options.get(name)
    if value is None or value == "":
        options[name] = DEFAULT_OPTIONS[name]
    elif isinstance(value, bool):
        options[name] = value
    elif isinstance(value, str) and value.strip().lower() in _YES + _NO:
        options[name] = value.strip().lower() in _YES
    else:
        problems[name] = f"{name.replace('_', ' ')} must be true or false, got {value!r}"


def options_clean(raw: dict[str, Any], release: Release, *, error_kind: str = "regression") -> dict[str, Any]:
    """The run's options with defaults, validated against the release's columns (ValidationError per field)."""
    unknown = sorted(set(raw) - set(DEFAULT_OPTIONS))
    problems: dict[str, str] = {}
    if unknown:
        problems["options"] = f"unknown option(s) {', '.join(unknown)}; known: {', '.join(DEFAULT_OPTIONS)}"
    options = {**DEFAULT_OPTIONS, **{k: v for k, v in raw.items() if k in DEFAULT_OPTIONS}}
    if error_kind == "classification" and raw.get("threshold") in (None, ""):
        options["threshold"] = CLASSIFICATION_THRESHOLD
    _number(options, "threshold", float, low=1e-12, problems=problems)
    _number(options, "alpha", float, low=1e-6, high=0.5, problems=problems)
    _number(options, "cluster_error_threshold", float, low=0, problems=problems)
    _number(options, "min_samples", int, low=2, high=1000, problems=problems)
    _number(options, "min_cluster_size", int, low=2, high=100000, problems=problems)
    _number(options, "min_fraction", float, low=0.01, high=1, problems=problems)
    _number(options, "permutations", int, low=0, high=2000, problems=problems)
    _number(options, "band_permutations", int, low=99, high=9999, problems=problems)
    _number(options, "uncertainty_draws", int, low=1, high=1000, problems=problems)
    _number(options, "n_bands", int, low=2, high=10, problems=problems)
    _number(options, "tone_bands", int, low=2, high=100, problems=problems)
    _number(options, "seed", int, low=0, problems=problems)
    _yes_no(options, "figures", problems=problems)
    categorical, numeric = release_attributes(release)
    gender = options.get("gender_column")
    if gender in (None, ""):
        gender = "gender" if "gender" in categorical else None
    elif gender == OFF:
        gender = None
    elif gender not in categorical:
        problems["gender_column"] = (
            f"{gender!r} is not a text attribute of release v{release.version}; "
            f"it has {', '.join(categorical) or 'none'}"
        )
    body = options.get("body_shape_column")
    if body in (None, ""):
        # Numeric (scored along its range) or text (scored as groups, like gender; metrics.report decides).
        body = next((c for c in [*numeric, *categorical] if "body" in c.lower() and c != gender), None)
    elif body == OFF:
        body = None
    elif body not in numeric and body not in categorical:
        problems["body_shape_column"] = (
            f"{body!r} is not an attribute of release v{release.version}; "
            f"it has {', '.join([*numeric, *categorical]) or 'none'}"
        )
    groups = options.get("groups")
    if groups in (None, ""):
        groups = [c for c in categorical if c != gender][:2]
        groups = ([gender] if gender else []) + groups
    else:
        if isinstance(groups, str):
            groups = [g.strip() for g in groups.split(",") if g.strip()]
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            problems["groups"] = "groups must be a list of attribute names"
            groups = []
        bad = [g for g in groups if g not in categorical]
        if bad:
            problems["groups"] = f"not text attributes of the release: {', '.join(bad)}"
    cluster = options.get("cluster")
    if cluster in (None, ""):
        cluster = "auto"
    if not isinstance(cluster, str):
        problems["cluster"] = "cluster must be 'auto', 'none' or a text attribute naming each sample's person"
    elif cluster not in ("auto", OFF) and cluster not in categorical:
        problems["cluster"] = (
            f"{cluster!r} is not a text attribute of release v{release.version}; use 'auto' (by subject when "
            f"subjects repeat), 'none' or one of {', '.join(categorical) or 'none'}"
        )
    if problems:
        raise ValidationError(problems)
    options.update(gender_column=gender, body_shape_column=body, groups=list(dict.fromkeys(groups)), cluster=cluster)
    return options


def evaluation_create(
    *,
    project: Project,
    user,
    release: Release,
    upload,
    name: str,
    model_name: str = "",
    spec: JoinSpec | None = None,
    options: dict[str, Any] | None = None,
) -> EvaluationRun:
    """Validate, join and store a run, and queue its report. Nothing is stored when anything is wrong.

    Raises
    ------
    django.core.exceptions.ValidationError
        Per field: name, release (not this project's, not published), file (type, size, unreadable),
        options, and the join (``results``: one line per problem; ``join``: what was counted); the project
        is archived.
    """
    project_refuse_if_archived(project.pk, "score a model")
    spec = spec or JoinSpec()
    problems: dict[str, Any] = {}
    name = (name or "").strip()
    if not name:
        problems["name"] = "Give the run a name (e.g. the model and its version)."
    elif len(name) > 200:
        problems["name"] = "Use at most 200 characters."
    if len(model_name or "") > 200:
        problems["model_name"] = "Use at most 200 characters."
    if release is None or release.project_id != project.pk:
        problems["release"] = "Choose one of this project's releases."
    elif release.status != Release.Status.PUBLISHED:
        problems["release"] = f"Release v{release.version} is {release.get_status_display().lower()}, not published."
    suffix = Path(getattr(upload, "name", "") or "").suffix.lower()
    if upload is None:
        problems["file"] = "Upload the model's results (.csv, .jsonl or .parquet)."
    elif suffix not in {".csv", ".jsonl", ".ndjson", ".parquet"}:
        problems["file"] = f"Unknown file type {suffix or '(none)'!r}: upload a .csv, .jsonl or .parquet file."
    elif upload.size > MAX_RESULTS_BYTES:
        problems["file"] = f"The file is {upload.size / 1e6:.0f} MB; the limit is {MAX_RESULTS_BYTES / 1e6:.0f} MB."
    if problems:
        refused = ValidationError(problems)
        refused.too_large = "file" in problems and upload is not None and upload.size > MAX_RESULTS_BYTES
        raise refused
    options = options_clean(options or {}, release, error_kind=spec.error_kind if spec.prediction_column else "")

    work = Path(tempfile.mkdtemp(prefix="evaluation-"))
    try:
        raw = work / f"results{suffix}"
        with raw.open("wb") as out:
            for chunk in upload.chunks():
                out.write(chunk)
        images = _release_images(release)
        attributes = [c for c in [options["gender_column"], options["body_shape_column"], *options["groups"]] if c]
        if options["cluster"] not in ("auto", OFF):
            attributes.append(options["cluster"])
        if "subject_id" in images.columns:
            attributes.append("subject_id")
        joined_path = work / "joined.parquet"
        try:
            columns = results_columns(raw)  # the file's shape, bounded, before any row is parsed
            if upload.size <= IN_PROCESS_BYTES:
                samples, keep = samples_for_join(images, _release_labels(release), attributes)
                joined, join = join_release(raw, columns, samples, keep, spec)
                joined.to_parquet(joined_path, index=False)
            else:
                join = _join_elsewhere(raw, columns, release, attributes, spec, joined_path)
        except ResultsError as exc:
            refused = ValidationError({"results": exc.problems})
            refused.join = exc.join  # what was counted, for the page and the API's answer
            refused.too_large = exc.too_large
            raise refused from None
        if not join.get("with_final_value"):
            refused = ValidationError(
                {
                    "results": [
                        f"none of the {join['matched']} matched samples has a final skin tone in release "
                        f"v{release.version} (every one lacks enough valid labels): there is nothing to score"
                    ]
                }
            )
            refused.join = join
            raise refused
        tones = images.loc[~images["excluded"].fillna(False).astype(bool), "final_value"].to_numpy(dtype=float)
        composition = tone_composition(tones[np.isfinite(tones)], project.scale.tones.count()) if tones.size else None
        written: dict[str, Any] = {}
        try:
            with transaction.atomic():
                job = Job.objects.create(
                    project=project,
                    kind=Job.Kind.EVALUATION,
                    parameters={"release": release.version, "name": name},
                    total=6,
                    created_by=user if user is not None and user.is_authenticated else None,
                )
                run = EvaluationRun(
                    project=project,
                    release=release,
                    name=name,
                    model_name=(model_name or "").strip(),
                    options={**options, "error_kind": spec.error_kind if spec.prediction_column else "given"},
                    join=join,
                    report={"release_composition": composition},
                    job=job,
                    created_by=job.created_by,
                )
                with raw.open("rb") as handle:
                    run.predictions.save(f"{project.pk}/results{suffix}", File(handle), save=False)
                written["upload"] = run.predictions.name
                run.save()
                job.parameters["evaluation_id"] = run.pk
                job.save(update_fields=["parameters"])
                written["dir"] = evaluation_prefix(run)
                upload_file(joined_path, f"{evaluation_prefix(run)}/joined.parquet")
                transaction.on_commit(lambda: queue.enqueue(queue.EVALUATION_RUN, run.pk))
        except BaseException:
            # Nothing half-stored: the upload and the joined table go with the rolled-back rows.
            if "upload" in written:
                default_storage.delete(written["upload"])
            if "dir" in written:
                storage_delete_tree(written["dir"])
            raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    run.refresh_from_db()
    return run


def _job_step(run: EvaluationRun, done: int, message: str) -> None:
    """Progress, and a sign of life for the jobs sweeper (``services.jobs``)."""
    JobBeat(run.job_id)(done=done, message=message)


#: An absolute file path in a message (a server's temporary or media folder): never shown to a user.
_PATH = re.compile(r"(?<![\w.:/])/(?:[^\s/'\"]+/)+[^\s'\":;,)]*")


def without_paths(text: str) -> str:
    """``text`` with every absolute path replaced by "<file>" (issue 26: evaluation errors showed temp paths)."""
    return _PATH.sub("<file>", text)


def evaluation_fail(run: EvaluationRun, error: str) -> None:
    error = without_paths(error)
    now = timezone.now()
    EvaluationRun.objects.filter(pk=run.pk).update(status=EvaluationRun.Status.FAILED, error=error, finished_at=now)
    if run.job_id:
        Job.objects.filter(pk=run.job_id).update(status=Job.Status.FAILED, message=error[:500], finished_at=now)


_STEPS = {"gender": 1, "skin_tone": 2, "body_shape": 2, "label_uncertainty": 3, "intersectional": 4, "figures": 5}


def evaluation_run(run: EvaluationRun) -> EvaluationRun:
    """Compute the run's report with ``metrics.report.write_report`` (safe to run again: starts afresh)."""
    if run.status in (EvaluationRun.Status.DONE, EvaluationRun.Status.FAILED):
        return run  # a finished run, or one given up by the sweeper, is never recomputed
    if Project.objects.filter(pk=run.project_id, archived_at__isnull=False).exists():
        # Archived after the upload: an archived project is read-only, so no report is written into it.
        evaluation_fail(run, "The project was archived before this run was scored: unarchive it to score the model.")
        run.refresh_from_db()
        return run
    now = timezone.now()
    EvaluationRun.objects.filter(pk=run.pk).update(status=EvaluationRun.Status.RUNNING, error="")
    if run.job_id:
        Job.objects.filter(pk=run.job_id).update(status=Job.Status.RUNNING, started_at=now, heartbeat_at=now, done=0)
    work = Path(tempfile.mkdtemp(prefix="fairtone-evaluation-"))
    try:
        return _evaluation_compute(run, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _evaluation_compute(run: EvaluationRun, work: Path) -> EvaluationRun:
    """The report written into the local folder ``work``, then stored under ``<run>/report/``."""
    prefix = evaluation_prefix(run)
    storage_delete_tree(f"{prefix}/report")
    out = work / "report"
    o = run.options
    with local_copy(f"{prefix}/joined.parquet") as joined:
        table = pq.read_table(joined).to_pandas()
    columns = list(table.columns)
    uncertainty = "min" in columns and "max" in columns
    labelers = sorted(c for c in columns if c.startswith(LABELER_PREFIX)) if uncertainty else []
    cluster, cluster_source = run_cluster(o, table, run.join.get("match_on"))
    options = ReportOptions(
        attributes=table,
        predictions=table,
        out=out,
        on=KEY,
        id_label=run.join.get("match_on") or "sample",
        cluster=cluster,
        cluster_source=cluster_source,
        error="error",
        skin_tone="final_value",
        gender=o.get("gender_column"),
        body_shape=o.get("body_shape_column"),
        threshold=o["threshold"],
        alpha=o["alpha"],
        cluster_error_threshold=o.get("cluster_error_threshold"),
        min_samples=o["min_samples"],
        min_cluster_size=o["min_cluster_size"],
        min_fraction=o["min_fraction"],
        progress=False,
        groups=list(o.get("groups") or []),
        n_bands=o["n_bands"],
        tone_bands=o.get("tone_bands"),
        permutations=o["permutations"],
        band_permutations=o["band_permutations"],
        tone_min="min" if uncertainty else None,
        tone_max="max" if uncertainty else None,
        uncertainty_draws=o["uncertainty_draws"],
        labeler_columns=labelers,
        seed=o["seed"],
        tone_levels=run.project.scale.tones.count(),
        figures=o.get("figures", True) is not False,  # runs stored before the option drew them
        on_step=lambda step: _job_step(run, _STEPS.get(step, 0), f"Computing: {step.replace('_', ' ')}"),
    )
    try:
        content = write_report(options)
    except ReportInputError as exc:
        evaluation_fail(run, "The report could not be computed: " + "; ".join(exc.problems))
        run.refresh_from_db()
        return run
    upload_tree(out, f"{prefix}/report")
    stored = _stored(content, run)
    finished = timezone.now()
    # Only a run still running: one given up meanwhile by the sweeper (its worker seemed lost) stays failed.
    stored_now = EvaluationRun.objects.filter(pk=run.pk, status=EvaluationRun.Status.RUNNING).update(
        status=EvaluationRun.Status.DONE, report=stored, finished_at=finished, error=""
    )
    if run.job_id and stored_now:
        Job.objects.filter(pk=run.job_id).update(
            status=Job.Status.DONE, done=6, message="Report ready.", finished_at=finished
        )
    run.refresh_from_db()
    return run


def run_cluster(options: dict, table: pd.DataFrame, match_on: str | None) -> tuple[str | None, str | None]:
    """The column the run clusters by, and why: by subject whenever subjects repeat, unless told otherwise.

    ``auto``: when samples are images (not matched per subject) and the release's ``subject_id`` repeats
    among them, photos of one person are resampled together; ``none``: independent samples; a column name:
    that column.
    """
    choice = options.get("cluster") or "auto"
    if choice == OFF:
        return None, None
    if choice != "auto":
        return choice, f"set by the run's options (cluster = {choice})"
    if match_on == "subject_id" or "subject_id" not in table.columns:
        return None, None
    subjects = table["subject_id"].dropna().astype(str)
    subjects = subjects[subjects.str.strip() != ""]
    if subjects.size and subjects.nunique() < subjects.size:
        return "subject_id", (
            f"automatic: {subjects.nunique()} subjects over {subjects.size} images, so photos of one person are "
            "resampled together"
        )
    return None, None


def _stored(content: dict, run: EvaluationRun) -> dict:
    """The report kept in the database: everything but the member lists (they stay in report.json)."""
    stored = json.loads(json.dumps(content))
    grid = (stored.get("intersectional") or {}).get("grid")
    for cell in (grid or {}).get("flagged", []):
        cell["members"] = len(cell.get("members", []))
    inter = (stored.get("intersectional") or {}).get("seed_000")
    if inter:
        inter["members"] = len(inter.get("members", []))
        for finding in inter.get("findings", []):
            finding["members"] = len(finding.get("members", []))
    stored["release_composition"] = (run.report or {}).get("release_composition")
    return stored


def worst_images(run: EvaluationRun, limit: int = WORST_IMAGES) -> list[dict]:
    """The highest-error images of each flagged region (leads and reviewers see them as thumbnails)."""
    name = evaluation_file_name(run, "report.json")
    if name is None:
        return []
    with default_storage.open(name, "rb") as handle:
        report = json.loads(handle.read().decode("utf-8"))
    cells = ((report.get("intersectional") or {}).get("grid") or {}).get("flagged") or []
    if not cells:
        return []
    with local_copy(f"{evaluation_prefix(run)}/joined.parquet") as path:
        joined = pd.read_parquet(path, columns=[KEY, "image_id", "error"])
    regions = []
    for cell in cells[:3]:
        inside = joined[KEY].isin(cell.get("members", []))
        top = joined.loc[inside].sort_values("error", ascending=False).head(limit)
        regions.append(
            {
                "description": cell["description"],
                "n": cell["n"],
                "images": [
                    {"key": str(getattr(row, KEY)), "image_id": int(row.image_id), "error": float(row.error)}
                    for row in top.itertuples(index=False)
                ],
            }
        )
    return regions
