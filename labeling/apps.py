from django.apps import AppConfig


class LabelingConfig(AppConfig):
    name = "labeling"
    verbose_name = "FairTone labeling"
    default_auto_field = "django.db.models.BigAutoField"
