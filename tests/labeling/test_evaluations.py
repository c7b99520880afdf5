"""Evaluation runs in the app: upload, join report, the background report (the same as the CLI's),
bad input refused whole, roles, gates, comparison, pages."""

import io
import json
import resource

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from labeling.models import EvaluationRun, Job, Membership, Subject
from labeling.services import evaluations as evaluation_services
from labeling.services import releases as release_services
from labeling.services.evaluations import joining, runs
from metrics.report import ReportOptions, build_report
from tests.factories import MembershipFactory, UserFactory
from tests.labeling.helpers import add_images, shared_world
from tests.labeling.test_releases import CARD, INCLUDE_ALL, phases_of, put

N_IMAGES = 60
# Small nulls, and no figures (two thirds of a small run's time) except where a test reads them.
FAST = {"permutations": 19, "band_permutations": 99, "uncertainty_draws": 10, "figures": False}


@pytest.fixture(autouse=True)
def eager(monkeypatch):
    """Reports computed in this process (these tests never commit; tests/test_real_services.py covers the worker)."""
    from tests.labeling.helpers import run_tasks_here

    run_tasks_here(monkeypatch)


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return tmp_path / "media"


def _build_released():
    """60 images of 30 subjects (gender, body shape), three labels each in the main phase, released as v1."""
    from tests.factories import ProjectFactory, make_lead

    lead = make_lead("released-lead")  # a name of its own: the ``lead`` fixture may run beside this world
    project = ProjectFactory(created_by=lead)
    team = [
        MembershipFactory(project=project, user=UserFactory(username=f"rater{i}"), pseudonym=f"L{i}")
        for i in range(1, 4)
    ]
    images = add_images(project, N_IMAGES, subjects=30)
    rng = np.random.default_rng(0)
    for i, subject in enumerate(Subject.objects.filter(project=project).order_by("external_id")):
        subject.attributes = {
            "gender": ["woman", "man", "nonbinary"][i % 3],
            "body_shape": float(rng.normal(0.3, 0.05)),
        }
        subject.save()
    main = phases_of(project)["main"]
    for k, image in enumerate(images):
        tone = 1 + k % 10
        for m, shift in zip(team, (0, 0, 1 if tone < 10 else -1), strict=True):
            put(main, image, m, [tone + shift])
    release = release_services.release_request(
        project=project, user=lead, rule={"include": INCLUDE_ALL}, card_text=CARD, with_images=False
    )
    release = release_services.release_build(release)
    table = pq.read_table(release_services.release_file_path(release, "images.parquet")).to_pandas()
    return {"project": project, "lead": lead, "release": release, "images": table}


# Built once for the module: a release build of 60 images was most of each of its tests' set-up.
_shared_world, released = shared_world("released", _build_released)


