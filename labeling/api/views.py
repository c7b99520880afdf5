"""The REST API. Views are thin: they check roles, validate payloads and call services."""

from django.db.models import Count, Q
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.response import Response

from .. import selectors
from ..models import Image, ImportBatch, Job, Label, Membership, Phase, Project, Scale
from ..services import imports as import_services
from ..services import labels as label_services
from ..services import phases as phase_services
from ..services import projects as project_services
from ..services.scales import scale_create_custom
from . import serializers as s
from .permissions import LABELER, LEAD, REVIEWER, project_role


class ScaleViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = s.ScaleSerializer
    pagination_class = None

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Scale.objects.none()
        return Scale.objects.filter(Q(is_builtin=True) | Q(created_by=self.request.user)).prefetch_related("tones")

    @extend_schema(request=s.ScaleCreateSerializer, responses=s.ScaleSerializer)
    def create(self, request):
        data = s.ScaleCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        scale = scale_create_custom(created_by=request.user, **data.validated_data)
        return Response(s.ScaleSerializer(scale).data, status=status.HTTP_201_CREATED)


class ProjectViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = s.ProjectSerializer
    http_method_names = ["get", "post", "patch", "head", "options"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Project.objects.none()
        return selectors.projects_for(self.request.user).select_related("scale")

    def get_object(self):
        project = super().get_object()
        project_role(self.request, project)
        return project

    def perform_create(self, serializer):
        if not selectors.can_create_projects(self.request.user):
            raise PermissionDenied("Creating projects needs staff status or the 'add project' permission.")
        serializer.instance = project_services.project_create(created_by=self.request.user, **serializer.validated_data)

    def perform_update(self, serializer):
        project_role(self.request, serializer.instance, LEAD)
        serializer.instance = project_services.project_update(project=serializer.instance, **serializer.validated_data)

    @extend_schema(request=s.MembershipCreateSerializer, responses=s.MembershipSerializer(many=True))
    @action(detail=True, methods=["get", "post"])
    def members(self, request, pk=None):
        project = self.get_object()
        if request.method == "GET":
            project_role(request, project, LEAD)
            return Response(s.MembershipSerializer(project.memberships.select_related("user"), many=True).data)
        project_role(request, project, LEAD)
        data = s.MembershipCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = dict(data.validated_data)
        from django.contrib.auth import get_user_model

        user = get_user_model().objects.filter(username=v["username"]).first()
        profile = {k: v.get(k, "") for k in ("expertise", "region_of_upbringing", "gender")}
        if user is None:
            if not v.get("password"):
                raise ValidationError({"password": "A new person needs a password (at least 8 characters)."})
            m = project_services.labeler_create(
                project=project,
                username=v["username"],
                password=v["password"],
                role=v["role"],
                pseudonym=v.get("pseudonym", ""),
                **profile,
            )
        else:
            m = project_services.membership_add(
                project=project, user=user, role=v["role"], pseudonym=v.get("pseudonym", ""), **profile
            )
        return Response(s.MembershipSerializer(m).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[
            OpenApiParameter("subject", str, description="Subject id"),
            OpenApiParameter("attr", str, description="Attribute filter key:value (repeatable)"),
            OpenApiParameter("phase", int, description="Only images of this phase"),
        ],
        responses=s.ImageSerializer(many=True),
    )
    @action(detail=True, methods=["get"])
    def images(self, request, pk=None):
        project = self.get_object()
        project_role(request, project, LEAD, REVIEWER)
        qs = project.images.select_related("subject").order_by("id")
        if subject := request.query_params.get("subject"):
            qs = qs.filter(subject__external_id=subject)
        if phase := request.query_params.get("phase"):
            if not phase.isdigit():
                raise ValidationError({"phase": "A phase id."})
            qs = qs.filter(phase_images__phase_id=int(phase))
        filters = {}
        for item in request.query_params.getlist("attr"):
            key, sep, value = item.partition(":")
            if not sep or not key.replace("_", "").isalnum():
                raise ValidationError({"attr": "Use attr=key:value with a key of letters, digits and _."})
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
                    "folder": {"type": "string"},
                },
            }
        },
        responses=s.ImportBatchSerializer,
    )
    @action(detail=True, methods=["get", "post"], parser_classes=[MultiPartParser, FormParser, JSONParser])
    def imports(self, request, pk=None):
        """List imports, or import images: ``files`` (many), an ``archive`` (zip), or a ``manifest``
        (CSV/JSON Lines) with an optional ``archive`` or server ``folder``. Returns the per-file report."""
        project = self.get_object()
        project_role(request, project, LEAD)
        if request.method == "GET":
            qs = project.imports.all()
            page = self.paginate_queryset(qs)
            return self.get_paginated_response(
                s.ImportBatchSerializer(page, many=True, context={"request": request}).data
            )
        batch = import_from_request(project, request)
        return Response(s.ImportBatchSerializer(batch).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses=s.PhaseSerializer(many=True))
    @action(detail=True, methods=["get"])
    def phases(self, request, pk=None):
        project = self.get_object()
        m = project_role(request, project)
        qs = project.phases.order_by("id")
        if m is not None and m.role == LABELER:
            qs = qs.filter(assignments__labeler=m).exclude(status=Phase.Status.DRAFT).distinct()
            return Response(s.LabelerPhaseSerializer(qs, many=True).data)
        return Response(s.PhaseSerializer(qs, many=True).data)

    @extend_schema(request=s.CalibrationConfigureSerializer, responses=s.PhaseSerializer(many=True))
    @action(detail=True, methods=["post"], url_path="calibration")
    def calibration(self, request, pk=None):
        """Choose the calibration set (random with a recorded seed, or by hand) and split it."""
        project = self.get_object()
        project_role(request, project, LEAD)
        data = s.CalibrationConfigureSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        phases = phase_services.calibration_configure(project=project, **data.validated_data)
        return Response(s.PhaseSerializer(phases, many=True).data)

    @extend_schema(responses=s.JobSerializer(many=True))
    @action(detail=True, methods=["get"])
    def jobs(self, request, pk=None):
        project = self.get_object()
        project_role(request, project, LEAD)
        page = self.paginate_queryset(project.jobs.all())
        return self.get_paginated_response(s.JobSerializer(page, many=True).data)


