"""``POST /api/projects/{id}/subjects/{subject_external_id}/erase/``: erase a subject on request (leads).

The body repeats the subject's id (``confirm``) and may say why (``reason``). Answers the erasure's record: the
counts, and the published releases that contained the subject (immutable: not rewritten; their API answer and
page carry a notice from then on). 400: no or a wrong confirmation, the project archived, a release, evaluation or
baseline job being computed. Labelers and reviewers of the project get 403, anyone else 404; 404 too for a
subject the project does not have.
"""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from ... import selectors
from ...models import Membership, Project, Subject, SubjectErasure
from ...services.erasure import subject_erase


class SubjectEraseRequestSerializer(serializers.Serializer):
    confirm = serializers.CharField(max_length=200, help_text="The subject's external id again: erasure is final.")
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class ErasedReleaseSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    rows = serializers.IntegerField(help_text="The subject's rows in the release's images table.")
    with_images = serializers.BooleanField(help_text="The release's files include the photos.")
    published_at = serializers.DateTimeField(allow_null=True)


class ErasedEvaluationSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    release = serializers.IntegerField(help_text="The release version the run was made on.")


class SubjectErasureSerializer(serializers.ModelSerializer):
    subject = serializers.CharField(source="subject_external_id")
    erased_by = serializers.CharField(source="erased_by_username")
    counts = serializers.DictField(child=serializers.IntegerField())
    releases = ErasedReleaseSerializer(many=True)
    evaluations = ErasedEvaluationSerializer(many=True)

    class Meta:
        model = SubjectErasure
        fields = [
            "id",
            "subject",
            "subject_sha256",
            "erased_at",
            "erased_by",
            "reason",
            "counts",
            "releases",
            "evaluations",
        ]
        read_only_fields = fields


_ERROR = inline_serializer("SubjectEraseError", fields={"detail": serializers.CharField()})
_FIELD_ERRORS = OpenApiResponse(
    inline_serializer(
        "SubjectEraseFieldErrors",
        fields={
            "confirm": serializers.ListField(child=serializers.CharField(), required=False),
            "reason": serializers.ListField(child=serializers.CharField(), required=False),
            "non_field_errors": serializers.ListField(child=serializers.CharField(), required=False),
        },
    ),
    description="No or a wrong confirmation, the project archived, or a release, evaluation or baseline job "
    "being computed.",
)


class SubjectEraseView(APIView):
    @extend_schema(
        operation_id="projects_subjects_erase",
        parameters=[
            OpenApiParameter("project_pk", int, OpenApiParameter.PATH, description="Project id."),
            OpenApiParameter("external_id", str, OpenApiParameter.PATH, description="The subject's external id."),
        ],
        request=SubjectEraseRequestSerializer,
        responses={
            200: SubjectErasureSerializer,
            400: _FIELD_ERRORS,
            401: OpenApiResponse(_ERROR, description="Not signed in."),
            403: OpenApiResponse(_ERROR, description="A labeler or reviewer of the project (leads only)."),
            404: OpenApiResponse(_ERROR, description="No such project or subject, or not a member of the project."),
        },
    )
    def post(self, request, project_pk: int, external_id: str):
        """Erase the subject, their images, files, labels and baselines; answer the erasure's record."""
        project = get_object_or_404(Project, pk=project_pk)
        selectors.project_access(request.user, project, Membership.Role.LEAD)
        if not Subject.objects.filter(project=project, external_id=external_id).exists():
            raise NotFound("No such subject in this project.")
        data = SubjectEraseRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        record = subject_erase(project=project, external_id=external_id, user=request.user, **data.validated_data)
        return Response(SubjectErasureSerializer(record).data)
