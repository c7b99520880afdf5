"""Fixtures for end-to-end tests in a real browser (Playwright driving Debian's Chromium)."""

import os
from pathlib import Path

import pytest

# Playwright's sync API runs an asyncio event loop in this thread; Django refuses
# ORM calls from a thread with a running loop unless told it is safe. It is here:
# the test thread only talks to the browser and to the database, one at a time.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
RESULTS_DIR = Path(__file__).resolve().parents[2] / "test-results"


@pytest.fixture(scope="session")
def browser():
    """A headless Chromium for the whole session. Fails (never skips) when it is missing."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` to run the browser tests.")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - depends on the environment
        pytest.fail("Playwright for Python is missing: `pip install playwright` (no browser download needed).")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page_errors() -> list[str]:
    """Uncaught JavaScript errors and Content-Security-Policy refusals in the page during the test (a test
    should end with none)."""
    return []


@pytest.fixture
def page(browser, page_errors):
    """A fresh browser context (no cookies, no localStorage) at 1366x768."""
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    context.set_default_timeout(10_000)
    page = context.new_page()
    page.on("pageerror", lambda exc: page_errors.append(str(exc)))
    # A resource or script the Content-Security-Policy refused (labeling.middleware) is an error too.
    page.on(
        "console",
        lambda msg: page_errors.append(msg.text) if "Content Security Policy" in msg.text else None,
    )
    yield page
    context.close()


@pytest.fixture
def results_dir() -> Path:
    RESULTS_DIR.mkdir(exist_ok=True)
    return RESULTS_DIR


@pytest.fixture
def jobs_here(settings, tmp_path, monkeypatch):
    """Background jobs run in this process (the live server's thread, as on the embedded default), writing
    to a private media folder, also in CI's real-worker run: a task sent to that worker would run there too
    and write to the worker's own media folder (the erasure test lost that race)."""
    from tests.labeling.helpers import run_tasks_here

    run_tasks_here(monkeypatch)
    settings.MEDIA_ROOT = str(tmp_path / "media")
