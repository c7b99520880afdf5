from django.urls import include, path
from rest_framework.routers import DefaultRouter

from ..views.auth import ThrottledObtainAuthToken
from . import views

router = DefaultRouter()
router.register("scales", views.ScaleViewSet, basename="scale")
router.register("projects", views.ProjectViewSet, basename="project")
router.register("imports", views.ImportBatchViewSet, basename="import")
router.register("images", views.ImageViewSet, basename="image")
router.register("phases", views.PhaseViewSet, basename="phase")
router.register("labels", views.LabelViewSet, basename="label")
router.register("jobs", views.JobViewSet, basename="job")

urlpatterns = [
    path("auth/token/", ThrottledObtainAuthToken.as_view(), name="api-token"),
    path("", include(router.urls)),
]
