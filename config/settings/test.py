"""Settings for the test suite. DATABASE_URL / CELERY_BROKER_URL switch to real services."""

import os
import tempfile

from .base import *  # noqa: F403
from .base import FAIRTONE

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
MEDIA_ROOT = os.environ.get("FAIRTONE_MEDIA_ROOT") or tempfile.mkdtemp(prefix="fairtone-test-media-")
FAIRTONE["IMPORT_ROOTS"] = [str(MEDIA_ROOT)]
# Tests see the numbers of the labels they just made (the stale-while-revalidate path has its own test).
FAIRTONE["CONSENSUS_BACKGROUND_REFRESH"] = False
STATIC_ROOT = tempfile.mkdtemp(prefix="fairtone-test-static-")
# https://whitenoise.readthedocs.io/en/stable/django.html#WHITENOISE_USE_FINDERS
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
