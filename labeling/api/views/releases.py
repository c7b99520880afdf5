"""``/api/projects/{id}/releases/``: a project's dataset releases, their files, readiness and diffs.

Leads and reviewers read and download; only leads make or cancel a release. Labelers of the project
get 403, anyone else 404 (the one access rule, ``selectors.project_access``).
"""

import logging
import mimetypes
import zipfile

from django.http import FileResponse, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from ... import selectors
from ...converters import ID_PATTERN
from ...models import Membership, Phase, Project, Release
from ...services import erasure_notice
from ...services import releases as release_services
from ...services.media_files import storage_reader
from ...services.releases.rules import MAX_MIN_VALID_LABELS
from .. import serializers as s

READERS = (Membership.Role.LEAD, Membership.Role.REVIEWER)
#: A release's file: CSV, JSON, Parquet, Markdown, an image... each with its own media type.
_FILE = {(200, "*/*"): OpenApiResponse(OpenApiTypes.BINARY, description="The file, in its own media type.")}
_ZIP = {(200, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY, description="The release as one zip file.")}
_KINDS = "|".join(Phase.Kind.values)
_PROJECT = OpenApiParameter("project_pk", int, OpenApiParameter.PATH, description="Project id.")
_VERSION = OpenApiParameter("version", int, OpenApiParameter.PATH, description="Release version (1, 2, ...).")
_PATH = OpenApiParameter("path", str, OpenApiParameter.PATH, description="A file the release's manifest lists.")
_ORIGINAL = OpenApiParameter(
    "original",
    bool,
    description=(
        "true: the file as published, byte for byte (its SHA-256 is the manifest's). Without it, a release made "
        "before a subject it contains was erased is served with an erasure notice: at the top of data_card.md "
        "and data_card.html, and as ERASURE_NOTICE.md in the zip."
    ),
)
logger = logging.getLogger(__name__)


def _rule_from_query(params) -> dict:
    """The readiness rule from query parameters: phases, aggregation, tie, min_valid_labels, include_<category>."""
    names = ("phases", "aggregation", "tie", "min_valid_labels")
    # A parameter sent empty is a mistake to hear about, not the default (as the schema says).
    empty = [n for n in (*names, *(f"include_{c}" for c in release_services.CATEGORIES)) if params.get(n) == ""]
    if empty:
        raise ValidationError(dict.fromkeys(empty, "Give a value, or leave the parameter out for the default."))
    rule = {}
    for name in names:
        if params.get(name, "") != "":
            rule[name] = params[name]
    include = {
        category: params[f"include_{category}"]
        for category in release_services.CATEGORIES
        if params.get(f"include_{category}", "") != ""
    }
    if include:
        rule["include"] = include
    return rule


def _original(params) -> bool:
    raw = params.get("original")
    if raw is None:
        return False
    if raw.strip().lower() in ("1", "true"):
        return True
    if raw.strip().lower() in ("0", "false"):
        return False
    raise ValidationError(
        {"original": "true (or 1) for the file as published; false (or 0) or left out: with notices."}
    )


def _attachment(response, filename: str):
    response["Content-Disposition"] = content_disposition_header(True, filename)
    response["X-Content-Type-Options"] = "nosniff"
    # What a card or the zip carries can change (an erasure adds a notice): revalidated, not kept an hour.
    response["Cache-Control"] = "private, no-cache"
    return response


def _reader_size(handle) -> int:
    position = handle.tell()
    size = handle.seek(0, 2)
    handle.seek(position)
    return size


def _file_response(name: str, *, filename: str) -> FileResponse:
    """The stored file ``name`` streamed by this process after the caller's role check (issue 25).

    Streamed rather than redirected to a presigned bucket URL: a presigned URL is a bearer token valid for its
    lifetime to anyone who holds it (a shared link, a proxy's log, the browser's history), and revoking a
    member's role could not stop a download already handed out; the bucket also stays private and unreachable
    from browsers. The cost, the bytes passing through a web node, is bounded (1 MiB ranges at a time).
    """
    content_type = mimetypes.guess_type(filename)[0] or "application/octet-stream"
    if filename.endswith((".jsonl", ".md")):
        content_type = "text/plain; charset=utf-8"
    handle = storage_reader(name)
    response = FileResponse(handle, as_attachment=True, filename=filename, content_type=content_type)
    response["Content-Length"] = str(_reader_size(handle))
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, max-age=3600"
    return response


