"""An ML engineer scores two models against a release in the browser, reads a report and compares them."""

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from playwright.sync_api import expect

from labeling.models import EvaluationRun, Subject
from labeling.services import releases as release_services
from labeling.services.projects import project_create
from labeling.services.scales import scales_ensure_builtin
from tests.factories import MembershipFactory, UserFactory
from tests.labeling.helpers import add_images
from tests.labeling.test_releases import CARD, INCLUDE_ALL, phases_of, put

pytestmark = pytest.mark.browser
PASSWORD = "pw-test-123"


@pytest.fixture
def released(transactional_db, jobs_here, tmp_path):
    scales_ensure_builtin()
    lead = UserFactory(username="lead")
    project = project_create(name="Evaluation test", created_by=lead, labels_per_image=3)
    team = [
        MembershipFactory(project=project, user=UserFactory(username=f"lab{i}"), pseudonym=f"L{i}") for i in (1, 2, 3)
    ]
    images = add_images(project, 40, subjects=20)
    rng = np.random.default_rng(2)
    for i, subject in enumerate(Subject.objects.filter(project=project).order_by("external_id")):
        subject.attributes = {"gender": ["woman", "man"][i % 2], "body_shape": float(rng.normal(0.3, 0.05))}
        subject.save()
    main = phases_of(project)["main"]
    for k, image in enumerate(images):
        for m in team:
            put(main, image, m, [1 + k % 10])
    release = release_services.release_build(
        release_services.release_request(project=project, user=lead, rule={"include": INCLUDE_ALL}, card_text=CARD)
    )
    table = pq.read_table(release_services.release_file_path(release, "images.parquet")).to_pandas()
    files = {}
    for name, planted in (("model-a.csv", 0.0), ("model-b.csv", 2.0)):
        error = np.abs(rng.normal(1.0, 0.3, len(table))) + planted * (table["final_value"] >= 8.5)
        path = tmp_path / name
        pd.DataFrame({"external_id": table["external_id"], "error": error}).to_csv(path, index=False)
        files[name] = path
    return {"project": project, "files": files}


def _upload(page, url, name, path):
    page.goto(url)
    page.fill("input[name=name]", name)
    page.fill("input[name=model_name]", "segmenter")
    page.set_input_files("input[name=file]", str(path))
    page.click("summary:has-text('Scoring options')")
    page.fill("input[name=permutations]", "19")
    page.click("form[enctype] button[type=submit]")
    # The report is computed in the request here (no broker): allow for a loaded machine.
    expect(page.locator("h1")).to_contain_text(name, timeout=60_000)
    expect(page.locator("h1 .badge")).to_have_text("Done", timeout=60_000)


def test_engineer_uploads_results_reads_the_report_and_compares(page, live_server, released, page_errors, results_dir):
    project = released["project"]
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", "lead")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.goto(f"{live_server.url}/projects/{project.pk}/")
    page.click("nav.topnav >> text=Evaluations")
    expect(page.locator("h1")).to_have_text("Fairness evaluations")
    url = page.url
    page.screenshot(path=str(results_dir / "evaluations-empty.png"), full_page=True)

    _upload(page, url, "model A", released["files"]["model-a.csv"])
    _upload(page, url, "model B", released["files"]["model-b.csv"])
    expect(page.get_by_role("heading", name="Skin tone by band")).to_be_visible()
    expect(page.get_by_role("heading", name="Release composition")).to_be_visible()
    figures = page.locator(".figures img")
    expect(figures).to_have_count(4)
    for i in range(4):
        figures.nth(i).scroll_into_view_if_needed()
        page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=figures.nth(i).element_handle())
    verdict = page.locator("section.card", has=page.get_by_role("heading", name="Verdict"))
    expect(verdict).to_contain_text("Skin tone disparity is significant")
    page.screenshot(path=str(results_dir / "evaluation-report.png"), full_page=True)

    page.select_option("select[name=b]", label="model A (segmenter)")
    page.click("text=Compare >> nth=-1")
    expect(page.locator("h1")).to_have_text("Compare two runs", timeout=60_000)
    row = page.locator("tr", has_text="Largest gap between skin-tone bands")
    expect(row).to_contain_text("yes: B is better", timeout=30_000)
    page.screenshot(path=str(results_dir / "evaluation-compare.png"), full_page=True)
    assert EvaluationRun.objects.filter(project=project, status="done").count() == 2
    assert not page_errors
