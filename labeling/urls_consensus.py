"""URLs of the consensus pages and API (included from config/urls.py)."""

from django.urls import path

from .views import consensus

urlpatterns = [
    path("projects/<int:pk>/consensus/", consensus.consensus_page, name="consensus"),
    path("projects/<int:pk>/consensus/images/", consensus.consensus_images_page, name="consensus-images"),
    path(
        "projects/<int:pk>/consensus/plots/<slug:name>.<slug:fmt>",
        consensus.consensus_plot,
        name="consensus-plot",
    ),
    path("api/projects/<int:pk>/consensus/", consensus.ConsensusAPIView.as_view(), name="api-consensus"),
    path(
        "api/projects/<int:pk>/consensus/images/",
        consensus.ConsensusImagesAPIView.as_view(),
        name="api-consensus-images",
    ),
]
