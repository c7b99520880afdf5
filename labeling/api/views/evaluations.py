"""``/api/projects/{id}/evaluations/``: fairness evaluation runs of models against a release (public, for CI).

Leads and reviewers create and read runs; labelers of the project get 403, anyone else 404 (the one access
rule, ``selectors.project_access``). ``POST`` a results file (multipart) with the release version and how
to read it: 201 with the run and its join report, or 400 saying what was wrong (nothing is stored). The
report is computed in the background: ``GET`` the run until ``status`` is ``done``; then ``report/``,
``files/<name>``, ``gate/`` and ``compare/?a=&b=``. Gates: ``/api/projects/{id}/evaluation-gates/``.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.response import Response

from metrics.gate import ATTRIBUTES as GATE_ATTRIBUTES
from metrics.gate import FAIL_ON

from ... import selectors
from ...converters import ID_PATTERN
from ...errors import error_fields
from ...models import EvaluationGate, EvaluationRun, Membership, Project
from ...services import evaluations as svc
from .releases import _file_response

READERS = (Membership.Role.LEAD, Membership.Role.REVIEWER)
_PROJECT = OpenApiParameter("project_pk", int, OpenApiParameter.PATH, description="Project id.")
_RUN_ID = {"type": "integer", "minimum": 0}


class EvaluationSerializer(serializers.ModelSerializer):
    """A run: its release, status, job progress, join report, options and (when done) the report's summary."""

    release_version = serializers.IntegerField(source="release.version", read_only=True, allow_null=True)
    job = serializers.SerializerMethodField()
    summary = serializers.SerializerMethodField()
    report_url = serializers.SerializerMethodField()

    class Meta:
        model = EvaluationRun
        fields = [
            "id",
            "name",
            "model_name",
            "release_version",
            "status",
            "job",
            "join",
            "options",
            "summary",
            "error",
            "report_url",
            "created_at",
            "finished_at",
        ]

    def get_job(self, run) -> dict | None:
        job = run.job
        if job is None:
            return None
        return {"done": job.done, "total": job.total, "message": job.message, "state": job.status}

    def get_summary(self, run) -> list[str]:
        return list((run.report or {}).get("summary", []))

    def get_report_url(self, run) -> str | None:
        if run.status != EvaluationRun.Status.DONE:
            return None
        return f"/api/projects/{run.project_id}/evaluations/{run.pk}/report/"


class EvaluationCreateSerializer(serializers.Serializer):
    """A results file and how to read it. ``options`` (JSON object): threshold, alpha, min_samples, ...;
    ``figures``: false leaves the figures out (the report and its verdicts are the same)."""

    file = serializers.FileField(help_text="CSV, JSON Lines or Parquet: one row per image (or subject).")
    release = serializers.IntegerField(help_text="Release version (its published images table is joined).")
    name = serializers.CharField(max_length=200)
    model_name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    id_column = serializers.CharField(required=False, allow_blank=True, default="")
    match_on = serializers.ChoiceField(
        choices=[("", "auto"), *[(c, c) for c in svc.MATCH_COLUMNS]], required=False, default=""
    )
    error_column = serializers.CharField(required=False, default="error")
    prediction_column = serializers.CharField(required=False, allow_blank=True, default="")
    truth_column = serializers.CharField(required=False, allow_blank=True, default="")
    error_kind = serializers.ChoiceField(choices=["regression", "classification"], required=False, default="regression")
    min_matched = serializers.IntegerField(required=False, default=20, min_value=3)
    options = serializers.JSONField(required=False, default=dict)

    def validate_options(self, value):
        if not isinstance(value, dict):
            raise serializers.ValidationError("options must be a JSON object")
        return value


class GateSerializer(serializers.ModelSerializer):
    class Meta:
        model = EvaluationGate
        fields = ["id", "name", "rules", "created_at"]
        read_only_fields = ["id", "created_at"]


class _ProjectScoped(viewsets.GenericViewSet):
    filter_backends = []

    def project(self, *roles: str) -> Project:
        project = get_object_or_404(Project.objects.select_related("scale"), pk=self.kwargs["project_pk"])
        selectors.project_access(self.request.user, project, *roles)
        return project


