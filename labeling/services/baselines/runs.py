"""Baseline runs: a ``Job`` over a project's images, computed in batches by background tasks.

:func:`baseline_run_start` creates and enqueues the job; the task splits it
(:func:`baseline_run_prepare`), computes each batch (:func:`baseline_run_batch`)
and records a batch that ran out of time (:func:`baseline_run_batch_abandon`).
A new image gets its baseline from :func:`baseline_image_ensure`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from ...models import Image, ImageBaseline, Job, Project
from ..audit import audit
from .parameters import (
    BASELINE_CODE_VERSION,
    DEFAULT_PARAMETERS,
    baseline_parameters_effective,
    baseline_parameters_hash,
    baseline_parameters_validate,
)
from .progress import job_count, job_fail_missing, job_finish_if_complete
from .storage import baseline_compute, failed_defaults

#: Images per batch task. Measured with baseline_compute on this project's shared
#: 2-CPU machine (load average about 6): 0.10 s per image for the demo's 480 x 640
#: JPEGs (measurement 45 ms, overlay 26-47 ms, the rest storage and two small
#: transactions) and 0.22 s for a 12 MP (4000 x 3000) JPEG. Since session 35 the overlay
#: draws the measured selection instead of detecting again: 1.04-1.13x the measurement
#: alone, against 1.6-2.1x before (bench/bench_baseline_image.py), so these are upper bounds. A batch of 50 is then
#: about 11 s of 12 MP work: far below the 540 s soft time limit even on a slow
#: disk, little to repeat when a batch is retried, and a 10 000-image run is 200
#: tasks rather than 10 000.
BASELINE_BATCH_SIZE = 50
BASELINE_TASK_SOFT_TIME_LIMIT = 540
BASELINE_TASK_TIME_LIMIT = 600


def baseline_run_start(
    *,
    project: Project,
    parameters: dict[str, Any] | None = None,
    image_ids: Sequence[int] | None = None,
    user=None,
    retry_of: Job | None = None,
) -> Job:
    """Start a baseline run over the project's images (or some of them).

    Parameters given here become the project's baseline parameters (what the
    pages show); the job records the full set, its hash and the code version.
    The run is enqueued when the transaction commits.

    Parameters
    ----------
    project : Project
        The project.
    parameters : dict, optional
        Overrides (validated with :func:`baseline_parameters_validate`).
    image_ids : sequence of int, optional
        Only these images (they must belong to the project).
    user : User, optional
        Who started it.
    retry_of : Job, optional
        The run whose failed images this one retries (its parameters are reused).

    Returns
    -------
    Job
        Queued, with ``total`` set.

    Raises
    ------
    django.core.exceptions.ValidationError
        Bad parameters or image ids; the project is archived.

    Examples
    --------
    >>> job = baseline_run_start(project=project, parameters={"min_skin_fraction": 0.05})
    >>> str(job.kind), job.total  # one image in the project
    ('baseline', 1)
    """
    from .. import queue
    from ..project_lifecycle import project_refuse_if_archived

    project_refuse_if_archived(project.pk, "compute baselines")
    overrides = baseline_parameters_validate(parameters)
    with transaction.atomic():
        if retry_of is not None:
            effective = dict(retry_of.parameters["options"])
        else:
            effective = baseline_parameters_effective(project, overrides)
            if overrides:
                project.baseline_parameters = {k: v for k, v in effective.items() if DEFAULT_PARAMETERS.get(k) != v}
                project.save(update_fields=["baseline_parameters"])
        images = project.images.all()
        if image_ids is not None:
            ids = sorted({int(i) for i in image_ids})
            found = set(images.filter(id__in=ids).values_list("id", flat=True))
            if missing := [i for i in ids if i not in found]:
                raise ValidationError({"image_ids": f"Not images of this project: {missing[:10]}."})
            images = images.filter(id__in=ids)
        job_parameters: dict[str, Any] = {
            "options": effective,
            "parameters_hash": baseline_parameters_hash(effective),
            "code_version": BASELINE_CODE_VERSION,
            "batch_size": BASELINE_BATCH_SIZE,
        }
        if image_ids is not None:
            job_parameters["image_ids"] = ids
        if retry_of is not None:
            job_parameters["retry_of"] = retry_of.id
        job = Job.objects.create(
            project=project,
            kind=Job.Kind.BASELINE,
            parameters=job_parameters,
            total=images.count(),
            created_by=user if user is not None and user.is_authenticated else None,
        )
        queue.enqueue_on_commit(queue.BASELINE_RUN, job.id)
        audit(
            project,
            "baseline.run",
            job,
            user=user,
            n_images=job.total,
            parameters_hash=job_parameters["parameters_hash"],
            retry_of=retry_of and retry_of.id,
        )
    return job


def baseline_images_without_current(project: Project) -> list[int]:
    """Ids of the project's images with no result for its current parameters and code version.

    After the method changes (a new :data:`BASELINE_CODE_VERSION` or new default
    parameters: a new parameter set) every image is here until it is computed
    again; its older results are kept.
    """
    current = ImageBaseline.objects.filter(
        image__project=project,
        parameters_hash=baseline_parameters_hash(baseline_parameters_effective(project)),
        code_version=BASELINE_CODE_VERSION,
    ).values("image_id")
    return list(project.images.exclude(id__in=current).order_by("id").values_list("id", flat=True))


def baseline_run_outdated(*, project: Project, user=None) -> Job | None:
    """A run over the images without a current result (none after a method change), or None if there are none.

    What ``manage.py baselines_recompute`` starts for every project after an
    upgrade, and the baselines page's "compute the missing ones" button.
    """
    ids = baseline_images_without_current(project)
    if not ids:
        return None
    return baseline_run_start(project=project, image_ids=ids, user=user)


def baseline_retry_failed(*, job: Job, user=None) -> Job:
    """A new run over the images that failed in ``job``, with the same parameters.

    Raises
    ------
    django.core.exceptions.ValidationError
        Nothing failed in that run.
    """
    ids = list(
        ImageBaseline.objects.filter(
            job=job, status=ImageBaseline.Status.FAILED, image__project=job.project
        ).values_list("image_id", flat=True)
    )
    if not ids:
        raise ValidationError("No failed images to retry in this run.")
    return baseline_run_start(project=job.project, image_ids=ids, user=user, retry_of=job)


def baseline_run_prepare(*, job: Job) -> list[list[int]]:
    """Mark the run as running and split its images into batches.

    Returns
    -------
    list of list of int
        Image ids, :data:`BASELINE_BATCH_SIZE` per batch. Empty (and the job done)
        when the run has no images.
    """
    images = job.project.images.order_by("id")
    if "image_ids" in job.parameters:
        images = images.filter(id__in=job.parameters["image_ids"])
    ids = list(images.values_list("id", flat=True))
    Job.objects.filter(pk=job.pk, status=Job.Status.QUEUED).update(
        status=Job.Status.RUNNING, started_at=timezone.now(), total=len(ids)
    )
    job_finish_if_complete(job.pk)
    return [ids[i : i + BASELINE_BATCH_SIZE] for i in range(0, len(ids), BASELINE_BATCH_SIZE)]


def baseline_run_batch(*, job: Job, image_ids: Iterable[int], final_attempt: bool = True) -> None:
    """Compute one batch of a run (see :func:`baseline_compute`); safe to run twice."""
    parameters = job.parameters["options"]
    images = {i.id: i for i in Image.objects.filter(id__in=list(image_ids), project=job.project)}
    for image_id in image_ids:
        image = images.get(image_id)
        if image is None:  # deleted since the run started: count it, or the run never ends
            job_fail_missing(job, image_id, "image deleted during the run")
            continue
        baseline_compute(image=image, parameters=parameters, job=job, final_attempt=final_attempt)


def baseline_run_batch_abandon(*, job: Job, image_ids: Iterable[int], reason: str) -> None:
    """Record the images of a batch that got no result in ``job`` as failed (e.g. a time limit)."""
    parameters_hash = job.parameters["parameters_hash"]
    for image_id in image_ids:
        image = Image.objects.filter(id=image_id, project=job.project).first()
        if image is None:
            job_fail_missing(job, image_id, "image deleted during the run")
            continue
        done = ImageBaseline.objects.filter(
            image=image,
            parameters_hash=parameters_hash,
            code_version=BASELINE_CODE_VERSION,
            job=job,
        ).exists()
        if not done:
            with transaction.atomic():
                row, _ = ImageBaseline.objects.update_or_create(
                    image=image,
                    parameters_hash=parameters_hash,
                    code_version=BASELINE_CODE_VERSION,
                    defaults={**failed_defaults(reason), "job": job, "parameters": job.parameters["options"]},
                )
                job_count(job, image, row)


def baseline_image_ensure(*, image: Image, final_attempt: bool = True) -> ImageBaseline | None:
    """Compute the baseline of a new image for its project's current parameters, if missing.

    Returns
    -------
    ImageBaseline or None
        The new row, or None when one already existed.
    """
    parameters = baseline_parameters_effective(image.project)
    exists = ImageBaseline.objects.filter(
        image=image,
        parameters_hash=baseline_parameters_hash(parameters),
        code_version=BASELINE_CODE_VERSION,
    ).exists()
    if exists:
        return None
    return baseline_compute(image=image, parameters=parameters, final_attempt=final_attempt)
