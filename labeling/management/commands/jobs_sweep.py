"""``manage.py jobs_sweep``: one pass of the job sweeper (what Celery beat runs every minute), e.g. from cron."""

from django.core.management.base import BaseCommand

from labeling.services.jobs import jobs_sweep


class Command(BaseCommand):
    help = "Send tasks stored during a broker outage; re-send or give up jobs that nothing works on."

    def handle(self, *args, **options):
        report = jobs_sweep()
        self.stdout.write(
            f"sent {report['pending_sent']} stored task(s), re-sent {report['resent']} job(s), "
            f"gave up {report['abandoned']} job(s)"
        )
