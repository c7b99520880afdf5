from django.apps import AppConfig


class LabelingConfig(AppConfig):
    name = "labeling"
    verbose_name = "FairTone labeling"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import signals

        signals.connect()
        from . import tasks  # noqa: F401  (registers the Celery tasks)
        from .plots import card_plots
        from .services.releases.card import card_plots_register

        card_plots_register(card_plots)  # the data card's plots are drawn at the presentation floor