@pytest.fixture
def synthetic(project, media):
    """A published release whose images table is written straight to its files (fast; the release build
    is tested with ``released``): 60 images of 30 subjects, MST 1-10."""
    from labeling.models import Release
    from labeling.services.releases import release_dir

    rng = np.random.default_rng(0)
    tone = np.tile(np.arange(1, 11), N_IMAGES // 10).astype(float)
    subjects = [f"S{i // 2}" for i in range(N_IMAGES)]
    gender = {s: ["woman", "man", "nonbinary"][k % 3] for k, s in enumerate(dict.fromkeys(subjects))}
    body = {s: float(rng.normal(0.3, 0.05)) for s in dict.fromkeys(subjects)}
    table = pd.DataFrame(
        {
            "image_id": np.arange(1, N_IMAGES + 1),
            "external_id": [f"img{i:03d}" for i in range(N_IMAGES)],
            "subject_id": subjects,
            "gender": [gender[s] for s in subjects],
            "body_shape": [body[s] for s in subjects],
            "final_value": tone,
            "min": tone,
            "max": np.minimum(tone + 1, 10),
            "excluded": False,
            "excluded_reason": None,
        }
    )
    release = Release.objects.create(
        project=project, version=1, status=Release.Status.PUBLISHED, manifest={"files": {"images.parquet": {}}}
    )
    release_dir(release).mkdir(parents=True)
    table.to_parquet(release_dir(release) / "images.parquet", index=False)
    return {"project": project, "release": release, "images": table}


def results_for(table, *, planted=1.5, seed=1, id_column="external_id"):
    """A model's boundary error per image: about 1 mm everywhere, ``planted`` mm more at MST 9-10."""
    rng = np.random.default_rng(seed)
    error = np.abs(rng.normal(1.0, 0.3, len(table))) + planted * (table["final_value"].to_numpy() >= 8.5)
    return pd.DataFrame({id_column: table[id_column].astype(str), "error": error})


def upload(frame, name="results.csv"):
    buffer = io.BytesIO()
    if name.endswith(".csv"):
        buffer.write(frame.to_csv(index=False).encode())
    elif name.endswith(".jsonl"):
        buffer.write(frame.to_json(orient="records", lines=True).encode())
    else:
        frame.to_parquet(buffer, index=False)
    buffer.seek(0)
    buffer.name = name
    return buffer


def post(api, project, frame, *, name="model A", filename="results.csv", capture=None, **fields):
    body = {
        "file": upload(frame, filename),
        "release": 1,
        "name": name,
        "model_name": fields.pop("model_name", "segmenter"),
        "options": json.dumps({**FAST, **fields.pop("options", {})}),
        **fields,
    }
    if capture is None:
        return api.post(f"/api/projects/{project.pk}/evaluations/", body, format="multipart")
    with capture(execute=True):
        return api.post(f"/api/projects/{project.pk}/evaluations/", body, format="multipart")


def test_api_run_joins_scores_and_matches_the_command_line(
    released, client_for, django_capture_on_commit_callbacks, tmp_path
):
    lead = released["lead"]
    project, table = released["project"], released["images"]
    results = results_for(table)
    api = client_for(lead)
    created = post(
        api,
        project,
        results,
        filename="results.parquet",
        capture=django_capture_on_commit_callbacks,
        options={"figures": True},
    )
    assert created.status_code == 201, created.json()
    run = created.json()
    assert run["join"]["matched"] == N_IMAGES and run["join"]["unknown"] == 0 and run["join"]["missing"] == 0
    detail = api.get(f"/api/projects/{project.pk}/evaluations/{run['id']}/").json()
    assert detail["status"] == "done", detail
    assert detail["job"]["done"] == detail["job"]["total"]
    report = json.loads(b"".join(api.get(detail["report_url"]).streaming_content))

    # The same files through the command line's code give the same numbers.
    attributes = tmp_path / "images.parquet"
    table.to_parquet(attributes)
    predictions = tmp_path / "results.csv"
    results.to_csv(predictions, index=False)
    expected = build_report(
        ReportOptions(
            attributes=attributes,
            predictions=predictions,
            out=tmp_path / "out",
            on="external_id",
            skin_tone="final_value",
            gender="gender",
            body_shape="body_shape",
            tone_min="min",
            tone_max="max",
            groups=["gender"],
            progress=False,
            tone_levels=10,
            permutations=19,
            band_permutations=99,
            uncertainty_draws=10,
            cluster="subject_id",
        )
    )
    # The release's subjects have several photos each: the run clustered by subject without being asked.
    assert table["subject_id"].nunique() < len(table)
    clusters = report["inputs"]["clusters"]
    assert clusters["column"] == "subject_id" and clusters["source"].startswith("automatic")
    assert clusters["n_clusters"] == table["subject_id"].nunique()
    for key in ("gender", "skin_tone", "body_shape"):
        assert report[key]["verdict"]["p_value"] == pytest.approx(expected[key]["verdict"]["p_value"])
        assert report[key]["verdict"]["gap_ci"] == pytest.approx(expected[key]["verdict"]["gap_ci"])
        assert report[key]["seed_000"]["p_value"] == pytest.approx(expected[key]["seed_000"]["p_value"])
        assert report[key]["seed_000"]["score"] == pytest.approx(expected[key]["seed_000"]["score"])
    assert report["skin_tone"]["verdict"]["level"] == expected["skin_tone"]["verdict"]["level"] != "negligible"
    assert report["skin_tone"]["verdict"]["worse_end"] == "high"
    assert report["intersectional"]["seed_000"]["n_customers"] == expected["intersectional"]["seed_000"]["n_customers"]
    assert report["composition"]["n"] == N_IMAGES
    assert report["gender"]["seed_000"]["n_pairs"] == 3  # three genders: Holm over three pairs
    # The label-uncertainty check also scores each labeler's labels alone (the release's labels table).
    per_labeler = report["label_uncertainty"]["per_labeler"]
    assert set(per_labeler) == {"labeler_L1", "labeler_L2", "labeler_L3"}
    assert all(row["n"] == N_IMAGES for row in per_labeler.values())
    # Figures as PNG and SVG, downloadable.
    assert len(report["figures"]) >= 3
    for figure in report["figures"]:
        for kind in ("png", "svg"):
            got = api.get(f"/api/projects/{project.pk}/evaluations/{run['id']}/files/{figure[kind]}")
            assert got.status_code == 200, figure[kind]
    for bad in ("../../joined.parquet", "joined.parquet", "/etc/passwd", "figures/x.png"):
        assert api.get(f"/api/projects/{project.pk}/evaluations/{run['id']}/files/{bad}").status_code == 404
    job = Job.objects.get(pk=EvaluationRun.objects.get(pk=run["id"]).job_id)
    assert job.kind == Job.Kind.EVALUATION and job.status == Job.Status.DONE


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda f: f.rename(columns={"error": "loss"}), "error column 'error' is not in the file"),
        (lambda f: pd.concat([f, f.head(2)]), "appear more than once"),
        (lambda f: f.assign(error=["x"] + list(f["error"][1:])), "non-numeric or missing error"),
        (lambda f: f.assign(external_id="nope-" + f["external_id"]), "too few results match the release"),
        (lambda f: f.head(5), "too few results match the release"),
    ],
)
def test_bad_results_are_refused_whole_with_a_clear_message(synthetic, lead, client_for, change, message, media):
    project = synthetic["project"]
    response = post(client_for(lead), project, change(results_for(synthetic["images"])))
    assert response.status_code == 400
    assert message in json.dumps(response.json()), response.json()
    assert not EvaluationRun.objects.exists() and not Job.objects.filter(kind=Job.Kind.EVALUATION).exists()
    assert not (media / "evaluations").exists() or not any((media / "evaluations").rglob("*.parquet"))