def assignment_payload(assignment) -> dict:
    """What a labeler gets about the next image: nothing but the picture (blind labeling).

    The same fields as ``AssignmentSerializer``, built directly: this is on every submit.
    """
    image = assignment.image
    return {
        "id": assignment.id,
        "position": assignment.position,
        "kind": assignment.kind,
        "image": {
            "id": image.id,
            "width": image.width,
            "height": image.height,
            "display_url": f"/images/{image.id}/file/display/",
        },
    }


def import_from_request(project: Project, request) -> ImportBatch:
    files = request.FILES.getlist("files")
    archive = request.FILES.get("archive")
    manifest = request.FILES.get("manifest")
    data = request.data if isinstance(request.data, dict) else {}
    folder = data.get("folder") or None
    if folder is not None and not isinstance(folder, str):
        raise ValidationError({"folder": "A folder path on the server."})
    if folder is not None and not selectors.can_import_from_server(request.user):
        raise PermissionDenied("Importing from a server folder is for staff.")
    if manifest is not None:
        import zipfile

        zf = None
        if archive is not None:
            try:
                zf = zipfile.ZipFile(archive)
            except (zipfile.BadZipFile, OSError):
                raise ValidationError({"archive": "This is not a readable zip archive."}) from None
        return import_services.import_manifest(
            project=project, manifest=manifest, user=request.user, name=manifest.name, archive=zf, folder=folder
        )
    if archive is not None:
        return import_services.import_zip(project=project, fileobj=archive, user=request.user, name=archive.name)
    if files:
        return import_services.import_files(project=project, files=[(f.name, f) for f in files], user=request.user)
    raise ValidationError({"detail": "Send image files (files), a zip archive (archive) or a manifest (manifest)."})


class ImportBatchViewSet(viewsets.GenericViewSet, mixins.RetrieveModelMixin):
    serializer_class = s.ImportBatchSerializer
    queryset = ImportBatch.objects.select_related("project").prefetch_related("items")

    def get_object(self):
        batch = super().get_object()
        project_role(self.request, batch.project, LEAD)
        return batch


class ImageViewSet(viewsets.GenericViewSet, mixins.RetrieveModelMixin):
    serializer_class = s.ImageSerializer
    queryset = Image.objects.select_related("project", "subject")

    def get_object(self):
        image = super().get_object()
        project_role(self.request, image.project, LEAD, REVIEWER)
        return image

    @extend_schema(responses=s.LabelSerializer(many=True))
    @action(detail=True, methods=["get"])
    def labels(self, request, pk=None):
        image = self.get_object()
        project_role(request, image.project, LEAD)
        labels = image.labels.select_related("labeler").order_by("phase_id", "labeler__pseudonym")
        return Response(s.LabelSerializer(labels, many=True).data)

    @extend_schema(request=s.RelabelSerializer, responses={201: None})
    @action(detail=True, methods=["post"])
    def relabel(self, request, pk=None):
        """Send this image back to chosen labelers (post-calibration)."""
        image = self.get_object()
        project_role(request, image.project, LEAD)
        data = s.RelabelSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        labelers = list(image.project.memberships.filter(id__in=data.validated_data["labeler_ids"]))
        if len(labelers) != len(set(data.validated_data["labeler_ids"])):
            raise ValidationError({"labeler_ids": "Some ids are not members of this project."})
        created = label_services.relabel_request(
            image=image, labelers=labelers, reason=data.validated_data["reason"], user=request.user
        )
        return Response({"requested": len(created)}, status=status.HTTP_201_CREATED)


