"""Every page route (the API's are in ``labeling.api.urls``)."""

from django.contrib.auth import views as auth_views
from django.urls import path

from . import converters  # noqa: F401  (registers the "id" path converter)
from .views import (
    audit,
    auth,
    baselines,
    consensus,
    data,
    erasure,
    evaluations,
    health,
    jobs,
    labeler,
    lead,
    media,
    project_lifecycle,
    releases,
)

urlpatterns = [
    path("", lead.home, name="home"),
    # Liveness (the process answers) and readiness (database, cache, broker, worker): views.health.
    path("healthz", media.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("login/", auth.ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Every account changes its password, or asks for a reset link by mail (views.auth: behind the sign-in brake).
    path("account/", auth.account_page, name="account"),
    path("account/password/", auth.ThrottledPasswordChangeView.as_view(), name="password_change"),
    path("account/password/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("account/password-reset/", auth.ThrottledPasswordResetView.as_view(), name="password_reset"),
    path("account/password-reset/sent/", auth_views.PasswordResetDoneView.as_view(), name="password_reset_done"),
    path("account/reset/<uidb64>/<token>/", auth.PasswordResetConfirmView.as_view(), name="password_reset_confirm"),
    path("account/reset/done/", auth_views.PasswordResetCompleteView.as_view(), name="password_reset_complete"),
    # Projects (leads; reviewers see the overview and the images)
    path("projects/new/", lead.project_create_view, name="project-create"),
    path("projects/<id:pk>/", lead.project_detail, name="project-detail"),
    path("projects/<id:pk>/settings/", lead.project_settings, name="project-settings"),
    path("projects/<id:pk>/archive/", project_lifecycle.project_archive_page, name="project-archive"),
    path("projects/<id:pk>/unarchive/", project_lifecycle.project_unarchive_page, name="project-unarchive"),
    path("projects/<id:pk>/delete/", project_lifecycle.project_delete_page, name="project-delete"),
    path("projects/<id:pk>/images/", lead.project_images, name="project-images"),
    path("projects/<id:pk>/data/", data.data_manager, name="data-manager"),
    path("projects/<id:pk>/import/", lead.project_import, name="project-import"),
    path("projects/<id:pk>/imports/<id:batch_id>/", lead.import_report, name="import-report"),
    path("projects/<id:pk>/members/", lead.project_members, name="project-members"),
    path("projects/<id:pk>/examples/", lead.project_examples, name="project-examples"),
    path("projects/<id:pk>/calibration/", lead.project_calibration, name="project-calibration"),
    path("images/<id:pk>/", lead.image_detail, name="image-detail"),
    # Erasure on request: a subject and everything of them (leads; confirmation page)
    path("projects/<id:pk>/subjects/<path:external_id>/erase/", erasure.subject_erase_page, name="subject-erase"),
    path("images/<id:pk>/file/<str:kind>/", media.image_file, name="image-file"),
    # Phases: the lead's pages, and the labeler's
    path("phases/<id:pk>/", lead.phase_detail, name="phase-detail"),
    path("phases/<id:pk>/review/", lead.phase_review, name="phase-review"),
    path("phases/<id:pk>/label/", labeler.label_page, name="phase-label"),
    path("phases/<id:pk>/reflection/", labeler.reflection_page, name="phase-reflection"),
    # Consensus and labeler quality (leads)
    path("projects/<id:pk>/consensus/", consensus.consensus_page, name="consensus"),
    path("projects/<id:pk>/consensus/images/", consensus.consensus_images_page, name="consensus-images"),
    path("projects/<id:pk>/consensus/plots/<slug:name>.<slug:fmt>", consensus.consensus_plot, name="consensus-plot"),
    # Colorimetric baselines (leads)
    path("projects/<id:pk>/baselines/", baselines.baselines_overview, name="baselines"),
    path("projects/<id:pk>/baselines/run/", baselines.baselines_run, name="baselines-run"),
    path("projects/<id:pk>/baselines/compare/", baselines.baselines_compare, name="baselines-compare"),
    path("projects/<id:pk>/baselines/audit/", baselines.baselines_audit, name="baselines-audit"),
    path("projects/<id:pk>/baselines/mask-sample/", baselines.baselines_mask_sample, name="baselines-mask-sample"),
    path(
        "projects/<id:pk>/baselines/mask-sample/items/<id:item_id>/",
        baselines.baselines_mask_item,
        name="baselines-mask-item",
    ),
    path("projects/<id:pk>/baselines/plots/<slug:plot>.<slug:fmt>", baselines.baselines_plot, name="baselines-plot"),
    path("projects/<id:pk>/baselines/images/<id:image_id>/", baselines.baseline_image, name="baseline-image"),
    path("projects/<id:pk>/baselines/jobs/", baselines.baseline_jobs, name="baseline-jobs"),
    path("projects/<id:pk>/baselines/jobs/<id:job_id>/", baselines.baseline_job, name="baseline-job"),
    path("projects/<id:pk>/baselines/jobs/<id:job_id>/retry/", baselines.baseline_job_retry, name="baseline-job-retry"),
    path("baselines/<id:pk>/overlay.png", baselines.baseline_overlay, name="baseline-overlay"),
    # Every background job of a project: imports' display images and baselines, runs, releases, evaluations (leads)
    path("projects/<id:pk>/jobs/", jobs.project_jobs, name="project-jobs"),
    # The audit log: what leads and staff did to the project's data (leads; read-only)
    path("projects/<id:pk>/audit/", audit.audit_page, name="project-audit"),
    path("projects/<id:pk>/jobs/<id:job_id>/", jobs.project_job, name="project-job"),
    path("projects/<id:pk>/jobs/<id:job_id>/retry/", jobs.project_job_retry, name="project-job-retry"),
    # Dataset releases (leads make them; reviewers read and download)
    path("projects/<id:pk>/releases/", releases.releases_page, name="releases"),
    path("projects/<id:pk>/releases/<id:version>/", releases.release_page, name="release-page"),
    path("projects/<id:pk>/releases/<id:version>/cancel/", releases.release_cancel_page, name="release-cancel-page"),
    # Fairness evaluations of models against a release (leads and reviewers)
    path("projects/<id:pk>/evaluations/", evaluations.evaluations_page, name="evaluations"),
    path("projects/<id:pk>/evaluations/compare/", evaluations.evaluation_compare_page, name="evaluation-compare"),
    path("projects/<id:pk>/evaluations/gates/", evaluations.evaluation_gate_create_page, name="evaluation-gate-create"),
    path(
        "projects/<id:pk>/evaluations/gates/<id:gate_id>/delete/",
        evaluations.evaluation_gate_delete_page,
        name="evaluation-gate-delete",
    ),
    path("projects/<id:pk>/evaluations/<id:run_id>/", evaluations.evaluation_page, name="evaluation-page"),
    path(
        "projects/<id:pk>/evaluations/<id:run_id>/files/<path:path>",
        evaluations.evaluation_file_page,
        name="evaluation-file",
    ),
]
