"""``/api/scales/``: the built-in scales and the requester's custom ones."""

from django.db.models import Q
from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.response import Response

from ...models import Scale
from ...services.scales import scale_create_custom
from .. import serializers as s


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
