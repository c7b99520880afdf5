"""Production: secrets and hosts must come from the environment."""

import os

from .base import *  # noqa: F403
from .base import DEFAULT_STORAGE, env_bool

DEBUG = False
SECRET_KEY = os.environ["DJANGO_SECRET_KEY"]
SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", True)
CSRF_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", True)
STORAGES = {
    "default": DEFAULT_STORAGE,
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
# HTTPS by default: `manage.py check --deploy` passes with nothing set. Plain HTTP (e.g. docker compose
# on localhost) has to be asked for: DJANGO_SECURE_SSL_REDIRECT=0 DJANGO_SECURE_HSTS_SECONDS=0
# DJANGO_SECURE_COOKIES=0 (see .env.example).
# https://docs.djangoproject.com/en/5.2/ref/settings/#secure-ssl-redirect
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
# Health probes come over plain HTTP from inside the network (compose, an orchestrator).
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
# https://docs.djangoproject.com/en/5.2/ref/middleware/#http-strict-transport-security
SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_SECURE_HSTS_SECONDS", str(365 * 24 * 3600)))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", False)
# Preloading is a commitment the domain's owner makes (https://hstspreload.org), not a default: without
# it `check --deploy` says so (security.W021), which is the one warning this decision silences.
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("DJANGO_BEHIND_PROXY", False) else None
