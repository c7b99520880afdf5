"""WSGI entry point (gunicorn config.wsgi).

The heavy modules the lead's pages use are imported here, at start (``labeling.preload``): with gunicorn's
``--preload`` once in the master process, before the workers fork.
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
application = get_wsgi_application()

from labeling.preload import preload  # noqa: E402  (after Django is set up)

preload()
