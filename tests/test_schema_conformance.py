"""The OpenAPI document describes what the API does: schemathesis against the live schema.

The schema is read from the app (``GET /api/schema/``, drf-spectacular) and every operation is
sent requests that schemathesis generates from it, through the WSGI app, with a lead's token and
with a labeler's token, on one small seeded project (images, an open phase with labels, a
published release, an evaluation run and gate, a baseline, an import batch, a job). Each
answer is checked:

- ``not_a_server_error``: never a 5xx;
- ``status_code_conformance``: the status code is one the operation documents;
- ``content_type_conformance`` and ``response_schema_conformance``: the body is what the
  document says for that status code;
- ``positive_data_acceptance``, on reads (GET): a request the document calls valid is not refused
  as malformed (400, 405, 415, 422; refusals of access, 401, 403 and 404, are allowed). Not on
  changes: whether a change is accepted depends on the data's state and on rules across fields
  and objects that a schema cannot say (a phase already open, a release that does not exist, a
  labeler of another project, a wrong password); their 400s are documented as such;
- ``negative_data_rejection``: a request the document calls invalid is refused (4xx).

Path parameters are the seeded objects' ids (random ids would only ever reach 404), plus a few
cases per operation with the generated ids, so the 404 answers are checked too. Each request runs
in a savepoint rolled back after it, so a destructive operation (delete, archive, close) never
takes the data the next one needs. Bounded for CI: a few examples per operation and mode,
derandomized, no shrinking; ``FAIRTONE_SCHEMA_EXAMPLES`` raises the count for a deeper run.
"""

import io
import os
import re
import time
from collections import Counter, defaultdict

import pytest
import schemathesis
from django.contrib.auth.models import Permission
from django.core.cache import cache
from django.core.files.base import ContentFile
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, transaction
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    positive_data_acceptance,
    negative_data_rejection,
]
CHANGE_CHECKS = [check for check in CHECKS if check is not positive_data_acceptance]
#: The deep run's checks: what the server must never do whatever it is sent (a 5xx, an undocumented status,
#: a body unlike its schema). Its 4x examples also find requests the document calls invalid that the API
#: accepts (a lenient field, e.g. a JSON attribute of another type); those are the fast run's
#: ``negative_data_rejection`` findings at depth, reported in the closing note of stop 31, not server faults.
DEEP_CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]

