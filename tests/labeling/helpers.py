"""Shared set-up for phase and label tests: a project with images, a lead and labelers."""

import contextlib
import itertools
import uuid

from labeling.models import Phase
from labeling.services.phases import calibration_configure, phase_get, phase_open
from tests.factories import make_image

_colours = itertools.count()


def add_images(project, n: int, *, subjects: int | None = None):
    from labeling.models import Subject

    images = []
    for _ in range(n):
        i = next(_colours)
        subject = None
        if subjects:
            subject, _ = Subject.objects.get_or_create(project=project, external_id=f"S{len(images) % subjects}")
        images.append(make_image(project, colour=(i % 256, (i // 256) % 256, 77), subject=subject))
    return images


def open_calibration_1(project, *, size=6, cal1=6, repeated=0, labels_per_image=4) -> Phase:
    calibration_configure(project=project, size=size, calibration_1_size=cal1, n_repeated=repeated, seed=42)
    return phase_open(phase=phase_get(project, Phase.Kind.CALIBRATION_1), labels_per_image=labels_per_image)


def submit(phase, labeler, image_id, tones=(5,), **kwargs):
    from labeling.services.labels import label_submit

    kwargs.setdefault("client_id", uuid.uuid4())
    return label_submit(phase=phase, labeler=labeler, image_id=image_id, tones=list(tones), **kwargs)


def label_all(phase, labeler, tone=5):
    for a in phase.assignments.filter(labeler=labeler, done_at__isnull=True).order_by("position"):
        submit(phase, labeler, a.image_id, tones=[tone])


@contextlib.contextmanager
def eager(value: bool):
    """Celery runs tasks in this process (True) or sends them (False) inside the block, then exactly as before.

    Sets ``task_always_eager`` and its Django-namespaced twin ``CELERY_TASK_ALWAYS_EAGER`` (Celery 5.6 reads
    the namespaced key first, and reads it from the Django settings while no override is set, so setting
    only the short one did nothing); on leaving, the overrides this set are removed, not frozen.
    """
    from celery import current_app

    conf = current_app.conf
    keys = ("task_always_eager", "CELERY_TASK_ALWAYS_EAGER")
    saved = {key: conf.changes[key] for key in keys if key in conf.changes}
    for key in keys:
        conf[key] = value
    try:
        yield
    finally:
        for key in keys:
            if key in saved:
                conf.changes[key] = saved[key]
            else:
                conf.changes.pop(key, None)
