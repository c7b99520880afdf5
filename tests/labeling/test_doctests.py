"""The docstring examples of ``labeling`` run (issue 24): none is skipped.

The examples that need a database and files run in tests/labeling/test_docstring_examples.py, with the names
they use given; every other module's run here, one test per docstring, the way
tests/metrics/test_pure_packages.py runs the pure packages' examples.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import labeling
from tests.labeling.test_docstring_examples import MODULES as WITH_DATABASE


def _doctests() -> list[doctest.DocTest]:
    finder = doctest.DocTestFinder()
    found = []
    for info in pkgutil.walk_packages(labeling.__path__, "labeling."):
        if ".migrations" in info.name or info.name.endswith((".tests", ".apps")) or info.name in WITH_DATABASE:
            continue
        module = importlib.import_module(info.name)
        found.extend(test for test in finder.find(module) if test.examples)
    return sorted(found, key=lambda test: test.name)


DOCTESTS = _doctests()


@pytest.mark.parametrize("test", DOCTESTS, ids=[test.name for test in DOCTESTS])
def test_docstring_examples(test: doctest.DocTest):
    report: list[str] = []
    result = doctest.DocTestRunner().run(test, out=report.append)
    assert result.failed == 0, "".join(report)


def test_no_example_is_skipped_and_the_finder_finds_them():
    examples = [example for test in DOCTESTS for example in test.examples]
    assert len(examples) >= 12  # and the 15 of the modules with a database: test_docstring_examples.py
    assert not [e.source for e in examples if e.options.get(doctest.SKIP)]
