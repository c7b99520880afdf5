"""Issue 14, "Demo and README": ``bin/demo`` installs into a virtual environment under ``var/`` (never into
the interpreter first on PATH), runs with DEBUG off, and the app serves its own favicon.

The demo's environment (the local settings, ``DJANGO_DEBUG`` as ``bin/demo`` sets it) is run in a
subprocess: a wrong URL answers with the app's "Not found" page, not Django's technical 404 that lists
every URL pattern, and ``/favicon.ico`` is a local file.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = (ROOT / "bin" / "demo").read_text()

PROBE = """
import django
django.setup()
from django.conf import settings
from django.test import Client
client = Client()
missing = client.get("/no-such-page/")
icon = client.get("/favicon.ico")
print(settings.DEBUG, missing.status_code, b"Back to FairTone" in missing.content, b"URLconf" in missing.content)
print(icon.status_code, icon.get("Content-Type"))
"""


def demo_environment() -> dict[str, str]:
    """The environment ``bin/demo`` gives manage.py (its DJANGO_* defaults, local settings)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings.local"
    for name, default in re.findall(r"export (DJANGO_[A-Z_]+)=\$\{DJANGO_[A-Z_]+:-([^}]*)\}", DEMO):
        env.setdefault(name, default.replace("$PWD", str(ROOT)))
    return env


def test_the_demo_installs_into_a_virtual_environment_under_var():
    assert '"$PYTHON" -m venv "$VENV"' in DEMO and "VENV=var/venv" in DEMO
    installs = [line for line in DEMO.splitlines() if "pip install" in line]
    assert installs and all(line.strip().startswith('"$VENV_PYTHON" -m pip') for line in installs)
    assert 'exec "$VENV_PYTHON" manage.py runserver' in DEMO


def test_the_demo_runs_with_debug_off_and_shows_the_apps_404_page_and_favicon():
    env = demo_environment()
    assert env["DJANGO_DEBUG"] == "0"
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    page, icon = result.stdout.split("\n")[-3:-1]
    assert page == "False 404 True False"  # DEBUG off, the app's page, no URL patterns shown
    assert icon == "200 image/x-icon" or icon == "200 image/vnd.microsoft.icon"


def test_every_page_links_a_local_favicon(client):
    page = client.get("/login/").content.decode()
    href = re.search(r'<link rel="icon" href="([^"]+)"', page).group(1)
    assert href.startswith("/static/")
    assert client.get(href).status_code == 200
