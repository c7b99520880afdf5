"""The pure packages ``metrics`` and ``colorimetry``: their doctests run, and no module loads Django.

Every module of both packages is found with ``pkgutil.walk_packages``, so a new
module is covered without editing this file.

* Doctests: one test per docstring with examples (the published values in the
  docstrings are part of the contract, as in fast-krippendorff's
  ``krippendorff.py``). A failing example fails the suite with doctest's report.
  They run here rather than through ``--doctest-modules`` so that pytest never
  imports ``labeling`` (Django) modules for their docstrings and the collection
  is the same on every xdist worker.
* No Django: a fresh interpreter imports every module and checks that neither
  Django nor a module of the project's Django side got loaded.
"""

import doctest
import importlib
import json
import os
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PURE_PACKAGES = ("metrics", "colorimetry")
#: Top-level modules a pure package must never load.
FORBIDDEN = ("django", "rest_framework", "celery", "labeling", "config")


def package_modules(package: str) -> list[str]:
    root = importlib.import_module(package)
    return [package, *sorted(info.name for info in pkgutil.walk_packages(root.__path__, f"{package}."))]


def find_doctests() -> list[doctest.DocTest]:
    finder = doctest.DocTestFinder()
    found = []
    for package in PURE_PACKAGES:
        for name in package_modules(package):
            found.extend(test for test in finder.find(importlib.import_module(name)) if test.examples)
    return sorted(found, key=lambda test: test.name)


DOCTESTS = find_doctests()


@pytest.mark.parametrize("test", DOCTESTS, ids=[test.name for test in DOCTESTS])
def test_docstring_examples(test: doctest.DocTest):
    report: list[str] = []
    runner = doctest.DocTestRunner()
    result = runner.run(test, out=report.append)
    assert result.failed == 0, "".join(report)


def test_doctests_are_found_in_both_packages():
    # Guards against a finder that silently finds nothing (then the test above would pass vacuously).
    by_package = {package: 0 for package in PURE_PACKAGES}
    for test in DOCTESTS:
        by_package[test.name.split(".")[0]] += len(test.examples)
    assert by_package["metrics"] >= 80
    assert by_package["colorimetry"] >= 15


@pytest.mark.slow  # starts a Python process (pytest.ini): CI runs it, bin/test --fast skips it
@pytest.mark.parametrize("package", PURE_PACKAGES)
def test_every_module_imports_without_django(package: str):
    code = textwrap.dedent(
        f"""
        import importlib, json, pkgutil, sys

        root = importlib.import_module({package!r})
        names = [{package!r}]
        for info in pkgutil.walk_packages(root.__path__, {package!r} + "."):
            importlib.import_module(info.name)
            names.append(info.name)
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in {FORBIDDEN!r})
        print(json.dumps({{"modules": names, "loaded": loaded}}))
        """
    )
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True
    )
    result = json.loads(out.stdout)
    assert sorted(result["modules"]) == sorted(package_modules(package))
    assert result["loaded"] == [], f"{package} loaded {result['loaded']}"
