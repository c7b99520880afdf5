"""An evaluation's error never shows a server path (issue 26)."""

import pytest

from labeling.models import EvaluationRun
from labeling.services.evaluations.runs import evaluation_fail, without_paths

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("/tmp/evaluation-x1y2/joined.parquet: missing column(s) g", "<file>: missing column(s) g"),
        (
            "cannot read (OSError: No such file: '/data/media/evaluations/3/r.csv')",
            "cannot read (OSError: No such file: '<file>')",
        ),
        (
            "MST 9/10 worse than 1/2; see https://example.org/a/b",
            "MST 9/10 worse than 1/2; see https://example.org/a/b",
        ),
    ],
)
def test_paths_are_taken_out_of_messages(text, shown):
    assert without_paths(text) == shown


def test_a_failed_run_records_its_error_without_paths(project, lead):
    run = EvaluationRun.objects.create(project=project, name="model A", created_by=lead)
    evaluation_fail(run, "The report could not be computed: /tmp/evaluation-abc/joined.parquet: 2 empty id(s)")
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.FAILED
    assert run.error == "The report could not be computed: <file>: 2 empty id(s)" and "/tmp" not in run.error
