"""The lead's dashboards in the API: consensus and labeler quality, and the colorimetric baselines.

Leads only (superusers pass); anyone else gets 404, members with another role included
(``hide_from_other_roles``): labelers never learn these numbers exist. One viewset, so that
the router keeps their URL names (``api-consensus``, ``api-baselines``, ...).
"""

import math

from django.http import Http404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from ... import selectors
from ...models import ImageBaseline, Membership, Project
from ...services import baselines as baseline_services
from ...services import consensus as consensus_services
from ..pagination import PAGE_DESCRIPTION, PAGE_SCHEMA
from ..serializers import JobSerializer

_PHASE = OpenApiParameter("phase", int, description="Phase id (default: main, else the latest phase with labels).")
_CONSENSUS_FLAGS = ("wide_range", "invalid", "any")
_TRUTHY = ("1", "true", "yes", "on", "0", "false", "no", "off")


def _consensus_sorts() -> list[str]:
    return [f"{sign}{name}" for name in consensus_services.SORTABLE for sign in ("", "-")]


def _consensus_query_check(params) -> None:
    """The per-image table's parameters as documented, or a 400 naming each bad one (the table itself
    ignores what it cannot read: a typo would silently show every image)."""
    errors = {}
    if params.get("flag") is not None and params["flag"] not in _CONSENSUS_FLAGS:
        errors["flag"] = f"One of: {', '.join(_CONSENSUS_FLAGS)}."
    for name in consensus_services.BOOLEAN_FILTERS:
        if params.get(name) is not None and params[name].strip().lower() not in _TRUTHY:
            errors[name] = "true or false."
    for name in ("min_range", "max_range"):
        if params.get(name) is not None:
            try:
                if not math.isfinite(float(params[name])):
                    raise ValueError
            except ValueError:
                errors[name] = "A number."
    for name in ("n_unique", "min_labels"):
        if params.get(name) is not None and not (params[name].isascii() and params[name].strip().isdigit()):
            errors[name] = "A whole number, 0 or more."
    if params.get("ordering") is not None and params["ordering"] not in _consensus_sorts():
        errors["ordering"] = f"One of: {', '.join(_consensus_sorts())}."
    if errors:
        raise ValidationError(errors)


