"""The examples in the services' docstrings run (issue 24: the 19 in ``labeling`` were all marked +SKIP).

Each module's examples run against a database, with the names they use given: ``project``/``p`` (a fresh
project), ``u`` (its lead), ``jpeg`` (a 640 x 480 portrait not yet imported), ``image`` (an imported portrait in #a0785a
with a skin mask), ``io``. Each docstring runs in a savepoint rolled back after it, as a reader would try it
on its own.
"""

import doctest
import importlib
import io

import pytest
from django.db import transaction

from labeling.services.demo import synthetic_portrait
from labeling.services.images import image_create_from_bytes

pytestmark = pytest.mark.django_db

MODULES = [
    "labeling.services.images",
    "labeling.services.imports.batches",
    "labeling.services.baselines.parameters",
    "labeling.services.baselines.storage",
    "labeling.services.baselines.runs",
]


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")


@pytest.mark.parametrize("name", MODULES)
def test_the_docstring_examples_run(name, project, lead):
    photo, mask = synthetic_portrait("#a0785a", size=(480, 640), seed=3, with_mask=True)
    image = image_create_from_bytes(
        project=project, filename="portrait.jpg", data=photo, mask_data=mask, mask_kind="skin"
    )
    names = {
        "project": project,
        "p": project,
        "u": lead,
        "jpeg": synthetic_portrait("#c89678", size=(640, 480), seed=7),
        "image": image,
        "io": io,
    }
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in doctest.DocTestFinder().find(module) if t.examples]
    assert tests, f"{name} has no examples"
    report: list[str] = []
    for test in tests:
        test.globs.update(names)
        with transaction.atomic():
            runner.run(test, out=report.append)
            transaction.set_rollback(True)
    results = doctest.TestResults(runner.failures, runner.tries)
    assert results.failed == 0 and results.attempted > 0, "".join(report)
