"""Embedded default: SQLite and in-process jobs unless the environment says otherwise."""

import os

from .base import *  # noqa: F403
from .base import env_bool

DEBUG = env_bool("DJANGO_DEBUG", True)

# Serve static files straight from the app folders in development (no collectstatic needed).
# https://whitenoise.readthedocs.io/en/stable/django.html#WHITENOISE_USE_FINDERS
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# Mail (password reset links) is printed on the console unless a backend is configured.
# https://docs.djangoproject.com/en/5.2/topics/email/#console-backend
EMAIL_BACKEND = os.environ.get("DJANGO_EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
