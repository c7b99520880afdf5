"""``GET /api/projects/{id}/audit/``: the project's audit log, newest first (leads; never editable).

Labelers and reviewers of the project get 403, anyone else 404 (the one access rule, ``selectors.project_access``).
Filters: ``action`` (a name such as ``phase.open``, or a prefix ending in ``.`` such as ``phase.``) and ``user``
(a username or a user id). Entries of a deleted project are kept but no longer reachable here (the admin shows them).
"""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import mixins, serializers, viewsets

from ... import selectors
from ...models import AuditEntry, Membership, Project
from ...services.audit import audit_entries


class AuditUserSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="user_id", allow_null=True, help_text="The account's id (null: the system).")
    username = serializers.CharField(help_text="The username when it happened (empty: the system).")


class AuditEntrySerializer(serializers.ModelSerializer):
    user = AuditUserSerializer(source="*", read_only=True)
    details = serializers.JSONField(read_only=True, help_text="Counts, ids, pseudonyms, reasons: never tone values.")
    origin = serializers.CharField(read_only=True, help_text="The client's address (empty: the worker or a command).")

    class Meta:
        model = AuditEntry
        fields = ["id", "created_at", "user", "action", "object_type", "object_id", "details", "origin"]
        read_only_fields = fields


_ERROR = inline_serializer("AuditError", fields={"detail": serializers.CharField()})


@extend_schema(
    parameters=[
        OpenApiParameter("project_pk", int, OpenApiParameter.PATH, description="Project id."),
        OpenApiParameter("action", str, description="An action (e.g. phase.open) or a prefix ending in '.'."),
        OpenApiParameter("user", str, description="A username, or a user id."),
    ],
)
class AuditViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    serializer_class = AuditEntrySerializer
    queryset = AuditEntry.objects.none()
    filter_backends = []

    def get_queryset(self):
        project = get_object_or_404(Project, pk=self.kwargs["project_pk"])
        selectors.project_access(self.request.user, project, Membership.Role.LEAD)
        params = self.request.query_params
        return audit_entries(project.pk, action=params.get("action", ""), user=params.get("user", ""))

    @extend_schema(
        responses={
            200: AuditEntrySerializer(many=True),
            401: OpenApiResponse(_ERROR, description="Not signed in."),
            403: OpenApiResponse(_ERROR, description="A labeler or reviewer of the project (leads only)."),
            404: OpenApiResponse(_ERROR, description="No such project, not a member of it, or no such page."),
        }
    )
    def list(self, request, *args, **kwargs):
        """The project's audit log, newest first, paginated: who (user id and username then), when, what
        (action, object type and id, details) and from where (client address)."""
        return super().list(request, *args, **kwargs)
