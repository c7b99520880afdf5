"""Celery task that recomputes a phase's consensus summary in the background."""

from celery import shared_task
from django.core.cache import cache


@shared_task(acks_late=True, time_limit=600, soft_time_limit=570)
def consensus_refresh_task(phase_id: int) -> str:
    from .models import Phase
    from .services.consensus import _key, phase_summary_refresh

    try:
        phase = Phase.objects.select_related("project__scale").filter(pk=phase_id).first()
        if phase is None:
            return "missing"
        phase_summary_refresh(phase)
        return "refreshed"
    finally:
        cache.delete(_key("refreshing", phase_id, "any"))
