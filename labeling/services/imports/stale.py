"""Imports that a dead process left behind (issue 26).

An import runs inside its web request. A process that is killed while it imports (a worker timeout, out of
memory, a deploy) leaves its ``ImportBatch`` "running" for ever, the batch's derivatives job waiting on it,
and the upload's temporary file on disk (Django removes it only when the request ends). The job sweeper
(:func:`labeling.services.jobs.jobs_sweep`) calls :func:`imports_sweep`: a batch running for longer than
:data:`IMPORT_STALE_SECONDS` (no request lives that long: gunicorn's timeout is 120 s) is marked failed with
what it had imported, and temporary uploads older than that are removed. Each import request also removes
the old temporary uploads of its own machine first (a web node's temporary folder is not the worker's).
"""

from __future__ import annotations

import logging
import os
import time
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from ...models import ImportBatch, Job
from ..image_jobs import image_job_refresh

logger = logging.getLogger(__name__)

#: A batch still "running" after this long has lost its process.
IMPORT_STALE_SECONDS = 3600

STOPPED = (
    "Stopped: the process importing this batch ended before it finished ({n} file(s) imported before it "
    "stopped). Import the files again: those already in are skipped as duplicates."
)


def upload_temp_sweep(*, older_than: float = IMPORT_STALE_SECONDS) -> int:
    """Remove the temporary uploads (``FILE_UPLOAD_TEMP_DIR``) older than ``older_than`` seconds; how many."""
    folder = getattr(settings, "FILE_UPLOAD_TEMP_DIR", None)
    if not folder:
        return 0
    limit = time.time() - older_than
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        try:
            if entry.is_file(follow_symlinks=False) and entry.stat().st_mtime < limit:
                Path(entry.path).unlink()
                removed += 1
        except OSError:
            continue  # removed meanwhile, or not ours to remove
    if removed:
        logger.info("removed %s temporary upload(s) left by ended processes", removed)
    return removed


def imports_sweep(*, now=None) -> int:
    """Mark the imports a lost process left running as failed (and finish their derivatives jobs); how many."""
    now = now or timezone.now()
    stale = ImportBatch.objects.filter(
        status=ImportBatch.Status.RUNNING, created_at__lt=now - timedelta(seconds=IMPORT_STALE_SECONDS)
    )
    n = 0
    for batch in stale:
        updated = ImportBatch.objects.filter(pk=batch.pk, status=ImportBatch.Status.RUNNING).update(
            status=ImportBatch.Status.FAILED, error=STOPPED.format(n=batch.n_imported), finished_at=now
        )
        if not updated:
            continue
        n += 1
        logger.warning("import batch %s given up: its process ended before it finished", batch.pk)
        for job_id in Job.objects.filter(kind=Job.Kind.DERIVATIVES, parameters__import_batch=batch.pk).values_list(
            "id", flat=True
        ):
            image_job_refresh(job_id, force=True, alive=False)
    return n
