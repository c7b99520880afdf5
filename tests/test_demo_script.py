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

import pytest

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
    assert '"$VENV_PYTHON" manage.py runserver "$HOST:$PORT" --noreload >>"$LOG" 2>&1 &' in DEMO


@pytest.mark.slow  # runs bin/demo in a process of its own: CI runs it, bin/test --fast skips it
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


#: Stands in for the virtual environment's Python in ``bin/demo``: migrate and demo_setup log like the real
#: ones (200 lines of background work), runserver logs and answers HTTP a second later, and ``-`` runs the
#: script's readiness probe.
FAKE_PYTHON = r"""
import http.server, sys, time
args = sys.argv[1:]
if args[:2] == ["manage.py", "migrate"]:
    sys.exit(0)
if args[:2] == ["manage.py", "demo_setup"]:
    for i in range(200):
        print(f"2026-01-01 INFO labeling.tasks derivatives of image {i} done", file=sys.stderr)
    print("Demo project #1: Demo")
    sys.exit(0)
if args[:2] == ["manage.py", "runserver"]:
    host, port = args[2].rsplit(":", 1)
    print("Starting development server", file=sys.stderr, flush=True)
    time.sleep(1.0)  # the URL must wait for the server to answer
    http.server.HTTPServer((host, int(port)), http.server.BaseHTTPRequestHandler).serve_forever()
if args[:1] == ["-"]:
    sys.argv = args
    exec(sys.stdin.read())
    sys.exit(0)
sys.exit(f"unexpected: {args}")
"""


@pytest.mark.slow  # runs bin/demo in a process of its own: CI runs it, bin/test --fast skips it
def test_the_demo_prints_the_url_and_the_sign_ins_last_and_its_logs_to_a_file(tmp_path):
    import signal
    import socket
    import time

    fake = tmp_path / "fake_python.py"
    fake.write_text(FAKE_PYTHON)
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {fake} "$@"\n')
    wrapper.chmod(0o755)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "demo.log"
    env = {**os.environ, "DEMO_PYTHON": str(wrapper), "DEMO_LOG": str(log), "PORT": str(port)}
    process = subprocess.Popen(
        ["bash", str(ROOT / "bin" / "demo")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
            if "Stop with Ctrl+C." in line:
                break
        # When the URL is printed, the server answers.
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)
    text = "\n".join(lines)
    assert lines and "Stop with Ctrl+C." in lines[-1], text
    assert "INFO" not in text and "derivatives" not in text  # no log line on the screen
    url = next(i for i, line in enumerate(lines) if line.startswith("FairTone is running at"))
    assert lines[url] == f"FairTone is running at http://127.0.0.1:{port}/"
    assert "lead / fairtone-demo" in lines[url + 1] and "labeler1" in lines[url + 1]
    assert len(lines) - url <= 6  # the URL and the sign-ins close the output
    logged = log.read_text()
    assert logged.count("derivatives of image") == 200 and "Starting development server" in logged
