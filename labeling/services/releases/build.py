"""Building a release: every file written into a temporary directory, then renamed into place and published.

:func:`release_write` writes the files of a release into a directory, deterministically (the same
database gives the same bytes: rows by image id, then label id; no clock but the release's own
``created_at``). :func:`release_build` is what the task runs: it writes into
``releases/<project>/<version>.tmp-<random>``, zips it, renames both into place and marks the release
published in one transaction. A worker killed midway leaves only a temporary directory (removed by
the next attempt) and a release still queued or running; a failing disk marks the release and its job
failed with the reason, and removes what was written; a cancelled release stops between chunks.
While it works the build beats (``services.heartbeat``: between chunks, images, stages and the files it
zips, written at most every few seconds), so that the jobs sweeper fails a dead worker's build within
``FAIRTONE["JOB_STALE_MINUTES"]``.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import secrets
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
from django.db import transaction
from django.utils import timezone

from ...models import Image, Job, Label, Membership, Release, ReleaseImage
from ..heartbeat import JobBeat
from ..media_files import STORAGE_FAILURES, upload_file
from .bundle import ImagefolderWriter, TableWriter, file_info, manifest_write, zip_write
from .card import card_render
from .card_facts import card_facts, card_project_facts
from .croissant import EXCLUDED_SPLIT, croissant_write, imagefolder_readme_write
from .diff import ImageRow, release_image_rows, rows_diff
from .finalise import context_load, release_chunks
from .memory import build_memory, memory_release
from .rules import CATEGORIES, rule_stored
from .storage import (
    TMP_MARK,
    leftovers_remove,
    project_releases_dir,
    project_releases_prefix,
    release_dir,
    release_files_remove,
    release_prefix,
    remove_quietly,
    storage_local,
    work_dir,
    zip_top,
)
from .tables import (
    LABELERS_SCHEMA,
    LABELS_SCHEMA,
    LabelerTally,
    attribute_columns,
    image_table,
    images_schema,
    label_table,
)

logger = logging.getLogger(__name__)

#: Version of the release's layout and rules (recorded on each release with the libraries that write its bytes).
RELEASE_FORMAT_VERSION = "fairtone-release.1"
#: The build task's limits in seconds (hard, soft). Measured here (2 CPUs, SQLite): 20,000 images x 4 labels
#: build in 13 s without images (data card included), so the tables of 100,000 images take about a minute;
#: copying the photos (``with_images``) is bounded by the disk and was not measured at that size: the
#: limits leave hours for it. A build that hits them is marked failed and leaves nothing published.
RELEASE_TASK_TIME_LIMIT = 4 * 3600
RELEASE_TASK_SOFT_TIME_LIMIT = RELEASE_TASK_TIME_LIMIT - 120
RELEASE_BULK_SIZE = 2000
#: The columns of ``images.parquet`` that make a :class:`ReleaseImage` row, in ``diff.ImageRow`` order.
RELEASE_IMAGE_COLUMNS = ("image_id", "external_id", "final_value", "final_tone", "excluded_reason")


class Cancelled(Exception):
    """The release was cancelled while it was being built."""


def code_version() -> str:
    """What wrote the release: its format version and the libraries whose versions change its bytes."""
    import pyarrow

    from ..baselines import BASELINE_CODE_VERSION

    return f"{RELEASE_FORMAT_VERSION}; baselines {BASELINE_CODE_VERSION}; pyarrow {pyarrow.__version__}"


# --------------------------------------------------------------------------- the files


def _original_bytes(image_ids: list[int]) -> dict[int, bytes]:
    storage = Image._meta.get_field("original").storage
    names = dict(Image.objects.filter(id__in=image_ids).values_list("id", "original"))
    out = {}
    for image_id in image_ids:
        with storage.open(names[image_id], "rb") as handle:
            out[image_id] = handle.read()
    return out


def release_info(release: Release, summary: dict[str, Any]) -> dict[str, Any]:
    """The release's description in ``manifest.json`` (and on the data card)."""
    project = release.project
    return {
        "project": project.name,
        "project_id": project.pk,
        "version": release.version,
        "previous_version": release.previous.version if release.previous_id else None,
        "rule": release.rule,
        "code_version": release.code_version,
        "created_at": release.created_at.isoformat(),
        "scale": {
            "name": project.scale.name,
            "tones": [{"position": t.position, "code": t.code, "name": t.name} for t in project.scale.tones.all()],
        },
        "final_value": "tone position, 1 = lightest; two adjacent tones count as their midpoint",
        "counts": summary,
    }