#: Examples per operation, role and mode: valid data on the seeded objects, invalid data on them,
#: and valid data on generated (unknown) ids.
EXAMPLES = int(os.environ.get("FAIRTONE_SCHEMA_EXAMPLES", "0")) or None
POSITIVE, NEGATIVE, UNKNOWN_IDS = (EXAMPLES or 5), (EXAMPLES or 3), (EXAMPLES and EXAMPLES // 2 or 1)


VERBOSE = bool(os.environ.get("FAIRTONE_SCHEMA_VERBOSE"))


def build_world() -> dict:
    from labeling.models import EvaluationGate, EvaluationRun, ImageBaseline, Job, MaskSample, MaskSampleItem, Subject
    from labeling.services import baselines as baseline_services
    from labeling.services import releases as release_services
    from labeling.services.imports import import_files
    from tests.factories import MembershipFactory, ProjectFactory, UserFactory, make_image, png_bytes
    from tests.labeling.helpers import open_calibration_1, submit

    lead = UserFactory(username="schema-lead")
    lead.user_permissions.add(Permission.objects.get(codename="add_project", content_type__app_label="labeling"))
    labeler_user = UserFactory(username="schema-labeler")
    project = ProjectFactory(created_by=lead)
    labeler = MembershipFactory(project=project, user=labeler_user, pseudonym="L1")
    helpers = [MembershipFactory(project=project, pseudonym=f"L{i}") for i in (2, 3)]
    files = [(f"s{i}.png", io.BytesIO(png_bytes(colour=(30 * i, 120, 80)))) for i in range(1, 7)]
    batch = import_files(project=project, files=files, user=lead)
    phase = open_calibration_1(project, size=6, cal1=6, labels_per_image=3)
    for m in helpers:
        for tone, a in enumerate(phase.assignments.filter(labeler=m).order_by("position"), start=3):
            submit(phase, m, a.image_id, tones=[tone])
    # The labeler has answered half of their images: the phase still has work for them.
    mine = list(phase.assignments.filter(labeler=labeler).order_by("position"))
    for a in mine[: len(mine) // 2]:
        submit(phase, labeler, a.image_id, tones=[4])
    label = phase.labels.filter(labeler=labeler).order_by("id").first()
    image = label.image
    job = Job.objects.create(project=project, kind=Job.Kind.BASELINE, status=Job.Status.DONE, total=1, done=1)
    parameters = baseline_services.baseline_parameters_effective(project)
    ImageBaseline.objects.create(
        image=image,
        parameters=parameters,
        parameters_hash=baseline_services.baseline_parameters_hash(parameters),
        code_version=baseline_services.BASELINE_CODE_VERSION,
        status=ImageBaseline.Status.OK,
        ita_median=40.0,
        lightness_median=60.0,
        b_median=20.0,
        albedo=0.3,
        albedo_normalized=0.35,
        ita_class="intermediate",
        overlay=ContentFile(png_bytes(), name="schema-overlay.png"),
        job=job,
    )
    release = release_services.release_request(
        project=project,
        user=lead,
        rule={"include": dict.fromkeys(release_services.CATEGORIES, True)},
        card_text={name: f"The {name}." for name in release_services.CARD_FIELDS},
    )
    assert release_services.release_build(release).status == "published"
    run = EvaluationRun.objects.create(
        project=project, release=release, name="model A", status=EvaluationRun.Status.DONE, report={"summary": []}
    )
    gate = EvaluationGate.objects.create(project=project, name="strict", rules={"fail_on": ["significant"]})
    # An {id} is the object of the segment before it; other path parameters by name.
    ids = {
        "projects": project.pk,
        "images": image.pk,
        "phases": phase.pk,
        "labels": label.pk,
        "imports": batch.pk,
        "jobs": job.pk,
        "scales": project.scale_id,
        "evaluations": run.pk,
        "evaluation-gates": gate.pk,
    }
    # A subject of its own (one image outside the phase) for the erasure: it takes nothing the others need.
    subject = Subject.objects.create(project=project, external_id="schema-erase")
    make_image(project, colour=(9, 9, 9), subject=subject)
    sample = MaskSample.objects.create(project=project, per_tone=1, seed=1, tone_definition="schema")
    item = MaskSampleItem.objects.create(sample=sample, image=image, tone=3)
    named = {
        "item_id": item.pk,
        # A helper, not the labeler whose requests are asked too: a generated body may deactivate them.
        "member_id": helpers[-1].pk,
        "project_pk": project.pk,
        "version": release.version,
        "path": "images.csv",
        "external_id": subject.external_id,
    }
    return {"users": {"lead": lead, "labeler": labeler_user}, "ids": ids, "named": named}


def path_parameters(path: str, world: dict) -> dict:
    values = {}
    for previous, name in re.findall(r"([\w-]+)/\{(\w+)\}", path):
        values[name] = world["ids"][previous] if name == "id" else world["named"][name]
    return values


@pytest.fixture
def wsgi_app():
    """Django's WSGI app, in this thread and this test's transaction (as Django's test client does it)."""
    from django.core.wsgi import get_wsgi_application

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def _binary_part_false_alarm(operation, failure: Failure) -> bool:
    """A multipart body whose ``format: binary`` field schemathesis filled with a non-bytes value (7, a
    list): on the wire that is a file part of a few bytes, and any bytes are binary, so the server cannot
    tell it from a real file (a manifest containing "7" is read, found to lack a ``file`` column, and kept as
    a failed batch with its reason, as the import documents). Every other negative case stays checked."""
    multipart = any(body.media_type.startswith("multipart/") for body in operation.body)
    return (
        multipart
        and "violates `format`" in str(failure.message)
        and str(failure.title).startswith("Schema-violating request accepted")
    )


def _nul_refusal(failure: Failure, response) -> bool:
    """A generated "valid" string holding U+0000: the app refuses NUL in every parameter at the edge (issue
    26, a 400 saying so; tests/labeling/test_nul_refused.py), which the schema's plain strings cannot say."""
    return (
        str(failure.title).startswith("Schema-valid request rejected")
        and response.status_code == 400
        and b"NUL characters (U+0000) are not allowed" in response.content
    )


def _failure_line(failure: Failure) -> str:
    message = " ".join(str(failure.message).split())
    return f"{failure.title}: {message[:160]}"


@pytest.mark.slow  # the schemathesis run (~31 s; the deep one below too): CI runs it, bin/test --fast skips it (issue 24)
@pytest.mark.django_db
def test_the_api_answers_as_its_schema_says(wsgi_app):
    _schema_run(wsgi_app, POSITIVE, NEGATIVE, UNKNOWN_IDS)


@pytest.mark.slow
@pytest.mark.django_db
def test_the_api_answers_as_its_schema_says_deep(wsgi_app, client):
    """The slow tier (CI runs it, ``bin/test --fast`` skips it): four times the examples, and the inputs that
    found 500s before (issue 26): ids of the wrong type in every path, and NUL in every query parameter and
    body field of every operation."""
    deep = EXAMPLES or 20
    _schema_run(wsgi_app, deep, deep, max(deep // 4, 2), hostile=client)


#: Path ids a client may send that are not ids: each must be a 404 from the URL resolver (was a 500).
WRONG_IDS = ("abc", "1.5", "-1", "1e3", "0x1f", "%20", "%C3%A9", "9" * 30)


def _hostile_requests(client, operation, fixed: dict, headers: dict, failures: dict, statuses: Counter) -> None:
    """Ids of the wrong type in the path, and NUL in each query parameter and body field: never a 5xx; a
    wrong id is a 404, a NUL a 400. Each request in a savepoint of its own, rolled back after it."""
    method = operation.method.lower()
    send = getattr(client, method)

    def call(*args, **kwargs):
        with transaction.atomic():
            try:
                response = send(*args, **kwargs)
            finally:
                # Django's test client connects ``close_old_connections`` again after each request; the
                # next request through the WSGI app would then close this test's connection inside its
                # transaction (a no-op on SQLite's in-memory database, a broken connection and 503s on
                # PostgreSQL). Keep it disconnected, as the ``wsgi_app`` fixture does.
                request_started.disconnect(close_old_connections)
                request_finished.disconnect(close_old_connections)
            transaction.set_rollback(True)
        return response

    id_names = [name for name in fixed if name in ("id", "project_pk", "version", "item_id", "member_id")]
    for name in id_names:
        for bad in WRONG_IDS:
            url = (
                "/api" + operation.path.format(**{**fixed, name: bad})
                if not operation.path.startswith("/api")
                else operation.path.format(**{**fixed, name: bad})
            )
            response = call(url, **headers)
            statuses[response.status_code] += 1
            if response.status_code != 404:
                failures[(operation.label, "hostile")][f"{name}={bad!r}: {response.status_code}, not 404"] += 1
    url = operation.path.format(**fixed)
    url = url if url.startswith("/api") else "/api" + url
    fields = [p.name for p in operation.query] or ["q"]
    for field in fields:
        response = call(url + f"?{field}=a%00b", **headers)
        statuses[response.status_code] += 1
        if response.status_code != 400:
            failures[(operation.label, "hostile")][f"NUL in query {field}: {response.status_code}, not 400"] += 1
    if method in ("post", "put", "patch"):
        schema = (operation.body[0].definition.get("schema") if len(operation.body) else None) or {}
        names = list(schema.get("properties") or {}) or ["name"]
        for name in names:
            response = call(url, {name: "a\x00b"}, content_type="application/json", **headers)
            statuses[response.status_code] += 1
            if response.status_code != 400:
                failures[(operation.label, "hostile")][f"NUL in body {name}: {response.status_code}, not 400"] += 1


def _schema_run(wsgi_app, positive: int, negative: int, unknown: int, hostile=None) -> None:
    deep = hostile is not None
    from rest_framework.authtoken.models import Token

    started = time.monotonic()
    world = build_world()
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", wsgi_app)
    tokens = {role: Token.objects.get_or_create(user=user)[0].key for role, user in world["users"].items()}
    failures: dict[tuple[str, str], Counter] = defaultdict(Counter)
    examples = Counter()
    statuses = Counter()
    operations = []

    def run(operation, role: str, mode: GenerationMode, n: int, fixed: dict | None) -> None:
        strategy = operation.as_strategy(generation_mode=mode, path_parameters=fixed)
        headers = {"Authorization": f"Token {tokens[role]}"}
        checks = CHECKS if operation.method.upper() == "GET" else CHANGE_CHECKS
        if deep:
            checks = DEEP_CHECKS

        @settings(
            max_examples=n,
            deadline=None,
            derandomize=True,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=strategy)
        def one(case):
            cache.clear()
            examples[role] += 1
            with transaction.atomic():
                try:
                    response = case.call(headers=headers)
                    statuses[response.status_code] += 1
                    case.validate_response(response, checks=checks, headers=headers)
                except (FailureGroup, Failure) as exc:
                    group = exc.exceptions if isinstance(exc, FailureGroup) else [exc]
                    detail = ""
                    if VERBOSE:
                        detail = f" <- {case.query} {str(case.body)[:150]} -> {response.content[:200]!r}"
                    for failure in group:
                        if _binary_part_false_alarm(operation, failure) or _nul_refusal(failure, response):
                            continue
                        failures[(operation.label, role)][_failure_line(failure) + detail] += 1
                finally:
                    transaction.set_rollback(True)

        try:
            one()
        except Unsatisfiable:
            pass  # nothing to make invalid but the fixed path parameters

    seeded = time.monotonic() - started
    timings = Counter()
    for result in schema.get_all_operations():
        operation = result.ok()
        operations.append(operation.label)
        fixed = path_parameters(operation.path, world)
        t0 = time.monotonic()
        for role in tokens:
            run(operation, role, GenerationMode.POSITIVE, positive, fixed)
            if len(operation.query) or len(operation.body):
                run(operation, role, GenerationMode.NEGATIVE, negative, fixed)
            if fixed:
                run(operation, role, GenerationMode.POSITIVE, unknown, None)
        if hostile is not None:
            with transaction.atomic():
                _hostile_requests(
                    hostile, operation, fixed, {"HTTP_AUTHORIZATION": f"Token {tokens['lead']}"}, failures, statuses
                )
                transaction.set_rollback(True)
        timings[operation.label] = time.monotonic() - t0

    elapsed = time.monotonic() - started
    summary = (
        f"{len(operations)} operations, {sum(examples.values())} requests ({dict(examples)}), "
        f"statuses {dict(sorted(statuses.items()))}, {elapsed:.0f} s (seeding {seeded:.0f} s)"
    )
    if VERBOSE:
        summary += "\nslowest: " + ", ".join(f"{label} {t:.1f} s" for label, t in timings.most_common(12))
    print(summary)
    report = [
        f"{label} [{role}] x{count}: {line}"
        for (label, role), lines in sorted(failures.items())
        for line, count in lines.items()
    ]
    if os.environ.get("FAIRTONE_SCHEMA_REPORT"):
        with open(os.environ["FAIRTONE_SCHEMA_REPORT"], "w") as out:
            out.write(summary + "\n" + "\n".join(report) + "\n")
    assert not report, f"{len(report)} kinds of failure; {summary}\n" + "\n".join(report)


def test_every_operation_documents_the_errors_it_can_answer():
    """The error answers come from the same few places for every view (``labeling.api.schema``)."""
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            where = f"{method.upper()} {path}"
            assert "503" in codes and "Retry-After" in operation["responses"]["503"]["headers"], where
            assert {"401", "403"} <= codes, where  # the token endpoint too: a bad token, a session without CSRF
            if "{" in path:
                assert "404" in codes, where
            if "requestBody" in operation:
                assert {"400", "415"} <= codes, where
    token = schema["paths"]["/api/auth/token/"]["post"]["responses"]
    assert {"200", "400", "429"} <= set(token)


def test_a_request_django_refuses_is_a_json_400_under_the_api(project, client_for):
    """Too many form fields (``SuspiciousOperation``): Django's 400, as JSON like every API answer."""
    from django.conf import settings as django_settings

    api = client_for(project.created_by)
    body = "&".join(f"f{i}=1" for i in range(django_settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1))
    response = api.post(
        f"/api/projects/{project.pk}/data/bulk/", body, content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json" and response.json()["detail"]
