"""The web process imports the heavy modules at start (issue 24), so no lead's first visit pays for them."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from labeling.preload import MODULES

ROOT = Path(__file__).resolve().parents[1]
CHECK = "import sys, config.wsgi; print(','.join(m for m in {modules!r} if m in sys.modules))"


def _loaded(preload: str) -> list[str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "FAIRTONE_PRELOAD": preload}
    out = subprocess.run(
        [sys.executable, "-c", CHECK.format(modules=list(MODULES))], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return [m for m in out.stdout.strip().splitlines()[-1].split(",") if m]


@pytest.mark.slow  # starts the WSGI application in a process of its own: CI runs it, bin/test --fast skips it
def test_the_wsgi_application_starts_with_the_heavy_modules_loaded():
    assert _loaded("1") == list(MODULES)


@pytest.mark.slow  # starts the WSGI application in a process of its own: CI runs it, bin/test --fast skips it
def test_preloading_can_be_turned_off():
    # Without it, loading the application imports neither SciPy's statistics nor pyplot.
    loaded = _loaded("0")
    assert "scipy.stats" not in loaded and "matplotlib.pyplot" not in loaded
