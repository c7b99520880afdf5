"""Image files are streamed through this view, which checks the requester's role.

Derivatives are made once (in a job) and served as stored files: nothing is
re-encoded per request.
"""

from django.http import FileResponse, Http404
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from ..models import Image, Membership
from ..selectors import labeler_can_view_image
from .access import page_access

KINDS = {"display", "thumbnail", "original", "mask"}


def _authenticate(request) -> bool:
    """Session (browser) or API token (``Authorization: Token ...``)."""
    if request.user.is_authenticated:
        return True
    from rest_framework.authentication import TokenAuthentication
    from rest_framework.exceptions import AuthenticationFailed

    try:
        result = TokenAuthentication().authenticate(request)
    except AuthenticationFailed:
        return False
    if result is None:
        return False
    request.user = result[0]
    return True


@require_GET
def image_file(request, pk: int, kind: str):
    if not _authenticate(request):
        from django.contrib.auth.views import redirect_to_login

        if request.headers.get("Authorization"):
            raise Http404
        return redirect_to_login(request.get_full_path())
    if kind not in KINDS:
        raise Http404
    image = get_object_or_404(Image.objects.select_related("project"), pk=pk)
    m = page_access(request, image.project)
    if m is not None and m.role == Membership.Role.LABELER and not request.user.is_superuser:
        # Labelers see the display image only (a mask could hint at the baseline),
        # of their own queues' images.
        if kind != "display" or not labeler_can_view_image(m, image.id):
            raise Http404
    if kind in ("display", "thumbnail") and image.derivative_status == Image.DerivativeStatus.PENDING:
        from ..services.images import image_make_derivatives

        image_make_derivatives(image=image)
        image.refresh_from_db()
    field = getattr(image, kind)
    if not field:
        raise Http404
    try:
        handle = field.open("rb")
    except FileNotFoundError:
        raise Http404 from None
    content_type = "image/png" if kind == "mask" else ("image/jpeg" if kind != "original" else None)
    # An opaque served name: the stored one carries the original's SHA-256, which would let a labeler
    # match the photo against known datasets.
    response = FileResponse(handle, content_type=content_type, filename=f"image-{image.id}-{kind}")
    response["Cache-Control"] = "private, max-age=3600"
    response["X-Content-Type-Options"] = "nosniff"
    if kind == "original":
        response["Content-Disposition"] = "attachment"
    return response


def healthz(request):
    """A trivial view: liveness check, and the reference the latency benchmark compares against."""
    from django.http import JsonResponse

    return JsonResponse({"status": "ok"})