class PhaseViewSet(viewsets.GenericViewSet, mixins.RetrieveModelMixin):
    serializer_class = s.PhaseSerializer
    queryset = Phase.objects.select_related("project", "project__scale")

    def retrieve(self, request, *args, **kwargs):
        phase = self.get_object()
        if self.membership is not None and self.membership.role == LABELER:
            return Response(s.LabelerPhaseSerializer(phase).data)
        return Response(s.PhaseSerializer(phase).data)

    def get_object(self):
        phase = super().get_object()
        self.membership = project_role(self.request, phase.project)
        if (
            self.membership
            and self.membership.role == LABELER
            and not phase.assignments.filter(labeler=self.membership).exists()
        ):
            raise NotFound()
        return phase

    def _lead(self):
        phase = self.get_object()
        project_role(self.request, phase.project, LEAD)
        return phase

    def _labeler(self) -> tuple[Phase, Membership]:
        """The phase and the requester's labeler membership (the labeling hot path: two queries).

        A labeler of the project who takes no part in the phase gets empty results
        (``next`` answers 404), never another labeler's data.
        """
        phase = super().get_object()
        m = project_role(self.request, phase.project, LABELER)
        if m is None:  # a superuser without a membership
            raise NotFound()
        m.user = self.request.user
        m.project = phase.project
        return phase, m

    @extend_schema(request=s.PhaseOpenSerializer, responses=s.PhaseSerializer)
    @action(detail=True, methods=["post"])
    def open(self, request, pk=None):
        phase = self._lead()
        data = s.PhaseOpenSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        phase = phase_services.phase_open(phase=phase, **data.validated_data)
        return Response(s.PhaseSerializer(phase).data)

    @extend_schema(request=None, responses=s.PhaseSerializer)
    @action(detail=True, methods=["post"])
    def close(self, request, pk=None):
        phase = phase_services.phase_close(phase=self._lead())
        return Response(s.PhaseSerializer(phase).data)

    @extend_schema(request=s.LabelsPerImageSerializer, responses=s.PhaseSerializer)
    @action(detail=True, methods=["post"], url_path="labels-per-image")
    def labels_per_image(self, request, pk=None):
        phase = self._lead()
        data = s.LabelsPerImageSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        added = phase_services.phase_set_labels_per_image(phase=phase, **data.validated_data)
        phase.refresh_from_db()
        return Response({**s.PhaseSerializer(phase).data, "assignments_added": added})

    @action(detail=True, methods=["get"])
    def progress(self, request, pk=None):
        phase = self.get_object()
        m = self.membership
        report = phase_services.phase_progress(phase)
        if m is not None and m.role == LABELER:
            mine = [r for r in report["labelers"] if r["labeler_id"] == m.id]
            return Response({"phase_id": phase.id, "status": phase.status, "me": mine[0] if mine else None})
        project_role(request, phase.project, LEAD)
        return Response(report)

    @action(detail=True, methods=["get"])
    def next(self, request, pk=None):
        """My next image in this phase, the one after it (to preload), and my progress."""
        phase, m = self._labeler()
        counts = phase.assignments.filter(labeler=m).aggregate(
            total=Count("id"), done=Count("id", filter=Q(done_at__isnull=False))
        )
        if not counts["total"]:
            raise NotFound()
        queue = selectors.assignment_queue(phase=phase, labeler=m, limit=2)
        return Response(
            {
                "phase": {"id": phase.id, "kind": phase.kind, "status": phase.status},
                "done": counts["done"],
                "total": counts["total"],
                "current": assignment_payload(queue[0]) if queue else None,
                "preload": assignment_payload(queue[1]) if len(queue) > 1 else None,
            }
        )

    @extend_schema(request=s.LabelSubmitSerializer, responses=s.MyLabelSerializer)
    @action(detail=True, methods=["get", "post"])
    def labels(self, request, pk=None):
        """GET: my answers in this phase (in the order shown). POST: submit an answer (idempotent on client_id)."""
        phase, m = self._labeler()
        if request.method == "GET":
            history = selectors.labeler_history(phase=phase, labeler=m)
            return Response(
                [
                    {
                        **s.MyLabelSerializer(h["label"]).data,
                        "position": h["assignment"].position,
                        "display_url": s.LabelerImageSerializer(h["assignment"].image).data["display_url"],
                    }
                    for h in history
                ]
            )
        data = s.LabelSubmitSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        revision = label_services.label_submit(
            phase=phase,
            labeler=m,
            image_id=v["image"],
            client_id=v["client_id"],
            tones=v.get("tones"),
            uncertain=v["uncertain"],
            skip_reason=v["skip_reason"],
            time_spent_ms=v["time_spent_ms"],
            tone_order=v.get("tone_order"),
            client_info=v.get("client_info"),
        )
        queue = selectors.assignment_queue(phase=phase, labeler=m, limit=2)
        label = revision.label
        return Response(
            {
                "label": {
                    "id": label.id,
                    "image": label.image_id,
                    "tones": [t for t in (label.tone_low, label.tone_high) if t is not None],
                    "value": label.value,
                    "uncertain": label.uncertain,
                    "skip_reason": label.skip_reason,
                    "n_revisions": label.n_revisions,
                    "updated_at": label.updated_at,
                },
                "revision": revision.number,
                "next": assignment_payload(queue[0]) if queue else None,
                "preload": assignment_payload(queue[1]) if len(queue) > 1 else None,
            },
            # 201: a new label; 200: a changed answer, or a replay of a submit already stored.
            status=status.HTTP_201_CREATED
            if revision.number == 1 and not getattr(revision, "replayed", False)
            else status.HTTP_200_OK,
        )

    @extend_schema(request=s.ReflectionSerializer, responses=s.ReflectionSerializer)
    @action(detail=True, methods=["get", "put"])
    def reflection(self, request, pk=None):
        """My reflection at the end of a calibration phase."""
        phase, m = self._labeler()
        if request.method == "GET":
            reflection = phase.reflections.filter(labeler=m).first()
            if reflection is None:
                raise NotFound("No reflection yet.")
            return Response(s.ReflectionSerializer(reflection).data)
        data = s.ReflectionSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        reflection = label_services.reflection_submit(phase=phase, labeler=m, **data.validated_data)
        return Response(s.ReflectionSerializer(reflection).data)

    @extend_schema(responses=s.ReflectionSerializer(many=True))
    @action(detail=True, methods=["get"])
    def reflections(self, request, pk=None):
        """Every labeler's reflection, side by side (leads)."""
        phase = self._lead()
        return Response(s.ReflectionSerializer(phase.reflections.select_related("labeler"), many=True).data)

    @extend_schema(
        request={
            "multipart/form-data": {"type": "object", "properties": {"file": {"type": "string", "format": "binary"}}}
        },
        responses={200: dict},
    )
    @action(detail=True, methods=["post"], url_path="labels-import", parser_classes=[MultiPartParser])
    def labels_import(self, request, pk=None):
        """Import labels made elsewhere (CSV: image_id, labeler, tones, uncertain, skip_reason, time_spent_s)."""
        from ..services.label_imports import labels_import

        phase = self._lead()
        upload = request.FILES.get("file")
        if upload is None:
            raise ValidationError({"file": "Send a CSV file as 'file'."})
        if upload.size > 50 * 1024 * 1024:
            raise ValidationError({"file": "At most 50 MB."})
        return Response(labels_import(phase=phase, data=upload.read(), user=request.user))

    @action(detail=True, methods=["get"])
    def review(self, request, pk=None):
        """Images that look like mistakes: an outlying selection, skips, uncertain or invalid labels."""
        from ..services.review import review_candidates

        phase = self._lead()
        return Response(review_candidates(phase))