def release_write(
    release: Release,
    out_dir: Path,
    *,
    on_chunk: Callable[[int], None] | None = None,
    beat: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Write every file of ``release`` into ``out_dir`` (which must not exist yet).

    ``on_chunk(images_done)`` is called after each chunk of images (progress; it may raise to stop);
    ``beat()`` between the stages and the images copied (a sign of life; cheap to call often).

    Returns
    -------
    dict
        ``files`` (relative path -> sha256, bytes, rows; ``manifest.json`` included), ``summary`` and
        ``release_info``. The rows of :class:`ReleaseImage` are read back from ``images.parquet``
        (:func:`release_image_batches`): nothing per image is held while the files are written.
    """
    project = release.project
    rule = rule_stored(release.rule)  # a rule stored before a category existed: its default
    beat = beat or (lambda: None)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True)
    context = context_load(project, rule)
    beat()
    attributes = attribute_columns(project)
    schema = images_schema(attributes)
    tone_names = {t.position: t.name for t in project.scale.tones.all()}
    project_order = [t.position for t in project.ordered_tones()]
    pseudonyms = dict(Membership.objects.filter(project=project).values_list("id", "pseudonym"))
    tally = LabelerTally()
    excluded_counts = dict.fromkeys(CATEGORIES, 0)
    lead_reasons: Counter[str] = Counter()  # the leads' own reasons of the images excluded_by_lead
    tone_counts: dict[int, int] = {}
    n_images = n_excluded = n_counted = done = 0
    files: dict[str, dict] = {}
    # The card's sections from the project's rows first: their working memory is then reused by the tables'.
    phases = list(project.phases.order_by("id"))
    project_facts = card_project_facts(project, phases)
    beat()
    folder = ImagefolderWriter(out_dir / "imagefolder") if rule.get("with_images") else None
    # Excluded images go to their own split (imagefolder/excluded/, opened at the first one): the default
    # split, "test", is the evaluation set as it is, with nothing to filter out.
    excluded_folder: ImagefolderWriter | None = None
    try:
        with (
            TableWriter(out_dir, "images", schema) as image_writer,
            TableWriter(out_dir, "labels", LABELS_SCHEMA) as label_writer,
            # Closed here, not when the garbage collector finds it: a build cancelled or failed mid-stream
            # leaves the stream in the exception's reference cycle, and its server-side cursor (PostgreSQL)
            # closed later, in another transaction, would abort that one ("cursor does not exist").
            contextlib.closing(release_chunks(project, rule, context=context, details=True)) as chunks,
        ):
            for chunk in chunks:
                table, reasons = image_table(chunk, context, schema, attributes, tone_names)
                image_writer.write(table)
                label_writer.write(label_table(chunk, context, pseudonyms, tone_names, project_order))
                tally.add(chunk)
                excluded = np.array([bool(reason) for reason in reasons], dtype=bool)
                n_excluded += int(excluded.sum())
                for name in CATEGORIES:
                    if not rule["include"][name]:
                        excluded_counts[name] += int(chunk.categories[name].sum())
                if not rule["include"]["excluded_by_lead"]:
                    lead_reasons.update(chunk.lead_reasons.values())
                tones = chunk.final["final_tone"]
                for tone, n in zip(*np.unique(tones[~excluded & (tones >= 0)], return_counts=True), strict=True):
                    tone_counts[int(tone)] = tone_counts.get(int(tone), 0) + int(n)
                if folder is not None:
                    originals = _original_bytes(chunk.image_ids.tolist())
                    for row, left_out in zip(table.to_pylist(), excluded.tolist(), strict=True):
                        target = folder
                        if left_out:
                            if excluded_folder is None:
                                excluded_folder = ImagefolderWriter(
                                    out_dir / "imagefolder" / EXCLUDED_SPLIT, prefix=f"imagefolder/{EXCLUDED_SPLIT}"
                                )
                            target = excluded_folder
                        target.add(str(row["image_id"]), originals[row["image_id"]], row)
                        beat()
                n_images += len(chunk.images)
                n_counted += int(chunk.counted.sum())
                done += len(chunk.images)
                if on_chunk is not None:
                    on_chunk(done)
            # The last chunk's rows and tables (about 7 MB at 2,000 images) are not kept through the later stages.
            chunk = table = reasons = excluded = tones = originals = None
            files.update(image_writer.close())
            files.update(label_writer.close())
        memory_release()
        beat()
        if folder is not None:
            files.update(folder.close())
            if excluded_folder is not None:
                files.update(excluded_folder.close())
            beat()
    except BaseException:
        if folder is not None:
            folder.abort()
        if excluded_folder is not None:
            excluded_folder.abort()
        raise
    labelers = tally.table(project, pseudonyms)
    del tally
    memory_release()
    beat()
    with TableWriter(out_dir, "labelers", LABELERS_SCHEMA) as labeler_writer:
        labeler_writer.write(labelers)
        files.update(labeler_writer.close())
    summary = {
        "images": n_images,
        "included": n_images - n_excluded,
        "excluded": n_excluded,
        "excluded_by_reason": excluded_counts,
        "labels": files["labels.csv"]["rows"],
        "counted_labels": n_counted,
        "labelers": labelers.num_rows,
    }
    info = release_info(release, summary)
    previous_diff = None
    if release.previous_id:
        images = {row[0]: row for rows in release_image_batches(out_dir) for row in rows}
        previous_diff = {
            "from": release.previous.version,
            "to": release.version,
            **rows_diff(release_image_rows(release.previous), images),
        }
        del images
        beat()
    facts = card_facts(
        project=project,
        phases=phases,
        final={
            "tone_counts": dict(sorted(tone_counts.items())),
            "n_images": n_images,
            "n_included": n_images - n_excluded,
            "aggregation": rule["aggregation"],
        },
        exclusions={name: n for name, n in excluded_counts.items() if n},
        lead_reasons=dict(lead_reasons),
        rule=rule,
        card_text=release.card_text,
        previous_diff=previous_diff,
        release_info=info,
        project_facts=project_facts,
    )
    beat()
    for relative, data in sorted(card_render(facts).items()):
        path = out_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        files[relative] = file_info(path)
    if folder is not None:
        files.update(imagefolder_readme_write(out_dir, facts, files, summary))
    # Last but the manifest: it lists the checksum of every file above (and the manifest lists its own).
    schemas = {"images": schema, "labels": LABELS_SCHEMA, "labelers": LABELERS_SCHEMA}
    files.update(croissant_write(out_dir, facts, files, schemas, summary, labelers))
    beat()
    files = dict(sorted(files.items()))
    files["manifest.json"] = manifest_write(out_dir, info, files)
    return {"files": files, "summary": summary, "release_info": info}


def release_image_batches(out_dir: Path, batch_size: int = RELEASE_BULK_SIZE) -> Iterator[list[ImageRow]]:
    """The rows of :class:`ReleaseImage` (as in ``diff``) from the written ``images.parquet``, a batch at a time."""
    parquet = pq.ParquetFile(Path(out_dir) / "images.parquet")
    try:
        for batch in parquet.iter_batches(batch_size=batch_size, columns=list(RELEASE_IMAGE_COLUMNS)):
            yield list(zip(*(batch.column(name).to_pylist() for name in RELEASE_IMAGE_COLUMNS), strict=True))
    finally:
        parquet.close()


# --------------------------------------------------------------------------- the build


def _job_update(release: Release, **fields) -> None:
    if release.job_id:
        Job.objects.filter(pk=release.job_id).update(**fields)


def _fail(release: Release, message: str) -> None:
    """Mark a release that is not published failed, with its job (never touches a published release)."""
    now = timezone.now()
    Release.objects.filter(pk=release.pk).exclude(status=Release.Status.PUBLISHED).update(
        status=Release.Status.FAILED, error=message
    )
    _job_update(release, status=Job.Status.FAILED, message=message, finished_at=now)
    release.status, release.error = Release.Status.FAILED, message


def release_fail(release: Release, message: str) -> None:
    """Mark ``release`` failed (it was not published) with ``message``; its files, if any, are removed."""
    _fail(release, message)
    for entry in _own_leftovers(release):
        remove_quietly(entry)
    if not storage_local():  # what an attempt uploaded before it died (never published, so never served)
        release_files_remove(release, f"{zip_top(release.project, release.version)}.zip")


def _own_leftovers(release: Release) -> list[Path]:
    if not storage_local():
        return []
    directory = project_releases_dir(release.project_id)
    if not directory.is_dir():
        return []
    return [e for e in directory.iterdir() if e.name.startswith(f"{release.version}{TMP_MARK}")]


def _upload(release: Release, tmp: Path, tmp_zip: Path, zip_name: str, beat: Callable[[], None]) -> None:
    """Put the files written locally into the bucket under the release's final names (one file at a time, each
    streamed in parts): the release is not published yet, so none of them is served before the commit."""
    for path in sorted(p for p in tmp.rglob("*") if p.is_file()):
        upload_file(path, f"{release_prefix(release)}/{path.relative_to(tmp).as_posix()}")
        beat()
    upload_file(tmp_zip, f"{project_releases_prefix(release.project_id)}/{zip_name}")


def _publish(release: Release, tmp: Path, tmp_zip: Path, result: dict, zip_info: dict, zip_name: str) -> None:
    local = storage_local()
    final_dir = release_dir(release) if local else None
    final_zip = project_releases_dir(release.project_id) / zip_name if local else None
    with transaction.atomic():
        locked = Release.objects.select_for_update().get(pk=release.pk)
        if locked.status not in Release.ACTIVE:
            raise Cancelled()
        ReleaseImage.objects.filter(release=locked).delete()
        # A batch at a time: bulk_create makes a list of whatever it is given (250,000 instances: 300 MB).
        for rows in release_image_batches(tmp):
            ReleaseImage.objects.bulk_create(
                [
                    ReleaseImage(
                        release=locked,
                        image_id=image_id,
                        external_id=external_id,
                        final_value=value,
                        final_tone=tone,
                        excluded_reason=reason,
                    )
                    for image_id, external_id, value, tone, reason in rows
                ]
            )
        locked.manifest = {
            "release": result["release_info"],
            "files": result["files"],
            "zip": {"name": zip_name, **zip_info},
        }
        locked.summary = result["summary"]
        locked.status = Release.Status.PUBLISHED
        locked.published_at = timezone.now()
        locked.error = ""
        locked.save()
        _job_update(locked, status=Job.Status.DONE, done=result["summary"]["images"], finished_at=locked.published_at)
        if final_dir is None or final_zip is None:
            return  # uploaded before (``_upload``): the commit publishes them
        # Last, so that a failure before leaves nothing in place; the commit follows at once.
        os.replace(tmp, final_dir)
        try:
            os.replace(tmp_zip, final_zip)
        except BaseException:
            os.replace(final_dir, tmp)
            raise


def _remove_unpublished(release: Release, tmp: Path, tmp_zip: Path, top: str) -> None:
    """Remove what this attempt wrote; its files in place too if the publishing transaction did not commit."""
    remove_quietly(tmp)
    remove_quietly(tmp_zip)
    status = Release.objects.filter(pk=release.pk).values_list("status", flat=True).first()
    if status != Release.Status.PUBLISHED:
        release_files_remove(release, f"{top}.zip")


def release_build(release: Release, *, final_attempt: bool = True) -> Release:
    """Build and publish ``release`` (queued or running); safe to run again after a crash or a retry.

    ``final_attempt``: a storage error (``OSError``) marks the release failed ("Could not write the
    release files: <reason>"); otherwise it is raised for the task to retry (the next attempt starts
    again from scratch). Anything written is removed either way.

    Returns
    -------
    Release
        Published, failed or cancelled (or unchanged if it was not queued or running).
    """
    release = Release.objects.select_related("project__scale", "previous", "job").get(pk=release.pk)
    if release.status not in Release.ACTIVE:
        return release
    if release.project.is_archived:
        # Archived after the request: an archived project is read-only, so nothing is published into it.
        _fail(release, "The project was archived before this release was built: unarchive it to make the release.")
        return release
    n_images = release.project.images.count()
    Release.objects.filter(pk=release.pk, status=Release.Status.QUEUED).update(status=Release.Status.RUNNING)
    now = timezone.now()
    _job_update(release, status=Job.Status.RUNNING, started_at=now, heartbeat_at=now, total=n_images, done=0)
    beat = JobBeat(release.job_id)
    inactive = set(
        release.project.releases.filter(status__in=[Release.Status.FAILED, Release.Status.CANCELLED]).values_list(
            "version", flat=True
        )
    )
    token = secrets.token_hex(8)
    directory = work_dir(release.project_id)
    tmp = directory / f"{release.version}{TMP_MARK}{token}"
    tmp_zip = directory / f"{release.version}{TMP_MARK}{token}.zip"
    top = zip_top(release.project, release.version)

    def progress(done: int) -> None:
        beat(done=done)  # the progress is a heartbeat too
        status = Release.objects.filter(pk=release.pk).values_list("status", flat=True).first()
        if status not in Release.ACTIVE:
            raise Cancelled()

    try:
        built = _build(release, final_attempt, beat, inactive, tmp, tmp_zip, top, progress)
    finally:
        if not storage_local():  # the worker's temporary working folder (its files are in the bucket or gone)
            remove_quietly(directory)
    if built.status != Release.Status.PUBLISHED:
        # A build stopped mid-stream (cancelled, failed) can leave a stream in a reference cycle: collected
        # now, its server-side cursor (PostgreSQL) is closed in the transaction that opened it, not later in
        # another one, which the failed close would abort ("cursor does not exist"; seen in CI once builds
        # under SMALL_BUILD_LABELS stopped collecting between their stages).
        gc.collect()
    return built


def _build(release, final_attempt, beat, inactive, tmp, tmp_zip, top, progress) -> Release:  # noqa: ANN001
    try:
        leftovers_remove(release.project_id, release.version, inactive)
        # An earlier attempt that died between the rename (or the upload) and the commit: not published, so not
        # visible.
        release_files_remove(release, f"{top}.zip")
        beat()
        with build_memory(Label.objects.filter(phase__project_id=release.project_id).count()):
            result = release_write(release, tmp, on_chunk=progress, beat=beat)
            zip_info = zip_write(tmp, tmp_zip, top=top, beat=beat)
            beat()
            if not storage_local():
                _upload(release, tmp, tmp_zip, f"{top}.zip", beat)
            _publish(release, tmp, tmp_zip, result, zip_info, f"{top}.zip")
    except Cancelled:
        _remove_unpublished(release, tmp, tmp_zip, top)
        release.refresh_from_db()
        return release
    except STORAGE_FAILURES as exc:
        _remove_unpublished(release, tmp, tmp_zip, top)
        if not final_attempt:
            raise
        logger.warning("release %s failed: %s", release.pk, exc)
        _fail(release, f"Could not write the release files: {getattr(exc, 'strerror', None) or exc}")
        return release
    except BaseException as exc:
        _remove_unpublished(release, tmp, tmp_zip, top)
        _fail(release, f"The release could not be built: {type(exc).__name__}: {exc}")
        raise
    release.refresh_from_db()
    return release