@extend_schema(parameters=[_PROJECT])
class ReleaseViewSet(viewsets.GenericViewSet):
    serializer_class = s.ReleaseSerializer
    queryset = Release.objects.none()
    lookup_field = "version"
    lookup_value_regex = ID_PATTERN
    filter_backends = []

    def project(self, *roles: str) -> Project:
        project = get_object_or_404(Project.objects.select_related("scale"), pk=self.kwargs["project_pk"])
        selectors.project_access(self.request.user, project, *roles)
        return project

    def release(self, *roles: str) -> Release:
        return selectors.release_get(self.project(*roles), self.kwargs["version"])

    @extend_schema(responses=s.ReleaseSerializer(many=True))
    def list(self, request, project_pk=None):
        """The project's releases, newest first (leads and reviewers)."""
        project = self.project(*READERS)
        page = self.paginate_queryset(project.releases.select_related("job", "previous").order_by("-version"))
        return self.get_paginated_response(s.ReleaseSerializer(page, many=True).data)

    @extend_schema(request=s.ReleaseRequestSerializer, responses={202: s.ReleaseDetailSerializer})
    def create(self, request, project_pk=None):
        """Make the next release (leads): the rule, every readiness category included or excluded, the
        data card's texts, and whether to add the images. 202 with the release and its job; it is
        built in the background (``GET`` it for progress)."""
        project = self.project(Membership.Role.LEAD)
        data = s.ReleaseRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        card_text = fields.pop("card_text")
        with_images = fields.pop("with_images")
        release = release_services.release_request(
            project=project, user=request.user, rule=fields, card_text=card_text, with_images=with_images
        )
        release = selectors.release_get(project, release.version)
        return Response(s.ReleaseDetailSerializer(release).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(parameters=[_VERSION], responses=s.ReleaseDetailSerializer)
    def retrieve(self, request, project_pk=None, version=None):
        """A release: status, job progress, summary, files and manifest (leads and reviewers)."""
        return Response(s.ReleaseDetailSerializer(self.release(*READERS)).data)

    @extend_schema(parameters=[_VERSION], request=None, responses=s.ReleaseDetailSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, project_pk=None, version=None):
        """Cancel a queued or running release (leads); its build stops and removes what it wrote."""
        release = release_services.release_cancel(self.release(Membership.Role.LEAD), user=request.user)
        return Response(s.ReleaseDetailSerializer(release).data)

    @extend_schema(parameters=[_VERSION, _PATH, _ORIGINAL], responses=_FILE)
    def files(self, request, project_pk=None, version=None, path=None):
        """Download one file of a published release (one its manifest lists), e.g. ``images.parquet``.

        Routed in ``api.urls`` without the router's trailing slash (a file name ends the URL)."""
        release = self.release(*READERS)
        found = release_services.release_file_name(release, path or "")
        if found is None:
            raise NotFound("No such file in this release.")
        filename = path.rsplit("/", 1)[-1]
        original = _original(request.query_params)
        if path not in erasure_notice.CARD_FILES:
            return _file_response(found, filename=filename)
        notices = [] if original else erasure_notice.release_notices(release)
        if not notices:
            return _attachment(_file_response(found, filename=filename), filename)
        with storage_reader(found) as handle:
            published = handle.read()
        data = erasure_notice.card_with_notice(release, path, published, notices, f"{request.path}?original=1")
        content_type = "text/plain; charset=utf-8" if path.endswith(".md") else "text/html; charset=utf-8"
        response = _attachment(HttpResponse(data, content_type=content_type), filename)
        response["X-Erasure-Notice"] = str(len(notices))
        return response

    @extend_schema(parameters=[_VERSION, _ORIGINAL], responses=_ZIP)
    @action(detail=True, methods=["get"])
    def download(self, request, project_pk=None, version=None):
        """Download the release as one zip archive (published releases)."""
        release = self.release(*READERS)
        path = release_services.release_zip_name(release) if release.status == Release.Status.PUBLISHED else None
        if path is None:
            raise NotFound("This release has no archive (it is not published).")
        zip_name = path.rsplit("/", 1)[-1]
        notices = [] if _original(request.query_params) else erasure_notice.release_notices(release)
        if notices:
            try:
                size, chunks = erasure_notice.zip_with_notice(
                    path, erasure_notice.notice_file(release, notices, f"{request.path}?original=1")
                )
            except (OSError, zipfile.BadZipFile):  # a damaged archive: sent as it is (its checksum will say so)
                logger.exception("Release %s: its archive could not be read to add the erasure notice", release.pk)
            else:
                response = _attachment(StreamingHttpResponse(chunks, content_type="application/zip"), zip_name)
                response["Content-Length"] = str(size)
                response["X-Erasure-Notice"] = str(len(notices))
                return response
        return _attachment(_file_response(path, filename=zip_name), zip_name)

    @extend_schema(
        parameters=[
            _VERSION,
            OpenApiParameter(
                "against", {"type": "integer", "minimum": 0}, required=True, description="The other version."
            ),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    @action(detail=True, methods=["get"])
    def diff(self, request, project_pk=None, version=None):
        """What changed from release ``against`` to this one: final tones that moved (from/to), images
        added, removed, newly excluded or included (both must be published)."""
        release = self.release(*READERS)
        raw = request.query_params.get("against", "")
        if not raw.isdigit():
            raise ValidationError({"against": "The version to compare with (a number)."})
        other = selectors.release_get(release.project, raw)
        if release.status != Release.Status.PUBLISHED or other.status != Release.Status.PUBLISHED:
            raise ValidationError({"against": "Both releases must be published."})
        return Response(release_services.release_diff(other, release))

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "phases",
                {"type": "string", "pattern": f"^(latest|({_KINDS})(,({_KINDS}))*)$"},
                description='"latest" (default) or phase kinds, comma-separated.',
            ),
            OpenApiParameter("aggregation", str, enum=["mean", "median", "mode"]),
            OpenApiParameter("tie", str, enum=["lower", "higher", "nearest_mean"]),
            OpenApiParameter(
                "min_valid_labels",
                {"type": "integer", "minimum": 1, "maximum": MAX_MIN_VALID_LABELS},
            ),
            *[
                OpenApiParameter(f"include_{category}", bool, description=description)
                for category, description in release_services.CATEGORIES.items()
            ],
        ],
        responses=OpenApiTypes.OBJECT,
    )
    @action(detail=False, methods=["get"])
    def readiness(self, request, project_pk=None):
        """How many images fall in each category a lead must include or exclude, with examples."""
        project = self.project(*READERS)
        return Response(release_services.release_readiness_cached(project, _rule_from_query(request.query_params)))
