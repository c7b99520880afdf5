"""The Celery application.

With ``CELERY_BROKER_URL`` unset (the embedded default) tasks run in-process
(``task_always_eager``); with it set (Redis), a real worker runs them:
``celery -A config worker``.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("fairtone")
# https://docs.celeryq.dev/en/stable/django/first-steps-with-django.html
app.config_from_object("django.conf:settings", namespace="CELERY")
# Imports each installed app's ``tasks`` module when the worker starts (lazily: on
# Celery's import_modules signal). The web process imports ``labeling.tasks`` in
# ``LabelingConfig.ready`` instead, so the services can send tasks by name there too.
app.autodiscover_tasks()
