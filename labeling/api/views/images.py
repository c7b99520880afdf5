"""``/api/images/{id}/``: an image, its labels, its attributes (``PATCH``, leads), and sending it back to
labelers (leads, reviewers)."""

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from ... import selectors
from ...models import Image, Membership
from ...services import image_attributes as attribute_services
from ...services import labels as label_services
from .. import serializers as s


class ImageViewSet(viewsets.GenericViewSet, mixins.RetrieveModelMixin):
    serializer_class = s.ImageSerializer
    queryset = Image.objects.select_related("project", "subject")

    def get_object(self):
        image = super().get_object()
        selectors.project_access(self.request.user, image.project, Membership.Role.LEAD, Membership.Role.REVIEWER)
        return image

    def _lead(self) -> Image:
        image = self.get_object()
        selectors.project_access(self.request.user, image.project, Membership.Role.LEAD)
        return image

    @extend_schema(request=s.ImageAttributesPatchSerializer, responses=s.ImageSerializer)
    def partial_update(self, request, pk=None):
        """Change the image's subject and attributes (leads): ``subject_id`` (empty for none), ``attributes`` and
        ``subject_attributes`` as merge patches (a name given ``null`` is removed). Audited (``image.attributes``);
        releases already published do not change."""
        image = self._lead()
        data = s.ImageAttributesPatchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        attribute_services.image_attributes_update(image=image, user=request.user, **data.validated_data)
        image = Image.objects.select_related("project", "subject").get(pk=image.pk)
        return Response(s.ImageSerializer(image).data)

    @extend_schema(responses=s.LabelSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None)
    def labels(self, request, pk=None):
        image = self._lead()
        labels = image.labels.select_related("labeler").order_by("phase_id", "labeler__pseudonym")
        return Response(s.LabelSerializer(labels, many=True).data)

    @extend_schema(
        request=s.RelabelSerializer,
        responses={
            201: {
                "type": "object",
                "properties": {"requested": {"type": "integer", "description": "Relabel requests made"}},
                "required": ["requested"],
            }
        },
    )
    @action(detail=True, methods=["post"])
    def relabel(self, request, pk=None):
        """Send this image back to chosen labelers (post-calibration)."""
        image = self._lead()
        data = s.RelabelSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        labelers = list(image.project.memberships.filter(id__in=data.validated_data["labeler_ids"]))
        if len(labelers) != len(set(data.validated_data["labeler_ids"])):
            raise ValidationError({"labeler_ids": "Some ids are not members of this project."})
        created = label_services.relabel_request(
            image=image, labelers=labelers, reason=data.validated_data["reason"], user=request.user
        )
        return Response({"requested": len(created)}, status=status.HTTP_201_CREATED)