@extend_schema(parameters=[_PROJECT])
class EvaluationViewSet(_ProjectScoped):
    serializer_class = EvaluationSerializer
    queryset = EvaluationRun.objects.none()
    lookup_value_regex = ID_PATTERN
    parser_classes = [MultiPartParser, FormParser, JSONParser]

    def run(self, project: Project, pk) -> EvaluationRun:
        run = project.evaluations.select_related("release", "job", "project").filter(pk=pk).first()
        if run is None:
            raise NotFound("No such evaluation run in this project.")
        return run

    @extend_schema(
        parameters=[OpenApiParameter("model_name", str, description="Only the runs of this model.")],
        responses=EvaluationSerializer(many=True),
    )
    def list(self, request, project_pk=None):
        """The project's runs, newest first (leads and reviewers)."""
        project = self.project(*READERS)
        runs = project.evaluations.select_related("release", "job").order_by("-created_at", "-id")
        if request.query_params.get("model_name"):
            runs = runs.filter(model_name=request.query_params["model_name"])
        page = self.paginate_queryset(runs)
        return self.get_paginated_response(EvaluationSerializer(page, many=True).data)

    @extend_schema(
        request={"multipart/form-data": EvaluationCreateSerializer},
        responses={
            201: EvaluationSerializer,
            400: OpenApiResponse(OpenApiTypes.OBJECT, description="What was wrong."),
            413: OpenApiResponse(
                OpenApiTypes.OBJECT, description="The file is too large, or too wide or long, to be read."
            ),
        },
    )
    def create(self, request, project_pk=None):
        """Upload a model's results and score them against a release (leads and reviewers). 201 with the
        run (its ``join``: matched, unknown, missing); the report follows in the background."""
        project = self.project(*READERS)
        data = EvaluationCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        release = project.releases.filter(version=fields["release"]).first()
        if release is None:
            return Response({"release": [f"This project has no release v{fields['release']}."]}, status=400)
        spec = svc.JoinSpec(
            id_column=fields["id_column"],
            match_on=fields["match_on"],
            error_column=fields["error_column"],
            prediction_column=fields["prediction_column"],
            truth_column=fields["truth_column"],
            error_kind=fields["error_kind"],
            min_matched=fields["min_matched"],
        )
        options = dict(fields["options"])
        # Scoring options may also come as plain form fields (``-F threshold=1.5``); ``options`` wins.
        for key in svc.DEFAULT_OPTIONS:
            if key in request.data and key not in options and request.data.get(key) not in (None, ""):
                options[key] = request.data.get(key)
        try:
            run = svc.evaluation_create(
                project=project,
                user=request.user,
                release=release,
                upload=fields["file"],
                name=fields["name"],
                model_name=fields["model_name"],
                spec=spec,
                options=options,
            )
        except DjangoValidationError as exc:
            body = error_fields(exc)
            if getattr(exc, "join", None):
                body["join"] = exc.join
            # A file refused for its size or shape before it was parsed: 413, with what was too big.
            too_large = getattr(exc, "too_large", False)
            code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE if too_large else status.HTTP_400_BAD_REQUEST
            return Response(body, status=code)
        run = self.run(project, run.pk)
        return Response(EvaluationSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses=EvaluationSerializer)
    def retrieve(self, request, project_pk=None, pk=None):
        """One run: status and progress, the join report, options and summary."""
        return Response(EvaluationSerializer(self.run(self.project(*READERS), pk)).data)

    @extend_schema(responses=OpenApiTypes.OBJECT)
    @action(detail=True, methods=["get"])
    def report(self, request, project_pk=None, pk=None):
        """The run's report.json (the same content as ``python -m metrics report`` writes)."""
        run = self.run(self.project(*READERS), pk)
        path = svc.evaluation_file_name(run, "report.json")
        if path is None:
            raise NotFound(f"No report yet: the run is {run.get_status_display().lower()}.")
        return _file_response(path, filename=f"evaluation-{run.pk}-report.json")

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "path", str, OpenApiParameter.PATH, description="report.json, report.html or figures/<name>.png|svg"
            )
        ],
        responses={(200, "*/*"): OpenApiResponse(OpenApiTypes.BINARY, description="The file, in its own media type.")},
    )
    def files(self, request, project_pk=None, pk=None, path=None):
        """A file of a finished run's report: report.json, report.html or a figure (PNG, SVG)."""
        run = self.run(self.project(*READERS), pk)
        found = svc.evaluation_file_name(run, path or "")
        if found is None:
            raise NotFound("No such file in this run's report.")
        return _file_response(found, filename=f"evaluation-{run.pk}-" + path.replace("/", "-"))

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "fail_on", str, many=True, enum=[*FAIL_ON], description="Ad-hoc rule(s) instead of the project's gates."
            ),
            OpenApiParameter(
                "max_score",
                {
                    "type": "array",
                    "items": {
                        "type": "string",
                        "pattern": rf"^\s*({'|'.join(GATE_ATTRIBUTES)})\s*=\s*[0-9]+(\.[0-9]+)?\s*$",
                    },
                },
                explode=True,
                style="form",
                description=f"Ad-hoc ATTR=VALUE bound(s): ATTR one of {', '.join(GATE_ATTRIBUTES)}, VALUE a number.",
            ),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    @action(detail=True, methods=["get"])
    def gate(self, request, project_pk=None, pk=None):
        """Pass or fail of a finished run against the project's gates (or ad-hoc rules), with reasons.

        ``passed`` is false when any gate fails; a project without gates and no ad-hoc rule uses
        ``fail_on=significant-severe``."""
        project = self.project(*READERS)
        run = self.run(project, pk)
        fail_on = request.query_params.getlist("fail_on")
        bounds = request.query_params.getlist("max_score")
        gates = None
        if fail_on or bounds:
            max_score = {}
            for item in bounds:
                key, _, value = item.partition("=")
                max_score[key.strip()] = value.strip()
            rules = svc.gate_rules_clean({"fail_on": fail_on, "max_score": max_score})
            gates = [EvaluationGate(project=project, name="ad hoc", rules=rules)]
        elif not project.evaluation_gates.exists():
            gates = [EvaluationGate(project=project, name="default", rules={"fail_on": ["significant-severe"]})]
        return Response(svc.gates_check(run, gates))

    @extend_schema(
        parameters=[
            OpenApiParameter("a", _RUN_ID, required=True, description="Run A (e.g. the current model)."),
            OpenApiParameter("b", _RUN_ID, required=True, description="Run B (e.g. the candidate)."),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    @action(detail=False, methods=["get"])
    def compare(self, request, project_pk=None):
        """Two finished runs on the same release: each score side by side, the change B - A, its paired
        bootstrap interval and a paired permutation test over the shared samples."""
        project = self.project(*READERS)
        ids = {}
        for key in ("a", "b"):
            raw = request.query_params.get(key, "")
            if not raw.isdigit():
                return Response({key: ["Give the run's id (a number)."]}, status=400)
            ids[key] = self.run(project, raw)
        return Response(svc.evaluation_compare(ids["a"], ids["b"]))


@extend_schema(parameters=[_PROJECT])
class EvaluationGateViewSet(_ProjectScoped):
    """A project's CI gates: rules every run is checked against (leads and reviewers read; leads edit)."""

    serializer_class = GateSerializer
    queryset = EvaluationGate.objects.none()
    lookup_value_regex = ID_PATTERN

    @extend_schema(responses=GateSerializer(many=True))
    def list(self, request, project_pk=None):
        project = self.project(*READERS)
        page = self.paginate_queryset(project.evaluation_gates.all())
        return self.get_paginated_response(GateSerializer(page, many=True).data)

    @extend_schema(request=GateSerializer, responses={201: GateSerializer})
    def create(self, request, project_pk=None):
        """A gate: ``name`` and ``rules`` {``fail_on``: [significant, significant-moderate, significant-severe,
        severe], ``max_score``: {gender|body_shape|skin_tone|intersectional: number}} (leads)."""
        project = self.project(Membership.Role.LEAD)
        data = request.data if isinstance(request.data, dict) else {}
        rules = data.get("rules", {})
        if not isinstance(rules, dict):
            return Response({"rules": ["Give the rules as a JSON object."]}, status=400)
        gate = svc.gate_create(project, request.user, data.get("name", ""), rules)
        return Response(GateSerializer(gate).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request, project_pk=None, pk=None):
        project = self.project(Membership.Role.LEAD)
        if not svc.gate_delete(project, pk):
            raise NotFound("No such gate in this project.")
        return Response(status=status.HTTP_204_NO_CONTENT)
