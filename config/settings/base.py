"""Settings shared by every environment.

Everything a deployment changes comes from environment variables (see
``.env.example``). Nothing here reads the database or the network at import time.
"""

import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


# https://docs.djangoproject.com/en/5.2/ref/settings/#secret-key
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "insecure-dev-key-change-me")
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "labeling",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Content-Security-Policy: only this app's own scripts and resources (labeling.middleware).
    "labeling.middleware.ContentSecurityPolicyMiddleware",
    # NUL (U+0000) in the path, a query parameter, a form field or a JSON string: 400 (labeling.middleware).
    "labeling.middleware.NulRefusedMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Who and from where for the audit log (labeling.services.audit): a context variable per request.
    "labeling.middleware.AuditContextMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # The database unreachable: 503 with Retry-After instead of 500.
    "labeling.middleware.DatabaseUnavailableMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# https://github.com/jazzband/dj-database-url
DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{BASE_DIR / 'var' / 'fairtone.sqlite3'}",
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "60")),
        # A pooled connection is checked before each request reuses it: after a PostgreSQL restart the first
        # request gets a new connection instead of a 503 from the stale one (issue 26).
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded default under concurrency (issue 23): with no options SQLite answers "database is locked" at
    # once to a second writer. Instead: a write transaction takes the write lock when it begins (BEGIN IMMEDIATE,
    # so two transactions that read and then write never deadlock each other), a writer waits up to 20 s for the
    # lock (the busy timeout), and WAL lets readers go on while one writes; synchronous=NORMAL is WAL's durable
    # setting (a power cut may lose the last commits, never corrupt the file).
    # https://docs.djangoproject.com/en/5.2/ref/databases/#sqlite-transaction-behavior
    # https://docs.djangoproject.com/en/5.2/ref/databases/#setting-pragma-options
    # https://www.sqlite.org/wal.html
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
        **DATABASES["default"].get("OPTIONS", {}),
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Password reset mails (and any other mail) go through Django's configured backend: SMTP from the
# environment in production, the console in local development and the demo (config.settings.local).
# https://docs.djangoproject.com/en/5.2/topics/email/#email-backends
EMAIL_BACKEND = os.environ.get("DJANGO_EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = os.environ.get("DJANGO_EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("DJANGO_EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("DJANGO_EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("DJANGO_EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("DJANGO_EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = 10
DEFAULT_FROM_EMAIL = os.environ.get("DJANGO_DEFAULT_FROM_EMAIL", "FairTone <fairtone@localhost>")
# A password reset link works for this long (Django's default is three days).
# https://docs.djangoproject.com/en/5.2/ref/settings/#password-reset-timeout
PASSWORD_RESET_TIMEOUT = 24 * 3600
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT", BASE_DIR / "staticfiles"))
STATICFILES_DIRS = [BASE_DIR / "static"]
# Files served at the site's root by WhiteNoise (favicon.ico: browsers ask for it on every page, the API too).
# https://whitenoise.readthedocs.io/en/stable/django.html#WHITENOISE_ROOT
WHITENOISE_ROOT = BASE_DIR / "public"
# Photos of people are sensitive: media files are never served publicly; the
# app streams them through views that check the requester's role.
MEDIA_ROOT = Path(os.environ.get("FAIRTONE_MEDIA_ROOT", BASE_DIR / "var" / "media"))
MEDIA_URL = "/media-not-public/"

# Media storage (issue 25). With FAIRTONE_S3_BUCKET set, photos, masks, overlays, releases and evaluation files
# live in that S3 (or S3-compatible: MinIO, Ceph, R2...) bucket, shared by every web node and worker; otherwise
# on the local disk under MEDIA_ROOT (the demo). The bucket is private: objects are written without a public ACL
# and never served from the bucket's URL; the app streams them through views that check the role first.
# https://django-storages.readthedocs.io/en/latest/backends/amazon-S3.html
S3_BUCKET = os.environ.get("FAIRTONE_S3_BUCKET", "")


def s3_storage_options(bucket: str, endpoint_url: str = "") -> dict:
    """The S3 backend's options: private objects, signed (query-string) URLs that expire in 5 minutes."""
    return {
        "bucket_name": bucket,
        "endpoint_url": endpoint_url or None,
        "region_name": os.environ.get("FAIRTONE_S3_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None,
        "access_key": os.environ.get("AWS_ACCESS_KEY_ID") or None,
        "secret_key": os.environ.get("AWS_SECRET_ACCESS_KEY") or None,
        "default_acl": "private",
        "querystring_auth": True,
        "querystring_expire": 300,
        "file_overwrite": False,
        "location": os.environ.get("FAIRTONE_S3_PREFIX", ""),
        # Parts of 8 MiB: an upload holds one part in memory, whatever the file's size.
        "max_memory_size": 8 * 1024 * 1024,
    }


if S3_BUCKET:
    DEFAULT_STORAGE = {
        "BACKEND": "labeling.services.media_files.MediaS3Storage",
        "OPTIONS": s3_storage_options(S3_BUCKET, os.environ.get("FAIRTONE_S3_ENDPOINT_URL", "")),
    }
else:
    DEFAULT_STORAGE = {"BACKEND": "django.core.files.storage.FileSystemStorage"}
STORAGES = {
    "default": DEFAULT_STORAGE,
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# Upload limits. https://docs.djangoproject.com/en/5.2/ref/settings/#data-upload-max-memory-size
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
# Larger uploads wait on disk here while their request runs. A folder of the app's own, so that what a killed
# process leaves behind can be found and removed (labeling.services.imports.upload_temp_sweep, issue 26). One per
# user account, readable by it alone: a shared /tmp/fairtone-uploads made by one account refused every other
# account's large uploads (a 500, found running bin/test as a second user on a machine where root had run it).
FILE_UPLOAD_TEMP_DIR = os.environ.get("FAIRTONE_UPLOAD_TEMP_DIR") or os.path.join(
    __import__("tempfile").gettempdir(), f"fairtone-uploads-{os.getuid()}"
)
os.makedirs(FILE_UPLOAD_TEMP_DIR, mode=0o700, exist_ok=True)
DATA_UPLOAD_MAX_NUMBER_FILES = 1000
FAIRTONE = {
    # A single image file larger than this is rejected.
    "MAX_IMAGE_BYTES": int(os.environ.get("FAIRTONE_MAX_IMAGE_BYTES", 60 * 1024 * 1024)),
    # Pixel limit per image (a 12 MP phone photo is 12e6); Pillow's own
    # decompression-bomb guard stays on as well.
    "MAX_IMAGE_PIXELS": int(os.environ.get("FAIRTONE_MAX_IMAGE_PIXELS", 80_000_000)),
    "MAX_ARCHIVE_BYTES": int(os.environ.get("FAIRTONE_MAX_ARCHIVE_BYTES", 4 * 1024**3)),
    "MAX_ARCHIVE_MEMBERS": int(os.environ.get("FAIRTONE_MAX_ARCHIVE_MEMBERS", 50_000)),
    "MAX_MANIFEST_ROWS": int(os.environ.get("FAIRTONE_MAX_MANIFEST_ROWS", 200_000)),
    # Server-side folders a manifest may name images in (comma-separated).
    "IMPORT_ROOTS": env_list("FAIRTONE_IMPORT_ROOTS"),
    "DISPLAY_MAX_SIDE": 2048,
    # With a real worker, a changed consensus dashboard is served from its last
    # computation while a task recomputes it (labeling.services.consensus.phase_summary).
    "CONSENSUS_BACKGROUND_REFRESH": env_bool("FAIRTONE_CONSENSUS_BACKGROUND_REFRESH", True),
    # ...and, with it, labels or baselines that change have the worker precompute the lead's pages
    # (consensus, test-retest, baseline comparison) this many seconds later, at most once per that
    # delay per project (labeling.services.precompute).
    "PRECOMPUTE_DELAY": float(os.environ.get("FAIRTONE_PRECOMPUTE_DELAY", "15")),
    "THUMBNAIL_MAX_SIDE": 320,
    # A running release build or evaluation beats at most every JOB_HEARTBEAT_SECONDS while it works; the
    # jobs sweeper fails it (retryable) once its heartbeat is older than JOB_STALE_MINUTES: its worker is
    # gone (labeling.services.heartbeat, labeling.services.jobs).
    "JOB_HEARTBEAT_SECONDS": float(os.environ.get("FAIRTONE_JOB_HEARTBEAT_SECONDS", "5")),
    "JOB_STALE_MINUTES": float(os.environ.get("FAIRTONE_JOB_STALE_MINUTES", "10")),
    # The labeling hot path's one statement is prepared once per database connection
    # (labeling.services.submit_fast). 0 behind a pooler in transaction mode that cannot keep prepared statements.
    "PREPARED_SUBMIT": os.environ.get("FAIRTONE_PREPARED_SUBMIT", "1") != "0",
    # The labeling hot path (services.submit_fast) in front of the general view; FAIRTONE_FAST_SUBMIT=0
    # sends every submit to the general view (the same answers, slower: bench/bench_soak.py).
    "FAST_SUBMIT": os.environ.get("FAIRTONE_FAST_SUBMIT", "1") != "0",
}

# https://www.django-rest-framework.org/api-guide/settings/
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "labeling.api.authentication.CachedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # DRF's, with ?page= checked: malformed 400, past the last 404 (labeling.api.pagination).
    "DEFAULT_PAGINATION_CLASS": "labeling.api.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        # DRF's OrderingFilter, with a 400 for a field it cannot sort by (labeling.api.filters).
        "labeling.api.filters.StrictOrderingFilter",
    ],
    # DRF's parsers; JSON nested too deeply is a 400 (labeling.api.parsers).
    "DEFAULT_PARSER_CLASSES": [
        "labeling.api.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # drf-spectacular's, with the error answers every view can give (labeling.api.schema).
    "DEFAULT_SCHEMA_CLASS": "labeling.api.schema.AutoSchema",
    "EXCEPTION_HANDLER": "labeling.api.errors.exception_handler",
    # DRF's OPTIONS answer, without the actions of a view that has no serializer (labeling.api.metadata).
    "DEFAULT_METADATA_CLASS": "labeling.api.metadata.Metadata",
    "DEFAULT_THROTTLE_RATES": {"login": "20/min"},
    # How many proxies in front of the app append to X-Forwarded-For: the client address is the entry the
    # outermost trusted one added. 0 (the default): REMOTE_ADDR only; a client's own header is never trusted.
    # https://www.django-rest-framework.org/api-guide/throttling/#how-clients-are-identified
    "NUM_PROXIES": int(os.environ.get("FAIRTONE_NUM_PROXIES", "0")),
}
# https://drf-spectacular.readthedocs.io/en/latest/settings.html
SPECTACULAR_SETTINGS = {
    "TITLE": "FairTone API",
    "DESCRIPTION": "Skin-tone labeling, consensus and fairness evaluation.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # labeling.converters: an id in a path is an integer of at most 18 digits.
    "PATH_CONVERTER_OVERRIDES": {"id": {"type": "integer", "minimum": 0, "maximum": 999_999_999_999_999_999}},
    # Served from this app's static files (drf-spectacular-sidecar): no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "labeling.api.schema.postprocess",
    ],
    # Several models have a "status" with their own choices; each gets its own named enum.
    "ENUM_NAME_OVERRIDES": {
        "JobStatusEnum": "labeling.models.jobs.Job.Status",
        "ReleaseStatusEnum": "labeling.models.releases.Release.Status",
        # A phase's as a lead and as a labeler sees it (labeling.api.views.common.phase_for_role).
        "PhaseKindEnum": "labeling.models.phases.Phase.Kind",
        "PhaseStatusEnum": "labeling.models.phases.Phase.Status",
    },
}

# Celery. With no broker configured, tasks run in-process (embedded default).
# https://docs.celeryq.dev/en/stable/userguide/configuration.html
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "")
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", "") or None
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = 600
CELERY_TASK_SOFT_TIME_LIMIT = 540
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Redis re-delivers a task no worker acknowledged within this time (acks_late: a task is acknowledged
# when it ends). It must exceed the longest hard time limit (a release: 4 h, labeling.tasks.TIME_LIMITS)
# or a long task would run twice at once; a job whose worker died is not left to it: the sweeper gives
# it up within its own limit (labeling.services.jobs). A test keeps the two in step.
# https://docs.celeryq.dev/en/stable/getting-started/backends-and-brokers/redis.html#visibility-timeout
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 4 * 3600 + 300}
# Celery beat (docker compose's "beat" service; ``celery worker -B`` in CI) runs the job sweeper.
# https://docs.celeryq.dev/en/stable/userguide/periodic-tasks.html
CELERY_BEAT_SCHEDULE = {
    "jobs-sweep": {"task": "labeling.tasks.jobs_sweep_task", "schedule": 60.0},
}

# Redis when configured; a Redis that is down or hangs is a cache miss, never an error (config.cache).
CACHES = {
    "default": (
        {
            "BACKEND": "config.cache.ResilientRedisCache",
            "LOCATION": os.environ["REDIS_CACHE_URL"],
            # https://redis-py.readthedocs.io/en/stable/connections.html#redis.Redis
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
        if os.environ.get("REDIS_CACHE_URL")
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

# Logs never carry image content, labels or personal profile fields.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.request": {"level": "ERROR"}},
}

SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