def test_bad_options_files_and_releases_are_refused(synthetic, lead, client_for):
    project, table = synthetic["project"], synthetic["images"]
    api = client_for(lead)
    bad_options = post(api, project, results_for(table), options={"threshold": -1, "colour": 1})
    assert bad_options.status_code == 400
    assert set(bad_options.json()) >= {"threshold", "options"}
    wrong_type = api.post(
        f"/api/projects/{project.pk}/evaluations/",
        {"file": upload(results_for(table), "results.xlsx"), "release": 1, "name": "x"},
        format="multipart",
    )
    assert wrong_type.status_code == 400 and "file" in wrong_type.json()
    garbage = io.BytesIO(b"\x00\x01 not parquet")
    garbage.name = "r.parquet"
    unreadable = api.post(
        f"/api/projects/{project.pk}/evaluations/", {"file": garbage, "release": 1, "name": "x"}, format="multipart"
    )
    assert unreadable.status_code == 400 and "cannot be read" in json.dumps(unreadable.json())
    assert post(api, project, results_for(table), release=7).status_code == 400
    assert post(api, project, results_for(table), colour="x").status_code == 201  # unknown form fields ignored
    assert post(api, project, results_for(table), options={"gender_column": "shoe"}).status_code == 400
    # Options as plain form fields too (a CI script's -F threshold=1.5); bad ones refused the same way.
    as_fields = post(api, project, results_for(table), threshold="1.5", min_samples="5")
    assert as_fields.status_code == 201 and as_fields.json()["options"]["threshold"] == 1.5
    assert as_fields.json()["options"]["min_samples"] == 5
    assert post(api, project, results_for(table), threshold="lots").status_code == 400
    assert EvaluationRun.objects.count() == 2


def test_figures_false_leaves_the_figures_out_and_the_report_the_same(
    synthetic, lead, client, client_for, django_capture_on_commit_callbacks
):
    project, table = synthetic["project"], synthetic["images"]
    api = client_for(lead)
    client.force_login(lead)
    reports = {}
    for figures in (True, "false"):  # a JSON boolean, or a form field's text
        created = post(
            api, project, results_for(table), capture=django_capture_on_commit_callbacks, options={"figures": figures}
        )
        assert created.status_code == 201, created.json()
        assert created.json()["options"]["figures"] is (figures is True)
        detail = api.get(f"/api/projects/{project.pk}/evaluations/{created.json()['id']}/").json()
        assert detail["status"] == "done", detail
        reports[figures] = json.loads(b"".join(api.get(detail["report_url"]).streaming_content))
        page = client.get(f"/projects/{project.pk}/evaluations/{created.json()['id']}/").content.decode()
        assert ("Figures were not drawn" in page) is (figures is not True)
        assert ('<h2 style="margin-top:0">Figures</h2>' in page) is (figures is True)
    drawn, left_out = reports[True], reports["false"]
    assert drawn["figures"] and left_out["figures"] == []
    for key in ("gender", "skin_tone", "intersectional", "composition", "label_uncertainty"):
        assert json.dumps(left_out.get(key), sort_keys=True) == json.dumps(drawn.get(key), sort_keys=True), key
    refused = post(api, project, results_for(table), options={"figures": "maybe"})
    assert refused.status_code == 400 and "figures must be true or false" in refused.json()["figures"][0]


