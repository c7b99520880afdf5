"""``/api/projects/{id}/data/``: the data manager's table, with the page's filters, sorts and paging;
``/api/projects/{id}/data/bulk/``: its bulk actions (leads)."""

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from ... import selectors
from ...forms.data_manager import bulk_filters, data_request
from ...models import Membership, Project
from ...services import data_manager as dm
from ..pagination import MAX_PAGE, PAGE_DESCRIPTION
from .common import ATTRIBUTE_FILTER, MAX_ID, baseline_flag_names


class DataBulkSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=list(dm.BULK_ACTIONS))
    # Ids as the database stores them: a larger number is no image (and no 500 from the driver).
    image_ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_ID),
        required=False,
        max_length=dm.MAX_BULK,
        help_text="The chosen images.",
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
    labeler_ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_ID), required=False, max_length=100
    )
    confirm = serializers.IntegerField(
        min_value=0,
        max_value=dm.MAX_BULK,
        required=False,
        help_text=f"More than {dm.BULK_CONFIRM_ABOVE} images (a page) are changed only when this is their number; "
        "otherwise 400 on confirm says how many the action would change.",
    )
    attribute = serializers.CharField(
        max_length=200,
        required=False,
        allow_blank=True,
        default="",
        help_text="set_attribute: the name (image.<name>: the photo's own)",
    )
    value = serializers.CharField(
        max_length=1000,
        required=False,
        allow_blank=True,
        default="",
        help_text="set_attribute: the value (empty: remove it)",
    )

    def validate(self, data):
        # A form-encoded body reads filters={} (every image) from no "filters.<name>" field at all (DRF's
        # DictField from HTML input; a bare "filters=" too): there, filters count only when a field is named.
        if hasattr(self.initial_data, "getlist") and not any(str(k).startswith("filters.") for k in self.initial_data):
            data.pop("filters", None)
        if not data.get("image_ids") and data.get("filters") is None:
            raise serializers.ValidationError({"image_ids": "Give image_ids, or filters to act on every match."})
        return data


_MAXIMA = {"page": MAX_PAGE, "phase": 2**62, "labeler": 2**62}


def _integer(minimum: int, maximum: int) -> dict:
    return {"type": "integer", "minimum": minimum, "maximum": maximum}


def _sorts() -> list[str]:
    return ["", *(f"{sign}{name}" for name in dm.SORTS for sign in ("", "-"))]


#: The table's query parameters, with the bounds ``services.data_manager`` checks (a 400 outside them);
#: a choice sent empty is no choice (as the page's own form sends it).
FILTERS = [
    OpenApiParameter("search", str, description="Part of the image's or subject's own id, or the file name"),
    OpenApiParameter("phase", _integer(1, _MAXIMA["phase"]), description="Only images of this phase"),
    OpenApiParameter(
        "labeler", _integer(1, _MAXIMA["labeler"]), description="Only images assigned to this labeler (membership id)"
    ),
    OpenApiParameter("labeler_status", str, enum=["", *dm.LABELER_STATUSES]),
    OpenApiParameter("min_labels", _integer(0, 10**6)),
    OpenApiParameter("max_labels", _integer(0, 10**6)),
    OpenApiParameter("near_consensus", bool, description="All valid values within one tone"),
    OpenApiParameter("review", str, enum=["", *dm.REVIEW_STATES]),
    OpenApiParameter(
        "baseline_flag",
        str,
        enum=["", "none", "missing", *baseline_flag_names()],
        description="A flag name, none (clean) or missing",
    ),
    OpenApiParameter("excluded", bool, description="Excluded from the dataset by a lead (true) or not (false)"),
    OpenApiParameter(
        "attr",
        {"type": "string", "pattern": ATTRIBUTE_FILTER},
        description="key:value (repeatable); the key: letters, digits and single _",
    ),
    OpenApiParameter("ordering", str, enum=_sorts(), description="prefix - for descending"),
    OpenApiParameter("page", _integer(1, _MAXIMA["page"]), description=PAGE_DESCRIPTION),
    OpenApiParameter(
        "page_size",
        _integer(1, dm.MAX_PAGE_SIZE),
        description=f"Rows a page ({dm.PAGE_SIZE} when absent or empty); outside 1 to {dm.MAX_PAGE_SIZE}: 400.",
    ),
]


def _in_range(raw, name: str) -> bool:
    """Whether ``raw`` is a value the document allows for ``name`` (then an error about it is a 404)."""
    raw = (raw or "").strip()
    return raw.isascii() and raw.isdigit() and 1 <= int(raw) <= _MAXIMA[name]


class DataManagerViewSet(viewsets.GenericViewSet):
    queryset = Project.objects.all()
    serializer_class = DataBulkSerializer
    # The table's own filters and ``ordering`` (services.data_manager), not the API's generic ones.
    filter_backends = []

    def _project(self, *roles) -> Project:
        project = super().get_object()
        selectors.project_access(self.request.user, project, *roles)
        return project

    @extend_schema(parameters=FILTERS, responses={200: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["get"])
    def data(self, request, pk=None):
        """Every image of the project in one table: filtered, searched, sorted and paged in the database."""
        project = self._project(Membership.Role.LEAD, Membership.Role.REVIEWER)
        try:
            asked = data_request(project, request.query_params)
            return Response(
                dm.data_page(project, asked.filters, page=asked.page, page_size=asked.page_size, ignored=asked.ignored)
            )
        except DjangoValidationError as exc:
            # A page past the last, a phase or a labeler of another project: not there (404), as on every
            # paginated list and for every object named by its id; a malformed value stays a 400.
            fields = set(getattr(exc, "error_dict", {}))
            params = request.query_params
            if fields and fields <= {"page", "phase", "labeler"} and all(_in_range(params.get(f), f) for f in fields):
                raise NotFound(" ".join(m for f in sorted(fields) for m in exc.message_dict[f])) from None
            raise

    @extend_schema(request=DataBulkSerializer, responses={200: OpenApiTypes.OBJECT})
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
                filters=bulk_filters(project, params),
                reason=v["reason"],
                labeler_ids=v.get("labeler_ids"),
                attribute=v["attribute"],
                value=v["value"],
                confirm=v.get("confirm"),
            )
        )
