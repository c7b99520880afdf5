from django.contrib.auth import views as auth_views
from django.urls import path

from .views import labeler, lead, media
from .views.auth import ThrottledLoginView

urlpatterns = [
    path("", lead.home, name="home"),
    path("healthz", media.healthz, name="healthz"),
    path("login/", ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("projects/new/", lead.project_create_view, name="project-create"),
    path("projects/<int:pk>/", lead.project_detail, name="project-detail"),
    path("projects/<int:pk>/settings/", lead.project_settings, name="project-settings"),
    path("projects/<int:pk>/images/", lead.project_images, name="project-images"),
    path("projects/<int:pk>/import/", lead.project_import, name="project-import"),
    path("projects/<int:pk>/imports/<int:batch_id>/", lead.import_report, name="import-report"),
    path("projects/<int:pk>/members/", lead.project_members, name="project-members"),
    path("projects/<int:pk>/examples/", lead.project_examples, name="project-examples"),
    path("projects/<int:pk>/calibration/", lead.project_calibration, name="project-calibration"),
    path("images/<int:pk>/", lead.image_detail, name="image-detail"),
    path("images/<int:pk>/file/<str:kind>/", media.image_file, name="image-file"),
    path("phases/<int:pk>/", lead.phase_detail, name="phase-detail"),
    path("phases/<int:pk>/review/", lead.phase_review, name="phase-review"),
    path("phases/<int:pk>/label/", labeler.label_page, name="phase-label"),
    path("phases/<int:pk>/reflection/", labeler.reflection_page, name="phase-reflection"),
]
