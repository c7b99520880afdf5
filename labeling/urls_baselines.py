"""URLs of the baselines pages and API (included from config/urls.py)."""

from django.urls import path

from .views import baselines

urlpatterns = [
    path("projects/<int:pk>/baselines/", baselines.baselines_overview, name="baselines"),
    path("projects/<int:pk>/baselines/run/", baselines.baselines_run, name="baselines-run"),
    path("projects/<int:pk>/baselines/compare/", baselines.baselines_compare, name="baselines-compare"),
    path(
        "projects/<int:pk>/baselines/plots/<slug:plot>.<slug:fmt>",
        baselines.baselines_plot,
        name="baselines-plot",
    ),
    path(
        "projects/<int:pk>/baselines/images/<int:image_id>/",
        baselines.baseline_image,
        name="baseline-image",
    ),
    path("projects/<int:pk>/baselines/jobs/", baselines.baseline_jobs, name="baseline-jobs"),
    path(
        "projects/<int:pk>/baselines/jobs/<int:job_id>/",
        baselines.baseline_job,
        name="baseline-job",
    ),
    path(
        "projects/<int:pk>/baselines/jobs/<int:job_id>/retry/",
        baselines.baseline_job_retry,
        name="baseline-job-retry",
    ),
    path("baselines/<int:pk>/overlay.png", baselines.baseline_overlay, name="baseline-overlay"),
    path("api/projects/<int:pk>/baselines/", baselines.api_baselines, name="api-baselines"),
    path("api/projects/<int:pk>/baselines/run/", baselines.api_baselines_run, name="api-baselines-run"),
    path(
        "api/projects/<int:pk>/baselines/comparison/",
        baselines.api_baselines_comparison,
        name="api-baselines-comparison",
    ),
]