def test_results_by_image_id_per_subject_and_derived_errors(
    synthetic, lead, client_for, django_capture_on_commit_callbacks
):
    project, table = synthetic["project"], synthetic["images"]
    api = client_for(lead)
    by_id = results_for(table, id_column="image_id")
    ok = post(api, project, by_id, filename="r.jsonl", capture=django_capture_on_commit_callbacks)
    assert ok.status_code == 201 and ok.json()["join"]["match_on"] == "image_id"
    per_subject = table.groupby("subject_id", as_index=False).agg(final_value=("final_value", "mean"))
    per_subject["error"] = 1.0 + (per_subject["final_value"] >= 8.5) + np.linspace(0, 0.1, len(per_subject))
    subject = post(api, project, per_subject[["subject_id", "error"]], options={"min_samples": 3})
    assert subject.status_code == 201, subject.json()
    assert subject.json()["join"]["matched"] == 30 and subject.json()["join"]["match_on"] == "subject_id"
    truth = pd.DataFrame(
        {
            "external_id": table["external_id"],
            "label": np.where(table["final_value"] >= 8.5, "cat", "dog"),
            "predicted": "dog",
        }
    )
    derived = post(
        api,
        project,
        truth,
        prediction_column="predicted",
        truth_column="label",
        error_kind="classification",
        capture=django_capture_on_commit_callbacks,
    )
    assert derived.status_code == 201, derived.json()
    run = EvaluationRun.objects.get(pk=derived.json()["id"])
    assert run.status == "done" and run.options["threshold"] == pytest.approx(0.1)
    assert run.report["skin_tone"]["bands"]["worse_end"] == "high"


def test_labelers_never_see_runs_and_reviewers_do(
    synthetic, lead, client_for, client, django_capture_on_commit_callbacks
):
    project = synthetic["project"]
    created = post(
        client_for(lead), project, results_for(synthetic["images"]), capture=django_capture_on_commit_callbacks
    )
    run_id = created.json()["id"]
    labeler = UserFactory(username="labeler")
    MembershipFactory(project=project, user=labeler, pseudonym="L9")
    reviewer = UserFactory(username="reviewer")
    MembershipFactory(project=project, user=reviewer, role=Membership.Role.REVIEWER)
    outsider = UserFactory(username="outsider")
    base = f"/api/projects/{project.pk}/evaluations/"
    for path in (base, f"{base}{run_id}/", f"{base}{run_id}/report/", f"{base}{run_id}/gate/"):
        assert client_for(labeler).get(path).status_code == 403, path
        assert client_for(outsider).get(path).status_code == 404, path
        assert client_for(reviewer).get(path).status_code == 200, path
    assert post(client_for(labeler), project, results_for(synthetic["images"])).status_code == 403
    client.force_login(labeler)
    assert client.get(f"/projects/{project.pk}/evaluations/").status_code in (403, 404)
    assert client.get(f"/projects/{project.pk}/evaluations/{run_id}/").status_code in (403, 404)


