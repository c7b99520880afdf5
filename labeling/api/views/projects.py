"""``/api/projects/``: projects, their members, images, imports, phases, calibration and jobs."""

from django.db.models import Q
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.response import Response

from ... import selectors
from ...converters import ID_PATTERN
from ...models import Membership, Phase, Project
from ...services import phases as phase_services
from ...services import project_lifecycle
from ...services import projects as project_services
from ...services.image_attributes import image_attributes_apply
from ...services.imports.manifest import MAX_MANIFEST_BYTES
from .. import serializers as s
from .common import ATTRIBUTE_FILTER, MAX_ID, phase_for_role
from .imports import import_from_request


class ProjectViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = s.ProjectSerializer
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Project.objects.none()
        qs = selectors.projects_for(self.request.user).select_related("scale")
        if self.action == "list":
            # Archived projects are out of the default list; ?archived=true lists them instead.
            raw = self.request.query_params.get("archived", "false").strip().lower()
            if raw not in ("1", "true", "yes", "0", "false", "no"):
                raise ValidationError({"archived": "true or false."})
            qs = qs.filter(archived_at__isnull=raw not in ("1", "true", "yes"))
        return qs

    @extend_schema(
        parameters=[OpenApiParameter("archived", bool, description="true: the archived projects instead of the others")]
    )
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "confirm",
                bool,
                description="true: delete even though the project has dataset releases (they are deleted too)",
            )
        ],
        responses={204: None},
    )
    def destroy(self, request, pk=None):
        """Delete the project with its images, labels, releases, evaluations and files (leads only). Refused while
        it has releases unless ``confirm=true`` (query parameter or body), and while a release or an evaluation is
        being computed."""
        project = self.get_object(Membership.Role.LEAD)
        raw = request.query_params.get(
            "confirm", request.data.get("confirm", "") if hasattr(request.data, "get") else ""
        )
        confirm = str(raw).strip().lower() in ("1", "true", "yes")
        project_lifecycle.project_delete(project=project, user=request.user, confirm=confirm)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses=s.ProjectSerializer)
    @action(detail=True, methods=["post"])
    def archive(self, request, pk=None):
        """Archive the project (leads): out of the default lists, read-only (no labels, imports or phase changes)."""
        project = self.get_object(Membership.Role.LEAD)
        project_lifecycle.project_archive(project=project, user=request.user)
        return Response(self.get_serializer(project).data)

    @extend_schema(request=None, responses=s.ProjectSerializer)
    @action(detail=True, methods=["post"])
    def unarchive(self, request, pk=None):
        """Make an archived project listed and writable again (leads)."""
        project = self.get_object(Membership.Role.LEAD)
        project_lifecycle.project_unarchive(project=project, user=request.user)
        return Response(self.get_serializer(project).data)

    def get_object(self, *roles: str) -> Project:
        """The project, if the requester has one of ``roles`` in it (any role when none is named; a lead's to
        change it, checked here before its body is read: a labeler's bad PATCH is a 403, not field errors)."""
        if not roles and self.action in ("update", "partial_update"):
            roles = (Membership.Role.LEAD,)
        project = super().get_object()
        self.membership = selectors.project_access(self.request.user, project, *roles)
        return project

    def perform_create(self, serializer):
        if not selectors.can_create_projects(self.request.user):
            raise PermissionDenied("Creating projects needs staff status or the 'add project' permission.")
        serializer.instance = project_services.project_create(created_by=self.request.user, **serializer.validated_data)

    def perform_update(self, serializer):
        selectors.project_access(self.request.user, serializer.instance, Membership.Role.LEAD)
        serializer.instance = project_services.project_update(project=serializer.instance, **serializer.validated_data)

    @extend_schema(methods=["GET"], responses=s.MembershipSerializer(many=True))
    @extend_schema(methods=["POST"], request=s.MembershipCreateSerializer, responses={201: s.MembershipSerializer})
    @action(detail=True, methods=["get", "post"], pagination_class=None)
    def members(self, request, pk=None):
        project = self.get_object(Membership.Role.LEAD)
        if request.method == "GET":
            return Response(s.MembershipSerializer(project.memberships.select_related("user"), many=True).data)
        data = s.MembershipCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        m = project_services.member_add_or_create(project=project, added_by=request.user, **data.validated_data)
        return Response(s.MembershipSerializer(m).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.MembershipUpdateSerializer, responses=s.MembershipSerializer)
    @action(
        detail=True, methods=["patch"], url_path=r"members/(?P<member_id>" + ID_PATTERN + ")", pagination_class=None
    )
    def member(self, request, pk=None, member_id=None):
        """Change a member's role, or deactivate / reactivate them (leads only; audited). The project's last
        active lead can be neither demoted nor deactivated."""
        project = self.get_object(Membership.Role.LEAD)
        membership = None
        if int(member_id) <= MAX_ID:
            membership = project.memberships.select_related("user").filter(pk=int(member_id)).first()
        if membership is None:
            raise NotFound("No such member in this project.")
        data = s.MembershipUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        m = project_services.member_update(membership=membership, **data.validated_data)
        return Response(s.MembershipSerializer(m).data)

    @extend_schema(
        parameters=[
            OpenApiParameter("subject", str, description="Subject id"),
            OpenApiParameter(
                "attr",
                {"type": "string", "pattern": ATTRIBUTE_FILTER},
                description="Attribute filter key:value, equality only (repeatable); the key: letters, digits, single _",
            ),
            OpenApiParameter(
                "phase", {"type": "integer", "minimum": 0, "maximum": MAX_ID}, description="Only images of this phase"
            ),
            OpenApiParameter("search", str, description="Part of the image's own id or file name"),
        ],
        responses=s.ImageSerializer(many=True),
    )
    @action(detail=True, methods=["get"])
    def images(self, request, pk=None):
        project = self.get_object(Membership.Role.LEAD, Membership.Role.REVIEWER)
        qs = project.images.select_related("subject").order_by("id")
        if subject := request.query_params.get("subject"):
            qs = qs.filter(subject__external_id=subject)
        if search := request.query_params.get("search", "").strip()[:200]:
            # The image's own id (as in the lead's manifest) or its file name.
            qs = qs.filter(Q(external_id__icontains=search) | Q(original_filename__icontains=search))
        if phase := request.query_params.get("phase"):
            if not (phase.isascii() and phase.isdigit()) or int(phase) > MAX_ID:
                raise ValidationError({"phase": "A phase id."})
            qs = qs.filter(phase_images__phase_id=int(phase))
        filters = {}
        for item in request.query_params.getlist("attr"):
            key, sep, value = item.partition(":")
            if not sep or not selectors.attribute_key_valid(key):
                raise ValidationError(
                    {"attr": "Use attr=key:value (equality only) with a key of letters, digits and single _."}
                )
            filters[key] = value
        qs = selectors.image_filter_by_attributes(qs, filters)
        page = self.paginate_queryset(qs)
        return self.get_paginated_response(s.ImageSerializer(page, many=True).data)

    @extend_schema(
        request={
            "multipart/form-data": {
                "type": "object",
                "properties": {
                    "files": {"type": "array", "items": {"type": "string", "format": "binary"}},
                    "archive": {"type": "string", "format": "binary"},
                    "manifest": {"type": "string", "format": "binary"},
                    "folder": {"type": "string", "description": "A folder on the server (staff only)"},
                },
            }
        },
        responses={201: s.ImportBatchSerializer},
        methods=["POST"],
    )
    @extend_schema(methods=["GET"], responses=s.ImportBatchSerializer(many=True))
    @action(detail=True, methods=["get", "post"], parser_classes=[MultiPartParser, FormParser, JSONParser])
    def imports(self, request, pk=None):
        """List imports, or import images: ``files`` (many), an ``archive`` (zip), or a ``manifest``
        (CSV/JSON Lines) with an optional ``archive`` or server ``folder``. Returns the per-file report."""
        project = self.get_object(Membership.Role.LEAD)
        if request.method == "GET":
            page = self.paginate_queryset(project.imports.all())
            return self.get_paginated_response(
                s.ImportBatchSerializer(page, many=True, context={"request": request}).data
            )
        batch = import_from_request(project, request)
        return Response(s.ImportBatchSerializer(batch).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request={
            "multipart/form-data": {
                "type": "object",
                "properties": {
                    "manifest": {"type": "string", "format": "binary", "description": "CSV or JSON Lines"},
                    "dry_run": {"type": "boolean", "description": "true: report only, change nothing"},
                },
                "required": ["manifest"],
            }
        },
        # 400: the report (rows rejected; its shape is ImageAttributesReport) or a field error (no readable manifest).
        responses={200: s.ImageAttributesReportSerializer},
    )
    @action(detail=True, methods=["post"], url_path="image-attributes", parser_classes=[MultiPartParser, FormParser])
    def image_attributes(self, request, pk=None):
        """Apply a manifest (the import's format) to images already in the project (leads), matched by
        ``image_id`` or file name: subject ids and attributes. All rows or none: a rejected row answers 400 with the
        report and changes nothing. The report says per row: updated, unchanged, unknown or rejected (why)."""
        project = self.get_object(Membership.Role.LEAD)
        manifest = request.FILES.get("manifest")
        if manifest is None:
            raise ValidationError({"manifest": "Send the manifest file (CSV or JSON Lines) as 'manifest'."})
        raw = str(request.data.get("dry_run", "false")).strip().lower()
        if raw not in ("1", "true", "yes", "0", "false", "no", ""):
            raise ValidationError({"dry_run": "true or false."})
        data = manifest.read(MAX_MANIFEST_BYTES + 1)
        report = image_attributes_apply(
            project=project, data=data, name=manifest.name, user=request.user, dry_run=raw in ("1", "true", "yes")
        )
        failed = report["counts"]["rejected"] > 0
        return Response(report, status=status.HTTP_400_BAD_REQUEST if failed else status.HTTP_200_OK)

    @extend_schema(
        responses=phase_for_role(many=True),
        description="A lead or reviewer sees every phase in full; a labeler, the phases they take part in, briefly.",
    )
    @action(detail=True, methods=["get"], pagination_class=None)
    def phases(self, request, pk=None):
        project = self.get_object()
        m = self.membership
        qs = project.phases.order_by("id")
        if m is not None and m.role == Membership.Role.LABELER:
            qs = qs.filter(assignments__labeler=m).exclude(status=Phase.Status.DRAFT).distinct()
            return Response(s.LabelerPhaseSerializer(qs, many=True).data)
        return Response(s.PhaseSerializer(qs, many=True).data)

    @extend_schema(request=s.CalibrationConfigureSerializer, responses=s.PhaseSerializer(many=True))
    @action(detail=True, methods=["post"], url_path="calibration")
    def calibration(self, request, pk=None):
        """Choose the calibration set (random with a recorded seed, or by hand) and split it."""
        project = self.get_object(Membership.Role.LEAD)
        data = s.CalibrationConfigureSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        phases = phase_services.calibration_configure(project=project, **data.validated_data)
        return Response(s.PhaseSerializer(phases, many=True).data)

    @extend_schema(responses=s.JobSerializer(many=True))
    @action(detail=True, methods=["get"])
    def jobs(self, request, pk=None):
        project = self.get_object(Membership.Role.LEAD)
        page = self.paginate_queryset(project.jobs.all())
        return self.get_paginated_response(s.JobSerializer(page, many=True).data)
