from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from labeling.errors import error_text
from labeling.models import Scale
from labeling.services.projects import project_create
from labeling.services.releases import release_import


class Command(BaseCommand):
    help = (
        "Import a release zip (made with its images) into a new project: its images, subjects, labelers "
        "(by pseudonym, on accounts that cannot sign in) and labels. Nothing is kept if anything is wrong."
    )

    def add_arguments(self, parser):
        parser.add_argument("zip", help="the release's zip file")
        parser.add_argument("--name", required=True, help="the new project's name")
        parser.add_argument("--lead", required=True, help="username of the new project's lead")
        parser.add_argument("--scale", default="", help="the scale's name (default: the built-in Monk scale)")

    def handle(self, *args, **options):
        lead = get_user_model().objects.filter(username=options["lead"]).first()
        if lead is None:
            raise CommandError(f"No user {options['lead']!r}.")
        scale = None
        if options["scale"]:
            scale = Scale.objects.filter(name=options["scale"]).first()
            if scale is None:
                raise CommandError(f"No scale {options['scale']!r}.")
        try:
            with open(options["zip"], "rb") as handle, transaction.atomic():  # no project without its data
                project = project_create(name=options["name"], created_by=lead, **({"scale": scale} if scale else {}))
                result = release_import(project=project, fileobj=handle, user=lead)
        except OSError as exc:
            raise CommandError(f"Cannot read {options['zip']}: {exc.strerror}.") from None
        except ValidationError as exc:
            raise CommandError(error_text(exc)) from None
        phases = ", ".join(f"{kind} {n}" for kind, n in result["phases"].items())
        self.stdout.write(
            self.style.SUCCESS(
                f"Project #{project.pk} {project.name}: {result['images']} images, {result['labelers']} labelers, "
                f"{result['labels']} labels ({phases})."
            )
        )
