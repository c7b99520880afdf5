"""Issue 13, item 10: ``manage.py check --deploy`` passes on the production settings with the shipped
``.env.example`` (only its placeholder secret replaced), so HTTPS, HSTS and secure cookies are the default."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def env_example() -> dict[str, str]:
    values = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


@pytest.mark.slow  # runs the deploy check in a process of its own: CI runs it, bin/test --fast skips it
def test_check_deploy_passes_with_the_shipped_env_example():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_", "CELERY_", "REDIS_"))}
    env.update(env_example())
    assert env["DJANGO_SETTINGS_MODULE"] == "config.settings.production"
    env["DJANGO_SECRET_KEY"] = secrets.token_urlsafe(50)  # the one value .env.example says to replace
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
