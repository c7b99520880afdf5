"""``/api/projects/{id}/data/``: the data manager's table, with the page's filters, sorts and paging;
``/api/projects/{id}/data/bulk/``: its bulk actions (leads)."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from ... import selectors
from ...models import Membership, Project
from ...services import data_manager as dm


class DataBulkSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=list(dm.BULK_ACTIONS))
    image_ids = serializers.ListField(
        child=serializers.IntegerField(), required=False, max_length=dm.MAX_BULK, help_text="The chosen images."
    )
    filters = serializers.DictField(
        child=serializers.CharField(allow_blank=True),
        required=False,
        help_text="Instead of image_ids: every image these filters match (the GET parameters; at most 10,000).",
    )
    reason = serializers.CharField(
        max_length=dm.MAX_REASON,
        required=False,
        allow_blank=True,
        default="",
        help_text="relabel: shown to the labelers; exclude: required, carried into releases; include: a note.",
    )
    labeler_ids = serializers.ListField(child=serializers.IntegerField(), required=False, max_length=100)

    def validate(self, data):
        if not data.get("image_ids") and data.get("filters") is None:
            raise serializers.ValidationError({"image_ids": "Give image_ids, or filters to act on every match."})
        return data


FILTERS = [
    OpenApiParameter("search", str, description="Part of the image's or subject's own id, or the file name"),
    OpenApiParameter("phase", int, description="Only images of this phase"),
    OpenApiParameter("labeler", int, description="Only images assigned to this labeler (membership id)"),
    OpenApiParameter("labeler_status", str, enum=list(dm.LABELER_STATUSES)),
    OpenApiParameter("min_labels", int),
    OpenApiParameter("max_labels", int),
    OpenApiParameter("near_consensus", bool, description="All valid values within one tone"),
    OpenApiParameter("review", str, enum=list(dm.REVIEW_STATES)),
    OpenApiParameter("baseline_flag", str, description="A flag name, none (clean) or missing"),
    OpenApiParameter("excluded", bool, description="Excluded from the dataset by a lead (true) or not (false)"),
    OpenApiParameter("attr", str, description="key:value (repeatable)"),
    OpenApiParameter("ordering", str, description=f"One of {', '.join(dm.SORTS)}; prefix - for descending"),
    OpenApiParameter("page", int),
    OpenApiParameter("page_size", int, description=f"At most {dm.MAX_PAGE_SIZE}"),
]


class DataManagerViewSet(viewsets.GenericViewSet):
    queryset = Project.objects.all()
    serializer_class = DataBulkSerializer
    # The table's own filters and ``ordering`` (services.data_manager), not the API's generic ones.
    filter_backends = []

    def _project(self, *roles) -> Project:
        project = super().get_object()
        selectors.project_access(self.request.user, project, *roles)
        return project

    @extend_schema(parameters=FILTERS, responses={200: dict})
    @action(detail=True, methods=["get"])
    def data(self, request, pk=None):
        """Every image of the project in one table: filtered, searched, sorted and paged in the database."""
        project = self._project(Membership.Role.LEAD, Membership.Role.REVIEWER)
        return Response(dm.data_page(project, request.query_params))

    @extend_schema(request=DataBulkSerializer, responses={200: dict})
    @action(detail=True, methods=["post"], url_path="data/bulk")
    def data_bulk(self, request, pk=None):
        """A bulk action on chosen images, or on every image the filters match."""
        project = self._project(Membership.Role.LEAD)
        data = DataBulkSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        from django.http import QueryDict

        params = None
        if v.get("filters") is not None:
            params = QueryDict(mutable=True)
            for key, value in v["filters"].items():
                params[key] = value
        return Response(
            dm.data_bulk(
                project=project,
                action=v["action"],
                user=request.user,
                image_ids=v.get("image_ids"),
                params=params,
                reason=v["reason"],
                labeler_ids=v.get("labeler_ids"),
            )
        )