class LabelViewSet(viewsets.GenericViewSet, mixins.RetrieveModelMixin):
    serializer_class = s.LabelSerializer
    queryset = Label.objects.select_related("phase__project", "labeler")

    def get_object(self):
        label = super().get_object()
        project_role(self.request, label.phase.project, LEAD)
        return label

    @extend_schema(responses=s.LabelRevisionSerializer(many=True))
    @action(detail=True, methods=["get"])
    def revisions(self, request, pk=None):
        label = self.get_object()
        revisions = label.revisions.select_related("label__phase").order_by("number")
        return Response(s.LabelRevisionSerializer(revisions, many=True).data)

    @extend_schema(request=s.CorrectionSerializer, responses=s.LabelRevisionSerializer)
    @action(detail=True, methods=["post"])
    def corrections(self, request, pk=None):
        """Record a correction (a new revision with a reason); the labeler's answer is kept."""
        label = self.get_object()
        data = s.CorrectionSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        revision = label_services.label_correct(label=label, user=request.user, **data.validated_data)
        return Response(s.LabelRevisionSerializer(revision).data, status=status.HTTP_201_CREATED)


class JobViewSet(viewsets.GenericViewSet, mixins.RetrieveModelMixin):
    serializer_class = s.JobSerializer
    queryset = Job.objects.select_related("project")

    def get_object(self):
        job = super().get_object()
        project_role(self.request, job.project, LEAD)
        return job


def get_project_or_404(user, pk) -> Project:
    return get_object_or_404(selectors.projects_for(user), pk=pk)
