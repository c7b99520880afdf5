"""Image imports: ``/api/imports/{id}/`` (a batch and its per-file report) and the upload itself."""

from rest_framework import mixins, viewsets
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import is_form_media_type

from ... import selectors
from ...models import ImportBatch, Membership, Project
from ...services import imports as import_services
from .. import serializers as s


def import_from_request(project: Project, request) -> ImportBatch:
    """Import what the request sends: ``files`` (many), an ``archive`` (zip), or a ``manifest``
    (CSV/JSON Lines) with an optional ``archive`` or server ``folder`` (staff only).

    A manifest too large to check (columns, line length, time) is a 400 naming what was too big (its batch
    is kept, failed); any other refusal is a failed batch in a 201."""
    try:
        return _import_from_request(project, request)
    except import_services.ImportTooLarge as refused:
        raise ValidationError({"detail": refused.reason}) from None


def _import_from_request(project: Project, request) -> ImportBatch:
    files = request.FILES.getlist("files")
    archive = request.FILES.get("archive")
    manifest = request.FILES.get("manifest")
    data = request.data if hasattr(request.data, "get") else {}
    for name in ("files", "archive", "manifest"):
        # Text under a file's name (a form field, or JSON) is a mistake to name, not an upload to ignore:
        # the rest of the request would otherwise be imported as if it were all (schemathesis found it).
        if name in request.POST or (not is_form_media_type(request.content_type or "") and name in data):
            raise ValidationError({name: "A file sent as multipart/form-data, not text."})
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
        selectors.project_access(self.request.user, batch.project, Membership.Role.LEAD)
        return batch
