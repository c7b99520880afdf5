"""Every API route: one router (``/api/...``), and the token endpoint."""

from django.urls import URLPattern, include, path
from rest_framework.routers import DefaultRouter

from ..converters import ID_PATTERN
from .views.audit import AuditViewSet
from .views.auth import ThrottledObtainAuthToken
from .views.dashboards import ProjectDashboardViewSet
from .views.data import DataManagerViewSet
from .views.erasure import SubjectEraseView
from .views.evaluations import EvaluationGateViewSet, EvaluationViewSet
from .views.images import ImageViewSet
from .views.imports import ImportBatchViewSet
from .views.jobs import JobViewSet
from .views.labels import LabelViewSet
from .views.phase_control import PhaseControlViewSet
from .views.phases import PhaseViewSet
from .views.projects import ProjectViewSet
from .views.releases import ReleaseViewSet
from .views.scales import ScaleViewSet
from .views.submit_fast import with_fast_submit


class DigitIdRouter(DefaultRouter):
    """A router whose ids are digits unless a viewset says otherwise: ``/api/images/abc/`` is a 404 from the
    URL resolver, before any view or query runs."""

    def get_lookup_regex(self, viewset, lookup_prefix=""):
        if getattr(viewset, "lookup_value_regex", None) is None:
            viewset = type(viewset.__name__, (viewset,), {"lookup_value_regex": ID_PATTERN})
        return super().get_lookup_regex(viewset, lookup_prefix)


# Every id in a route is 1 to 18 digits (labeling.converters.ID_PATTERN): the nested prefixes below say so too.
router = DigitIdRouter()
# The phases first: a labeler's submit (phase-labels) is the most frequent request, and Django tries the
# routes in order (no two prefixes below overlap, so the order decides nothing else).
router.register("phases", PhaseViewSet, basename="phase")
# A lead's phase control: /api/phases/{id}/reopen/ and /api/phases/{id}/close-summary/
router.register("phases", PhaseControlViewSet, basename="phase-control")
router.register("scales", ScaleViewSet, basename="scale")
router.register("projects", ProjectViewSet, basename="project")
# The lead's dashboards under /api/projects/{id}/: api-consensus, api-consensus-images, api-baselines, ...
router.register("projects", ProjectDashboardViewSet, basename="api")
# The data manager: /api/projects/{id}/data/ and /api/projects/{id}/data/bulk/
router.register("projects", DataManagerViewSet, basename="data")
# A project's dataset releases: /api/projects/{id}/releases/ (release-list, release-detail, release-files, ...)
router.register(r"projects/(?P<project_pk>" + ID_PATTERN + ")/releases", ReleaseViewSet, basename="release")
# Fairness evaluation runs (public, for CI): /api/projects/{id}/evaluations/ (evaluation-list, -detail, -report, -gate, ...)
router.register(r"projects/(?P<project_pk>" + ID_PATTERN + ")/evaluations", EvaluationViewSet, basename="evaluation")
router.register(
    r"projects/(?P<project_pk>" + ID_PATTERN + ")/evaluation-gates", EvaluationGateViewSet, basename="evaluation-gate"
)
# A project's audit log (leads): /api/projects/{id}/audit/ (audit-list)
router.register(r"projects/(?P<project_pk>" + ID_PATTERN + ")/audit", AuditViewSet, basename="audit")
router.register("imports", ImportBatchViewSet, basename="import")
router.register("images", ImageViewSet, basename="image")
router.register("labels", LabelViewSet, basename="label")
router.register("jobs", JobViewSet, basename="job")


def _labels_fast(patterns: list) -> list:
    """The router's routes, with the labeling hot path in front of ``phase-labels`` (views.submit_fast)."""
    return [
        URLPattern(p.pattern, with_fast_submit(p.callback), p.default_args, p.name) if p.name == "phase-labels" else p
        for p in patterns
    ]


urlpatterns = [
    path("auth/token/", ThrottledObtainAuthToken.as_view(), name="api-token"),
    # A release's file by its path in the release (no trailing slash after a file name).
    path(
        "projects/<id:project_pk>/releases/<id:version>/files/<path:path>",
        ReleaseViewSet.as_view({"get": "files"}),
        name="release-files",
    ),
    path(
        "projects/<id:project_pk>/evaluations/<id:pk>/files/<path:path>",
        EvaluationViewSet.as_view({"get": "files"}),
        name="evaluation-files",
    ),
    # Erasure on request of one subject (leads): answers the erasure's record.
    path(
        "projects/<id:project_pk>/subjects/<path:external_id>/erase/",
        SubjectEraseView.as_view(),
        name="subject-erase-api",
    ),
    path("", include(_labels_fast(router.urls))),
]