class ProjectDashboardViewSet(viewsets.GenericViewSet):
    queryset = Project.objects.select_related("scale")
    filter_backends = []

    def get_object(self) -> Project:
        return self._project(Membership.Role.LEAD)

    def _project(self, *roles: str) -> Project:
        project = super().get_object()
        selectors.project_access(self.request.user, project, *roles, hide_from_other_roles=True)
        return project

    # --- consensus ----------------------------------------------------------------

    @extend_schema(
        parameters=[_PHASE],
        responses={200: OpenApiTypes.OBJECT},
        description=(
            "Per phase: consensus rates, % exact / within one tone, Krippendorff's alpha (ordinal and "
            "interval), Fleiss' kappa, k-of-n agreement, unique values "
            "per image, label distribution, labeler x labeler quadratic-weighted kappa; per labeler: "
            "workload, baseline and its drift, bias against the other labelers, alpha without them, "
            "test-retest. Rates and shares carry a 95% interval (`low`, `high`, `n`); so do alpha and the "
            "kappas (BCa bootstrap over images; the matrix as `low` / `high` / `too_wide`). A number computed "
            "from too little data is null with a `reason`: fewer than "
            f"{consensus_services.MIN_IMAGES} images with 2+ labels, or an interval wider than "
            f"{consensus_services.MAX_INTERVAL_WIDTH:g} (shares) or {consensus_services.MAX_COEFFICIENT_WIDTH:g} "
            "(coefficients on the -1 to 1 scale; `too_wide` true, the interval kept). Labelers by pseudonym."
        ),
    )
    @action(detail=True, methods=["get"], url_path="consensus", url_name="consensus")
    def consensus(self, request, pk=None):
        """Consensus and labeler quality of a project, with one phase in detail (leads only)."""
        project = self.get_object()
        try:
            phase = selectors.consensus_phase(project, request.query_params.get("phase"))
        except Http404:
            raise NotFound("No such phase in this project.") from None
        return Response(consensus_services.project_consensus(project, phase))

    @extend_schema(
        parameters=[
            _PHASE,
            OpenApiParameter("flag", str, enum=list(_CONSENSUS_FLAGS)),
            *[OpenApiParameter(name, bool) for name in consensus_services.BOOLEAN_FILTERS],
            OpenApiParameter("min_range", float),
            OpenApiParameter("max_range", float),
            OpenApiParameter("n_unique", {"type": "integer", "minimum": 0}),
            OpenApiParameter("min_labels", {"type": "integer", "minimum": 0}, description="valid labels"),
            OpenApiParameter("ordering", str, enum=_consensus_sorts(), description="'-' for descending."),
            OpenApiParameter("page", PAGE_SCHEMA, description=PAGE_DESCRIPTION),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    @action(detail=True, methods=["get"], url_path="consensus/images", url_name="consensus-images")
    def consensus_images(self, request, pk=None):
        """Per-image consensus (the data-card fields) of one phase, filtered, sorted and paginated
        (``count``, ``next``, ``previous``, ``results``, and the ``phase``)."""
        project = self.get_object()
        try:
            phase = selectors.consensus_phase(project, request.query_params.get("phase"), default_selected=True)
        except Http404:
            raise NotFound("No such phase, or no labels yet.") from None
        _consensus_query_check(request.query_params)
        data, rows = selectors.consensus_image_rows(phase, request.query_params)
        page = self.paginate_queryset(rows)
        response = self.get_paginated_response(selectors.consensus_image_records(project, data, page))
        response.data["phase"] = data["summary"]["phase"]
        return response

    # --- colorimetric baselines -------------------------------------------------------

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "flag",
                str,
                enum=["", "none", *baseline_services.FLAG_NAMES],
                description="Only results with this quality flag (none: without any; empty: every result)",
            ),
            OpenApiParameter(
                "ita_class",
                str,
                enum=["", *baseline_services.ITA_CLASS_NAMES],
                description="Only results of this ITA class",
            ),
            OpenApiParameter("status", str, enum=["", *ImageBaseline.Status.values]),
            OpenApiParameter("parameters_hash", str, description="Results of these parameters, not the current ones"),
            OpenApiParameter("page", PAGE_SCHEMA, description=PAGE_DESCRIPTION),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    @action(detail=True, methods=["get"], url_path="baselines", url_name="baselines")
    def baselines(self, request, pk=None):
        """Results for the project's current parameters (or ``?parameters_hash=``).

        Filters: ``flag`` (a flag name, or ``none``), ``ita_class``, ``status`` (ok/failed).
        """
        project = self.get_object()
        qs, _chosen = selectors.baseline_rows(project, request.query_params)
        page = self.paginate_queryset(qs)
        response = self.get_paginated_response([selectors.baseline_record(r) for r in page])
        parameters = baseline_services.baseline_parameters_effective(project)
        mapping = baseline_services.FITZPATRICK_MAPPINGS[parameters["fitzpatrick_mapping"]]
        response.data["parameters"] = parameters
        response.data["parameters_hash"] = baseline_services.baseline_parameters_hash(parameters)
        response.data["code_version"] = baseline_services.BASELINE_CODE_VERSION
        response.data["fitzpatrick_mapping_source"] = mapping.source
        return response

    @extend_schema(
        request={
            "application/json": {
                "type": "object",
                "properties": {
                    "parameters": {
                        "type": "object",
                        "nullable": True,
                        "description": "Overrides of the project's baseline parameters (names as on the page).",
                    },
                    "image_ids": {
                        "type": "array",
                        "items": {"type": "integer"},
                        "nullable": True,
                        "description": "Only these images (default: every image)",
                    },
                },
                "additionalProperties": False,
            }
        },
        responses={202: JobSerializer},
    )
    @action(detail=True, methods=["post"], url_path="baselines/run", url_name="baselines-run")
    def baselines_run(self, request, pk=None):
        """Start a run: ``{"parameters": {...}, "image_ids": [...]}`` (both optional). 202 with the job."""
        project = self.get_object()
        data = request.data if isinstance(request.data, dict) else None
        if data is None:
            raise ValidationError({"detail": "Send a JSON object."})
        unknown = set(data) - {"parameters", "image_ids"}
        if unknown:
            raise ValidationError({k: "Unknown field (use parameters, image_ids)." for k in sorted(unknown)})
        image_ids = data.get("image_ids")
        if image_ids is not None and (
            not isinstance(image_ids, list)
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in image_ids)
        ):
            raise ValidationError({"image_ids": "A list of image ids (integers)."})
        job = baseline_services.baseline_run_start(
            project=project, parameters=data.get("parameters"), image_ids=image_ids, user=request.user
        )
        job.refresh_from_db()
        payload = JobSerializer(job).data
        payload["url"] = reverse("job-detail", args=[job.pk])
        return Response(payload, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "phase",
                {"type": "string", "pattern": "^(all|[0-9]+)$"},
                description="Phase id, or all (default); an id of no phase of this project: 404",
            ),
            OpenApiParameter(
                "exclude_flagged",
                str,
                enum=["1", "0", "true", "false"],
                description="1 (default, as on the page: a flagged number may not be skin) or 0 to keep flagged images",
            ),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    @action(detail=True, methods=["get"], url_path="baselines/comparison", url_name="baselines-comparison")
    def baselines_comparison(self, request, pk=None):
        """Mean human label vs ITA and apparent albedo: ``?phase=<id>|all&exclude_flagged=1|0``.

        Flagged images are left out unless ``exclude_flagged=0`` (the page does the same)."""
        project = self.get_object()
        value = request.query_params.get("phase")
        if value and value.isascii() and value.isdigit() and not project.phases.filter(pk=int(value)).exists():
            raise NotFound("No such phase in this project.")
        phase = selectors.baseline_phase_choice(project, value)
        raw = request.query_params.get("exclude_flagged", "1").strip().lower()
        if raw not in ("1", "true", "0", "false"):
            raise ValidationError({"exclude_flagged": "1 (leave flagged images out, the default) or 0."})
        exclude_flagged = raw in ("1", "true")
        return Response(selectors.baseline_comparison_cached(project, phase, exclude_flagged))

    # --- the baseline audited on the project's own photos (issue 21) ---------------------------------

    @extend_schema(
        responses={200: OpenApiTypes.OBJECT},
        description=(
            "The automatic baseline audited on this project's labelled images: per labelled (consensus) tone "
            "the share of images in which the detector found a face (`coverage`: `k`, `n`, `value`, Wilson "
            "`ci_low` / `ci_high`), ITA, L* and hue angle h* (median, quartiles), Spearman's rho of the labels "
            "against ITA across every image and within the light, middle and deep bands (bootstrap interval), "
            "and `gap`: the light band's coverage minus the deep band's with Newcombe's interval and Fisher's "
            "test; `warning` is true when the interval lies above 0 (the deepest tones' faces are found less "
            "often beyond chance), null when a band has no image. `sentence` says it in words. "
            "`mask_validation`: the latest tone-stratified mask sample's ITA errors per tone, or null. "
            "The project's leads and fairness reviewers only."
        ),
    )
    @action(detail=True, methods=["get"], url_path="baselines/audit", url_name="baselines-audit")
    def baselines_audit(self, request, pk=None):
        """The baseline's coverage, ITA and rank agreement per labelled tone, and the coverage gap."""
        project = self._project(Membership.Role.LEAD, Membership.Role.REVIEWER)
        return Response(selectors.baseline_audit_cached(project))

    @extend_schema(
        request={
            "application/json": {
                "type": "object",
                "properties": {
                    "per_tone": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": baseline_services.MAX_PER_TONE,
                        "description": f"Images per labelled tone (default {baseline_services.DEFAULT_PER_TONE}).",
                    },
                    "seed": {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": 2**31 - 1,
                        "nullable": True,
                        "description": "Seed of the draw (default: a random one, recorded).",
                    },
                },
                "additionalProperties": False,
            }
        },
        responses={201: OpenApiTypes.OBJECT},
    )
    @action(detail=True, methods=["post"], url_path="baselines/mask-sample", url_name="baselines-mask-sample")
    def baselines_mask_sample(self, request, pk=None):
        """Draw a sample stratified by labelled tone for skin masks (leads): 201 with its report."""
        project = self.get_object()
        data = request.data if isinstance(request.data, dict) else None
        if data is None:
            raise ValidationError({"detail": "Send a JSON object."})
        unknown = set(data) - {"per_tone", "seed"}
        if unknown:
            raise ValidationError({k[:60]: "Unknown field (use per_tone, seed)." for k in sorted(unknown)})
        sample = baseline_services.mask_sample_propose(
            project=project,
            user=request.user,
            per_tone=data.get("per_tone", baseline_services.DEFAULT_PER_TONE),
            seed=data.get("seed"),
        )
        return Response(baseline_services.mask_sample_report(sample), status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    @action(
        detail=True,
        methods=["get"],
        url_path="baselines/mask-sample/latest",
        url_name="baselines-mask-sample-latest",
    )
    def baselines_mask_sample_latest(self, request, pk=None):
        """The latest mask sample's items and per-tone ITA errors against the masks (leads, reviewers)."""
        project = self._project(Membership.Role.LEAD, Membership.Role.REVIEWER)
        sample = project.mask_samples.first()
        if sample is None:
            raise NotFound("No mask sample yet: a lead draws one (POST baselines/mask-sample/).")
        return Response(baseline_services.mask_sample_report(sample))

    @extend_schema(
        request={
            "application/json": {
                "type": "object",
                "properties": {
                    "points": {
                        "type": "array",
                        "minItems": 3,
                        "maxItems": 2000,
                        "items": {
                            "type": "array",
                            "minItems": 2,
                            "maxItems": 2,
                            "items": {"type": "number", "minimum": 0, "maximum": 1},
                        },
                        "description": "The polygon's vertices as fractions of the image's width and height.",
                    }
                },
                "required": ["points"],
                "additionalProperties": False,
            }
        },
        responses={200: OpenApiTypes.OBJECT},
    )
    @action(
        detail=True,
        methods=["post"],
        url_path=r"baselines/mask-sample/items/(?P<item_id>[0-9]{1,18})/polygon",
        url_name="baselines-mask-polygon",
    )
    def baselines_mask_polygon(self, request, pk=None, item_id=None):
        """Store a skin polygon drawn for a sample's image as its skin mask, and score it (leads)."""
        project = self.get_object()
        item = selectors.mask_sample_item(project, item_id)
        data = request.data if isinstance(request.data, dict) else None
        if data is None or set(data) != {"points"}:
            raise ValidationError({"points": 'Send {"points": [[x, y], ...]}.'})
        item = baseline_services.mask_sample_polygon_save(item=item, points=data["points"], user=request.user)
        (row,) = [i for i in baseline_services.mask_sample_report(item.sample)["items"] if i["id"] == item.pk]
        return Response(row)
