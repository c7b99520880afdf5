"""``/api/labels/{id}/``: a label, its revisions and corrections (leads)."""

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from ... import selectors
from ...models import Label, Membership
from ...services import labels as label_services
from .. import serializers as s


class LabelViewSet(viewsets.GenericViewSet, mixins.RetrieveModelMixin):
    serializer_class = s.LabelSerializer
    queryset = Label.objects.select_related("phase__project", "labeler")

    def get_object(self):
        label = super().get_object()
        selectors.project_access(self.request.user, label.phase.project, Membership.Role.LEAD)
        return label

    @extend_schema(responses=s.LabelRevisionSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None)
    def revisions(self, request, pk=None):
        label = self.get_object()
        revisions = label.revisions.select_related("label__phase").order_by("number")
        return Response(s.LabelRevisionSerializer(revisions, many=True).data)

    @extend_schema(request=s.CorrectionSerializer, responses={201: s.LabelRevisionSerializer})
    @action(detail=True, methods=["post"])
    def corrections(self, request, pk=None):
        """Record a correction (a new revision with a reason); the labeler's answer is kept."""
        label = self.get_object()
        data = s.CorrectionSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        revision = label_services.label_correct(label=label, user=request.user, **data.validated_data)
        return Response(s.LabelRevisionSerializer(revision).data, status=status.HTTP_201_CREATED)