def test_gates_pass_and_fail_with_reasons(synthetic, lead, client_for, django_capture_on_commit_callbacks):
    project, table = synthetic["project"], synthetic["images"]
    api = client_for(lead)
    bad = post(api, project, results_for(table, planted=2.5), capture=django_capture_on_commit_callbacks).json()["id"]
    good = post(
        api, project, results_for(table, planted=0.0), name="model B", capture=django_capture_on_commit_callbacks
    )
    good = good.json()["id"]
    gates = f"/api/projects/{project.pk}/evaluation-gates/"
    assert api.post(gates, {"name": "strict", "rules": {"fail_on": ["sometimes"]}}, format="json").status_code == 400
    created = api.post(
        gates,
        {"name": "strict", "rules": {"fail_on": ["significant-severe"], "max_score": {"skin_tone": 1.0}}},
        format="json",
    )
    assert created.status_code == 201, created.json()
    failed = api.get(f"/api/projects/{project.pk}/evaluations/{bad}/gate/").json()
    assert failed["passed"] is False and failed["gates"][0]["reasons"]
    assert "skin" in " ".join(failed["gates"][0]["reasons"]).lower()
    passed = api.get(f"/api/projects/{project.pk}/evaluations/{good}/gate/").json()
    assert passed["passed"] is True, passed
    adhoc = api.get(f"/api/projects/{project.pk}/evaluations/{good}/gate/", {"max_score": "skin_tone=-1"})
    assert adhoc.status_code == 400


def test_compare_two_models_on_the_same_release(
    synthetic, lead, client_for, client, django_capture_on_commit_callbacks
):
    project, table = synthetic["project"], synthetic["images"]
    api = client_for(lead)
    a = post(api, project, results_for(table, planted=0.0, seed=3), capture=django_capture_on_commit_callbacks).json()[
        "id"
    ]
    b = post(
        api,
        project,
        results_for(table, planted=2.0, seed=4),
        name="model B",
        capture=django_capture_on_commit_callbacks,
    ).json()["id"]
    compared = api.get(f"/api/projects/{project.pk}/evaluations/compare/", {"a": a, "b": b})
    assert compared.status_code == 200, compared.json()
    scores = {s["name"]: s for s in compared.json()["scores"]}
    assert compared.json()["n_shared"] == N_IMAGES
    assert scores["skin_tone"]["significant"] and scores["skin_tone"]["direction"] == "worse"
    assert scores["skin_tone"]["ci_low"] > 0
    assert api.get(f"/api/projects/{project.pk}/evaluations/compare/", {"a": a, "b": a}).status_code == 400
    client.force_login(lead)
    page = client.get(f"/projects/{project.pk}/evaluations/compare/", {"a": a, "b": b})
    assert page.status_code == 200 and b"yes: B is worse" in page.content
    history = client.get(f"/projects/{project.pk}/evaluations/", {"model": "segmenter"})
    assert history.status_code == 200 and b"History of segmenter" in history.content


def test_pages_upload_show_the_report_and_refuse_bad_files(released, client, django_capture_on_commit_callbacks):
    lead = released["lead"]
    project, table = released["project"], released["images"]
    client.force_login(lead)
    page = client.get(f"/projects/{project.pk}/evaluations/")
    assert page.status_code == 200 and b"New evaluation" in page.content
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            f"/projects/{project.pk}/evaluations/",
            {"name": "from the page", "release": "1", "file": upload(results_for(table)), "permutations": "19"},
        )
    assert response.status_code == 302, response.content[:500]
    run = EvaluationRun.objects.get(name="from the page")
    detail = client.get(response["Location"])
    assert detail.status_code == 200
    text = detail.content.decode()
    assert "Verdict" in text and "Skin tone by band" in text and "Release composition" in text
    assert text.count("<img") >= 4
    bad = client.post(
        f"/projects/{project.pk}/evaluations/",
        {"name": "bad", "release": "1", "file": upload(results_for(table).rename(columns={"error": "e"}))},
    )
    assert bad.status_code == 400 and "Nothing was stored" in bad.content.decode()
    assert EvaluationRun.objects.count() == 1 and run.status == "done"


def test_the_service_refuses_an_unpublished_or_foreign_release(synthetic, lead, project):
    other = evaluation_services.JoinSpec()
    with pytest.raises(Exception) as error:
        evaluation_services.evaluation_create(
            project=project, user=lead, release=None, upload=None, name="", spec=other
        )
    assert "name" in str(error.value) and "release" in str(error.value) and "file" in str(error.value)


def test_a_failing_write_keeps_nothing(synthetic, lead, media, monkeypatch):
    from django.core.files.uploadedfile import SimpleUploadedFile

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", full_disk)
    frame = results_for(synthetic["images"])
    upload_file = SimpleUploadedFile("r.csv", frame.to_csv(index=False).encode())
    with pytest.raises(OSError):
        evaluation_services.evaluation_create(
            project=synthetic["project"], user=lead, release=synthetic["release"], upload=upload_file, name="disk full"
        )
    assert not EvaluationRun.objects.exists() and not Job.objects.filter(kind=Job.Kind.EVALUATION).exists()
    leftovers = (
        [p for p in (media / "evaluations").rglob("*") if p.is_file()] if (media / "evaluations").exists() else []
    )
    assert leftovers == []


