from django.core.management.base import BaseCommand, CommandError

from labeling.models import Project
from labeling.services.baselines import BASELINE_CODE_VERSION, baseline_run_outdated


class Command(BaseCommand):
    help = (
        "Start a baseline run over every image without a result for its project's current method and "
        "parameters (run it after an upgrade that changed the colorimetric baseline; older results are kept)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--project", type=int, action="append", help="only this project id (repeatable)")

    def handle(self, *args, **options):
        projects = Project.objects.order_by("id")
        if options["project"]:
            projects = projects.filter(id__in=options["project"])
            if projects.count() != len(set(options["project"])):
                raise CommandError("Unknown project id.")
        started = 0
        for project in projects:
            if project.is_archived:
                # Read-only until a lead unarchives it (then run this again, or use the baselines page).
                self.stdout.write(f"project {project.pk}: archived, skipped")
                continue
            job = baseline_run_outdated(project=project)
            if job is not None:
                started += 1
                self.stdout.write(f"project {project.pk}: run {job.pk} over {job.total} images")
        self.stdout.write(self.style.SUCCESS(f"{started} run(s) started for code version {BASELINE_CODE_VERSION}"))
