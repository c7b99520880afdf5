"""Celery tasks. Each takes ids, loads rows, calls a service, and is safe to run twice.

Enqueue them with ``transaction.on_commit`` (see ``enqueue_on_commit``), never
inside an open transaction: the worker could otherwise look for rows that are
not committed yet.
"""

import logging

from celery import shared_task
from django.db import transaction

logger = logging.getLogger(__name__)


def enqueue_on_commit(task, *args) -> None:
    """Send ``task`` once the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: task.delay(*args))


@shared_task(
    bind=True,
    acks_late=True,
    autoretry_for=(OSError,),
    retry_backoff=True,
    max_retries=3,
    time_limit=300,
    soft_time_limit=280,
)
def image_make_derivatives_task(self, image_id: int) -> str:
    from .models import Image
    from .services.images import image_make_derivatives

    image = Image.objects.filter(pk=image_id).first()
    if image is None:
        return "missing"
    image_make_derivatives(image=image)
    return image.derivative_status