def test_an_evaluation_whose_task_was_lost_is_resent_and_one_whose_worker_died_is_given_up(
    synthetic, lead, django_capture_on_commit_callbacks
):
    from datetime import timedelta

    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.utils import timezone

    from labeling.services import jobs as job_services

    def create(name):
        upload_file = SimpleUploadedFile("r.csv", results_for(synthetic["images"]).to_csv(index=False).encode())
        with django_capture_on_commit_callbacks(execute=False):  # the task is lost: never sent
            return evaluation_services.evaluation_create(
                project=synthetic["project"],
                user=lead,
                release=synthetic["release"],
                upload=upload_file,
                name=name,
                options=FAST,
            )

    lost = create("lost")
    later = timezone.now() + timedelta(seconds=job_services.QUEUED_RESEND_SECONDS + 1)
    with django_capture_on_commit_callbacks(execute=True):
        assert job_services.jobs_sweep(now=later)["resent"] == 1
    lost.refresh_from_db()
    assert lost.status == "done"  # sent again and computed (in-process here)

    dead = create("dead")
    now = timezone.now()
    EvaluationRun.objects.filter(pk=dead.pk).update(status="running")
    Job.objects.filter(pk=dead.job_id).update(status=Job.Status.RUNNING, started_at=now, heartbeat_at=now)
    assert job_services.job_deadline_seconds(Job.Kind.EVALUATION) > evaluation_services.EVALUATION_TASK_TIME_LIMIT
    # A run beats at each step of its report: given up once its heartbeat is stale, before its time limit.
    stale = job_services.job_silence_limit_seconds(Job.Kind.EVALUATION)
    assert stale < evaluation_services.EVALUATION_TASK_TIME_LIMIT
    assert job_services.jobs_sweep(now=now + timedelta(seconds=stale - 30))["abandoned"] == 0
    assert job_services.jobs_sweep(now=now + timedelta(seconds=stale + 1))["abandoned"] == 1
    dead.refresh_from_db()
    assert dead.status == "failed" and "worker was lost" in dead.error and "no heartbeat" in dead.error
    assert Job.objects.get(pk=dead.job_id).status == Job.Status.FAILED
    # A late task of the given-up run does nothing.
    assert evaluation_services.evaluation_run(dead).status == "failed"


def test_a_text_body_shape_is_scored_as_groups(synthetic, lead, client_for, django_capture_on_commit_callbacks):
    """What a lead naturally has (slim / average / heavy) is scored like gender, and the page says so."""
    from labeling.services.releases import release_dir

    project, table = synthetic["project"], synthetic["images"].copy()
    shapes = ["slim", "average", "heavy"]
    table["body_shape"] = [shapes[int(s[1:]) % 3] for s in table["subject_id"]]
    table.to_parquet(release_dir(synthetic["release"]) / "images.parquet", index=False)
    results = results_for(table, planted=0.0)
    results.loc[table["body_shape"].to_numpy() == "heavy", "error"] += 1.5  # heavy bodies: 1.5 mm worse
    api = client_for(lead)
    created = post(api, project, results, capture=django_capture_on_commit_callbacks)
    assert created.status_code == 201, created.json()
    run = EvaluationRun.objects.get(pk=created.json()["id"])
    assert run.status == EvaluationRun.Status.DONE, run.error
    assert run.options["body_shape_column"] == "body_shape"
    part = run.report["body_shape"]
    assert part["treatment"] == "categorical"
    assert part["verdict"]["significant"] is True and part["verdict"]["worst_band"] == "heavy"
    from django.test import Client

    browser = Client()
    browser.force_login(lead)
    page = browser.get(f"/projects/{project.pk}/evaluations/{run.pk}/")
    assert page.status_code == 200
    assert "Body shape (body_shape)" in page.content.decode()
    assert "heavy worst" in page.content.decode() and "Body shape by group" in page.content.decode()


# ------------------------------------------------------------------ hostile uploads (issue 26)
# Every upload's shape is bounded before a row is parsed (columns, rows, line length, Parquet row groups,
# uncompressed size and the longest text), only the columns the join needs are read, and an upload of more
# than ``IN_PROCESS_BYTES`` is read in a process of its own with a memory limit. The hostile files are
# built here, bounded in size.


