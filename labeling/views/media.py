"""Image files are streamed through this view, which checks the requester's role.

Derivatives are made once (in a job) and served as stored files: nothing is
re-encoded per request.
"""

from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from ..models import Image, Membership
from ..selectors import images_visible_to, membership_for

KINDS = {"display", "thumbnail", "original", "mask"}


@require_GET
@login_required
def image_file(request, pk: int, kind: str):
    if kind not in KINDS:
        raise Http404
    image = get_object_or_404(Image.objects.select_related("project"), pk=pk)
    if not images_visible_to(request.user, image.project).filter(pk=pk).exists():
        raise Http404
    m = membership_for(request.user, image.project)
    is_labeler = not request.user.is_superuser and (m is None or m.role == Membership.Role.LABELER)
    if is_labeler and kind != "display":
        raise Http404  # labelers see the display image only (no mask: it can hint at the baseline)
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
    response = FileResponse(handle, content_type=content_type)
    response["Cache-Control"] = "private, max-age=3600"
    response["X-Content-Type-Options"] = "nosniff"
    if kind == "original":
        response["Content-Disposition"] = "attachment"
    return response


def healthz(request):
    """A trivial view: liveness check, and the reference the latency benchmark compares against."""
    from django.http import JsonResponse

    return JsonResponse({"status": "ok"})
