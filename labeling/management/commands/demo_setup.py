from django.core.management.base import BaseCommand

from labeling.services.demo import DEMO_LABELERS, DEMO_PASSWORD, demo_finished_study_create, demo_project_create


class Command(BaseCommand):
    help = "Create the demo project (synthetic images), its lead and four labelers, if missing."

    def add_arguments(self, parser):
        parser.add_argument("--no-simulated-labels", action="store_true")

    def handle(self, *args, **options):
        project = demo_project_create(simulate_labels=not options["no_simulated_labels"])
        self.stdout.write(self.style.SUCCESS(f"Demo project #{project.pk}: {project.name}"))
        finished = demo_finished_study_create(lead=project.created_by)
        self.stdout.write(self.style.SUCCESS(f"Demo project #{finished.pk}: {finished.name}"))
        self.stdout.write(f"  lead:      lead / {DEMO_PASSWORD}")
        for username, _ in DEMO_LABELERS:
            self.stdout.write(f"  labeler:   {username} / {DEMO_PASSWORD}")