def _post(api, project, payload: bytes, name: str, **fields):
    buffer = io.BytesIO(payload)
    buffer.name = name
    body = {"file": buffer, "release": 1, "name": "hostile", "options": json.dumps({"permutations": 9}), **fields}
    return api.post(f"/api/projects/{project.pk}/evaluations/", body, format="multipart")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_a_million_column_csv_is_refused_at_once(released, client_for):
    lead = released["lead"]
    header = ",".join(f"c{i}" for i in range(1_000_000)).encode()  # 6.9 MB header line
    payload = header + b"\n" + b"1," * 10 + b"1\n"
    before = _peak_mb()
    answer = _post(client_for(lead), released["project"], payload, "wide.csv")
    assert answer.status_code == 413, answer.content
    assert "first line is longer than 1,048,576 bytes" in json.dumps(answer.json())
    assert _peak_mb() - before < 100  # the time it takes: bench/bench_hostile_uploads.py
    assert not EvaluationRun.objects.exists()


def test_too_many_columns_and_rows_are_named(tmp_path):
    wide = tmp_path / "wide.csv"
    wide.write_text(",".join(f"c{i}" for i in range(1500)) + "\n" + ",".join("1" * 1500) + "\n")
    with pytest.raises(joining.ResultsError, match="1,500 columns; at most 1,000") as refused:
        joining.results_columns(wide)
    assert refused.value.too_large
    lines = tmp_path / "long.jsonl"
    lines.write_text('{"external_id": "a", "error": 1}\n' * 10)
    assert joining.results_columns(lines) == ["external_id", "error"]


def test_a_decompression_heavy_parquet_is_refused_before_pandas(tmp_path, released, client_for):
    lead = released["lead"]
    # One 4,000-character string, dictionary-encoded, in 300,000 rows: a few KB on disk, 1.2 GB as Python strings.
    rows = 300_000
    column = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, dtype=np.int32)), pa.array(["x" * 4000]))
    table = pa.table({"external_id": column, "error": pa.array(np.ones(rows))})
    path = tmp_path / "bomb.parquet"
    pq.write_table(table, path, compression="zstd")
    payload = path.read_bytes()
    assert len(payload) < 300_000
    before = _peak_mb()
    answer = _post(client_for(lead), released["project"], payload, "bomb.parquet")
    assert answer.status_code == 413, answer.content
    assert "a value of 4,000 characters" in json.dumps(answer.json())
    assert _peak_mb() - before < 200  # the time it takes: bench/bench_hostile_uploads.py
    assert not EvaluationRun.objects.exists()


def test_only_the_needed_columns_are_read(tmp_path):
    path = tmp_path / "results.csv"
    frame = pd.DataFrame({"external_id": ["a", "b"], "error": ["1", "2"], "notes": ["x", "y"]})
    frame.to_csv(path, index=False)
    columns = joining.results_columns(path)
    read = joining.read_results(path, joining.needed_columns(columns, joining.JoinSpec()))
    assert list(read.columns) == ["external_id", "error"]


@pytest.mark.slow  # starts the reader process (a fresh interpreter): CI runs it, bin/test --fast skips it
def test_a_large_upload_is_read_in_a_process_of_its_own(
    released, client_for, monkeypatch, django_capture_on_commit_callbacks
):
    lead = released["lead"]
    monkeypatch.setattr(runs, "IN_PROCESS_BYTES", 0)  # every upload goes to the reader process
    calls = []
    real = runs._join_elsewhere
    monkeypatch.setattr(runs, "_join_elsewhere", lambda *a, **k: calls.append(1) or real(*a, **k))
    table = released["images"]
    results = results_for(table)
    with django_capture_on_commit_callbacks(execute=True):
        answer = _post(client_for(lead), released["project"], results.to_csv(index=False).encode(), "results.csv")
    assert answer.status_code == 201, answer.content
    assert calls and answer.json()["join"]["matched"] == N_IMAGES
    run = EvaluationRun.objects.get(pk=answer.json()["id"])
    assert run.status == "done", run.error
    # Bad content is reported by the reader process as by the web process: per line, nothing stored.
    bad = results.assign(error="oops")
    answer = _post(client_for(lead), released["project"], bad.to_csv(index=False).encode(), "bad.csv")
    assert answer.status_code == 400 and "non-numeric or missing error value" in json.dumps(answer.json())
    assert EvaluationRun.objects.count() == 1
