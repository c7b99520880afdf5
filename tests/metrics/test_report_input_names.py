"""Messages of the report name tables in memory by their role, files by the path the caller gave (issue 26: the
web app's messages carried its temporary file paths, and a table in memory would have been printed whole)."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from metrics.report import ReportInputError, ReportOptions, build_report
from metrics.report.inputs import source_label


def test_a_table_in_memory_is_named_by_its_role_and_a_file_by_its_path():
    table = pd.DataFrame({"image_id": ["1", "2"], "error": [0.1, 0.2]})
    assert source_label(table, "attributes") == "the attributes table"
    assert source_label(Path("my/results.csv"), "predictions") == "my/results.csv"


def test_problems_with_tables_in_memory_never_print_them(tmp_path):
    rng = np.random.default_rng(0)
    table = pd.DataFrame({"image_id": [f"id{k}" for k in range(30)], "error": rng.normal(size=30)})
    options = ReportOptions(attributes=table, predictions=table, out=tmp_path / "out", skin_tone="final_value")
    with pytest.raises(ReportInputError) as caught:
        build_report(options)
    text = "\n".join(caught.value.problems)
    assert "the attributes table: missing column(s) final_value" in text
    assert "id29" not in text and "error" not in text.split("available:")[0]
