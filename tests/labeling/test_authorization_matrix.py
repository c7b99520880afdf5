"""Who may do what: every route x method x role, frozen.

The cells are generated from the URLconf (every route but ``admin/``; the routers'
``.json``-style format-suffix twins are left out) and from the OpenAPI schema (an
API path is asked with each method the schema lists; every other route with GET
and POST). Each cell is asked with an empty body (POST: an empty form; PUT/PATCH:
``{}``) against one fixture world, inside a transaction rolled back after the
cell, and its answer is reduced to a class:

``ok`` (2xx), ``login`` (redirect to the sign-in page), ``redirect`` (any other
redirect), ``bad`` (400: the request reached the view, access was granted), or
the status code itself (401, 403, 404, 405, 415, ...).

``EXPECTED`` is the observed matrix of the code as it was when this test was
written, reviewed by eye. The test fails when a route or method appears without
an entry (design its answers first), when an entry's route is gone, or when any
answer changes. To see the observed rows of a new route, run this file with
``FAIRTONE_MATRIX_DUMP=/tmp/matrix.txt``; never paste them without reading them.
"""

import io
import os
import re
from functools import cache

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission
from django.core.files.base import ContentFile
from django.db import transaction
from django.shortcuts import resolve_url
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from labeling.models import (
    EvaluationGate,
    EvaluationRun,
    Image,
    ImageBaseline,
    Job,
    MaskSample,
    MaskSampleItem,
    Membership,
    Subject,
)
from labeling.services import baselines as baseline_services
from labeling.services import releases as release_services
from labeling.services.imports import import_files
from tests.factories import MembershipFactory, ProjectFactory, UserFactory, png_bytes
from tests.labeling.helpers import open_calibration_1, submit

ROLES = ("anonymous", "labeler", "labeler_other", "reviewer", "lead", "lead_other", "staff", "superuser")
PAGE_METHODS = ("GET", "POST")

# (path template, method): the answers, space-separated, in the order of ROLES:
# anonymous, labeler, labeler of another project, reviewer, lead, lead of another project, staff, superuser.
EXPECTED: dict[tuple[str, str], str] = {
    ("/api/schema/", "GET"): "ok ok ok ok ok ok ok ok",
    ("/api/schema/", "POST"): "405 405 405 405 405 405 405 405",
    ("/api/docs/", "GET"): "ok ok ok ok ok ok ok ok",
    ("/api/docs/", "POST"): "405 405 405 405 405 405 405 405",
    ("/api/auth/token/", "POST"): "bad bad bad bad bad bad bad bad",
    ("/api/scales/", "GET"): "401 ok ok ok ok ok ok ok",
    ("/api/scales/", "POST"): "401 bad bad bad bad bad bad bad",
    ("/api/scales/{pk}/", "GET"): "401 ok ok ok ok ok ok ok",
    ("/api/projects/", "GET"): "401 ok ok ok ok ok ok ok",
    ("/api/projects/", "POST"): "401 bad bad bad bad bad bad bad",
    ("/api/projects/{pk}/", "GET"): "401 ok 404 ok ok 404 404 ok",
    ("/api/projects/{pk}/", "PATCH"): "401 403 404 403 ok 404 404 ok",
    # Deleting a project: leads only; the world has a published release, so without confirm=true it is a 400.
    ("/api/projects/{pk}/", "DELETE"): "401 403 404 403 bad 404 404 bad",
    ("/api/projects/{pk}/archive/", "POST"): "401 403 404 403 ok 404 404 ok",
    ("/api/projects/{pk}/unarchive/", "POST"): "401 403 404 403 ok 404 404 ok",
    ("/api/projects/{pk}/calibration/", "POST"): "401 403 404 403 bad 404 404 bad",
    ("/api/projects/{pk}/images/", "GET"): "401 403 404 ok ok 404 404 ok",
    ("/api/projects/{pk}/data/", "GET"): "401 403 404 ok ok 404 404 ok",
    ("/api/projects/{pk}/data/bulk/", "POST"): "401 403 404 403 bad 404 404 bad",
    ("/projects/{pk}/data/", "GET"): "login 404 404 ok ok 404 404 ok",
    ("/projects/{pk}/data/", "POST"): "login 404 404 redirect redirect 404 404 redirect",
    ("/api/projects/{pk}/imports/", "GET"): "401 403 404 403 ok 404 404 ok",
    ("/api/projects/{pk}/imports/", "POST"): "401 403 404 403 bad 404 404 bad",
    # A manifest applied to images already imported (issue 23): leads only; an empty form has no manifest.
    ("/api/projects/{pk}/image-attributes/", "POST"): "401 403 404 403 bad 404 404 bad",
    ("/api/projects/{pk}/jobs/", "GET"): "401 403 404 403 ok 404 404 ok",
    ("/api/projects/{pk}/members/", "GET"): "401 403 404 403 ok 404 404 ok",
    ("/api/projects/{pk}/members/", "POST"): "401 403 404 403 bad 404 404 bad",
    # Team management (issue 23): leads only; an empty patch changes nothing.
    ("/api/projects/{pk}/members/{member_id}/", "PATCH"): "401 403 404 403 ok 404 404 ok",
    ("/api/projects/{pk}/phases/", "GET"): "401 ok 404 ok ok 404 404 ok",
    ("/api/imports/{pk}/", "GET"): "401 403 404 403 ok 404 404 ok",
    ("/api/images/{pk}/", "GET"): "401 403 404 ok ok 404 404 ok",
    # Changing an image's subject and attributes (issue 23): leads only; an empty patch changes nothing.
    ("/api/images/{pk}/", "PATCH"): "401 403 404 403 ok 404 404 ok",
    ("/api/images/{pk}/labels/", "GET"): "401 403 404 403 ok 404 404 ok",
    ("/api/images/{pk}/relabel/", "POST"): "401 403 404 403 bad 404 404 bad",
    ("/api/phases/{pk}/", "GET"): "401 ok 404 ok ok 404 404 ok",
    ("/api/phases/{pk}/close/", "POST"): "401 403 404 403 ok 404 404 ok",
    ("/api/phases/{pk}/labels/", "GET"): "401 ok 404 403 403 404 404 404",
    ("/api/phases/{pk}/labels/", "POST"): "401 bad 404 403 403 404 404 404",
    ("/api/phases/{pk}/labels-import/", "POST"): "401 403 404 403 bad 404 404 bad",
    ("/api/phases/{pk}/labels-per-image/", "POST"): "401 403 404 403 bad 404 404 bad",
    ("/api/phases/{pk}/next/", "GET"): "401 ok 404 403 403 404 404 404",
    ("/api/phases/{pk}/open/", "POST"): "401 403 404 403 bad 404 404 bad",
    ("/api/phases/{pk}/progress/", "GET"): "401 ok 404 403 ok 404 404 ok",
    ("/api/phases/{pk}/reopen/", "POST"): "401 403 404 403 bad 404 404 bad",
    ("/api/phases/{pk}/close-summary/", "GET"): "401 403 404 403 ok 404 404 ok",
    # Labels per day and per labeler: leads only (a labeler does not see the team's pace).
    ("/api/phases/{pk}/progress-over-time/", "GET"): "401 403 404 403 ok 404 404 ok",
    ("/api/phases/{pk}/reflection/", "GET"): "401 404 404 403 403 404 404 404",
    # An empty reflection is refused (400; the page re-renders with the question): answer one, or skip explicitly.
    ("/api/phases/{pk}/reflection/", "PUT"): "401 bad 404 403 403 404 404 404",
    ("/api/phases/{pk}/reflections/", "GET"): "401 403 404 403 ok 404 404 ok",
    ("/api/phases/{pk}/review-decisions/", "POST"): "401 403 404 403 bad 404 404 bad",
    ("/api/phases/{pk}/review/", "GET"): "401 403 404 403 ok 404 404 ok",
    ("/api/labels/{pk}/", "GET"): "401 403 404 403 ok 404 404 ok",
    ("/api/labels/{pk}/corrections/", "POST"): "401 403 404 403 bad 404 404 bad",
    ("/api/labels/{pk}/revisions/", "GET"): "401 403 404 403 ok 404 404 ok",
    ("/api/jobs/{pk}/", "GET"): "401 403 404 403 ok 404 404 ok",
    ("/api/", "GET"): "401 ok ok ok ok ok ok ok",
    ("/api/", "POST"): "401 405 405 405 405 405 405 405",
    ("/projects/{pk}/consensus/", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/consensus/", "POST"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/consensus/images/", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/consensus/images/", "POST"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/consensus/plots/{name}.{fmt}", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/consensus/plots/{name}.{fmt}", "POST"): "login 404 404 404 ok 404 404 ok",
    ("/api/projects/{pk}/consensus/", "GET"): "401 404 404 404 ok 404 404 ok",
    ("/api/projects/{pk}/consensus/images/", "GET"): "401 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/baselines/", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/baselines/", "POST"): "login 405 405 405 405 405 405 405",
    ("/projects/{pk}/baselines/run/", "GET"): "login 405 405 405 405 405 405 405",
    ("/projects/{pk}/baselines/run/", "POST"): "login 404 404 404 redirect 404 404 redirect",
    ("/projects/{pk}/baselines/compare/", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/baselines/compare/", "POST"): "login 405 405 405 405 405 405 405",
    ("/projects/{pk}/baselines/plots/{plot}.{fmt}", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/baselines/plots/{plot}.{fmt}", "POST"): "login 405 405 405 405 405 405 405",
    ("/projects/{pk}/baselines/images/{image_id}/", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/baselines/images/{image_id}/", "POST"): "login 405 405 405 405 405 405 405",
    ("/projects/{pk}/baselines/jobs/", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/baselines/jobs/", "POST"): "login 405 405 405 405 405 405 405",
    ("/projects/{pk}/baselines/jobs/{job_id}/", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/baselines/jobs/{job_id}/", "POST"): "login 405 405 405 405 405 405 405",
    ("/projects/{pk}/baselines/jobs/{job_id}/retry/", "GET"): "login 405 405 405 405 405 405 405",
    ("/projects/{pk}/baselines/jobs/{job_id}/retry/", "POST"): "login 404 404 404 redirect 404 404 redirect",
    # Every background job of a project (leads only, like the baseline runs; retry answers with a redirect).
    ("/projects/{pk}/jobs/", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/jobs/", "POST"): "login 405 405 405 405 405 405 405",
    ("/projects/{pk}/jobs/{job_id}/", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/jobs/{job_id}/", "POST"): "login 405 405 405 405 405 405 405",
    ("/projects/{pk}/jobs/{job_id}/retry/", "GET"): "login 405 405 405 405 405 405 405",
    ("/projects/{pk}/jobs/{job_id}/retry/", "POST"): "login 404 404 404 redirect 404 404 redirect",
    ("/baselines/{pk}/overlay.png", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/baselines/{pk}/overlay.png", "POST"): "login 405 405 405 405 405 405 405",
    # Issue 21: the audit by labelled tone, read by the lead and the fairness reviewer; the mask sample is the lead's.
    ("/api/projects/{pk}/baselines/audit/", "GET"): "401 404 404 ok ok 404 404 ok",
    ("/api/projects/{pk}/baselines/mask-sample/", "POST"): "401 404 404 404 ok 404 404 ok",
    ("/api/projects/{pk}/baselines/mask-sample/latest/", "GET"): "401 404 404 ok ok 404 404 ok",
    ("/api/projects/{pk}/baselines/mask-sample/items/{item_id}/polygon/", "POST"): "401 404 404 404 bad 404 404 bad",
    ("/projects/{pk}/baselines/audit/", "GET"): "login 404 404 ok ok 404 404 ok",
    ("/projects/{pk}/baselines/audit/", "POST"): "login 405 405 405 405 405 405 405",
    ("/projects/{pk}/baselines/mask-sample/", "GET"): "login 405 405 405 405 405 405 405",
    ("/projects/{pk}/baselines/mask-sample/", "POST"): "login 404 404 404 redirect 404 404 redirect",
    ("/projects/{pk}/baselines/mask-sample/items/{item_id}/", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/baselines/mask-sample/items/{item_id}/", "POST"): "login 405 405 405 405 405 405 405",
    ("/api/projects/{pk}/baselines/", "GET"): "401 404 404 404 ok 404 404 ok",
    ("/api/projects/{pk}/baselines/run/", "POST"): "401 404 404 404 ok 404 404 ok",
    ("/api/projects/{pk}/baselines/comparison/", "GET"): "401 404 404 404 ok 404 404 ok",
    # The audit log: the project's leads read it (403 API / 404 page for its other members); nothing posts to it.
    ("/api/projects/{project_pk}/audit/", "GET"): "401 403 404 403 ok 404 404 ok",
    ("/projects/{pk}/audit/", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/audit/", "POST"): "login 405 405 405 405 405 405 405",
    # Erasing a subject on request: leads only; an empty confirmation is refused (400), nothing is erased.
    ("/api/projects/{project_pk}/subjects/{external_id}/erase/", "POST"): "401 403 404 403 bad 404 404 bad",
    ("/projects/{pk}/subjects/{external_id}/erase/", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/subjects/{external_id}/erase/", "POST"): "login 404 404 404 bad 404 404 bad",
    # Dataset releases: leads make and cancel; reviewers read and download; labelers never (403 API, 404 pages).
    ("/api/projects/{project_pk}/releases/", "GET"): "401 403 404 ok ok 404 404 ok",
    ("/api/projects/{project_pk}/releases/", "POST"): "401 403 404 403 bad 404 404 bad",
    ("/api/projects/{project_pk}/releases/readiness/", "GET"): "401 403 404 ok ok 404 404 ok",
    ("/api/projects/{project_pk}/releases/{version}/", "GET"): "401 403 404 ok ok 404 404 ok",
    ("/api/projects/{project_pk}/releases/{version}/cancel/", "POST"): "401 403 404 403 bad 404 404 bad",
    ("/api/projects/{project_pk}/releases/{version}/diff/", "GET"): "401 403 404 bad bad 404 404 bad",
    ("/api/projects/{project_pk}/releases/{version}/download/", "GET"): "401 403 404 ok ok 404 404 ok",
    ("/api/projects/{project_pk}/releases/{version}/files/{path}", "GET"): "401 403 404 ok ok 404 404 ok",
    ("/projects/{pk}/releases/", "GET"): "login 404 404 ok ok 404 404 ok",
    ("/projects/{pk}/releases/", "POST"): "login 404 404 404 bad 404 404 bad",
    ("/projects/{pk}/releases/{version}/", "GET"): "login 404 404 ok ok 404 404 ok",
    ("/projects/{pk}/releases/{version}/", "POST"): "login 405 405 405 405 405 405 405",
    ("/projects/{pk}/releases/{version}/cancel/", "GET"): "login 405 405 405 405 405 405 405",
    ("/projects/{pk}/releases/{version}/cancel/", "POST"): "login 404 404 404 redirect 404 404 redirect",
    # Evaluation runs: leads and reviewers create and read; only leads edit gates; labelers never (403 API, 404 pages).
    ("/api/projects/{project_pk}/evaluation-gates/", "GET"): "401 403 404 ok ok 404 404 ok",
    ("/api/projects/{project_pk}/evaluation-gates/", "POST"): "401 403 404 403 bad 404 404 bad",
    ("/api/projects/{project_pk}/evaluation-gates/{pk}/", "DELETE"): "401 403 404 403 ok 404 404 ok",
    ("/api/projects/{project_pk}/evaluations/", "GET"): "401 403 404 ok ok 404 404 ok",
    ("/api/projects/{project_pk}/evaluations/", "POST"): "401 403 404 bad bad 404 404 bad",
    ("/api/projects/{project_pk}/evaluations/compare/", "GET"): "401 403 404 bad bad 404 404 bad",
    ("/api/projects/{project_pk}/evaluations/{pk}/", "GET"): "401 403 404 ok ok 404 404 ok",
    ("/api/projects/{project_pk}/evaluations/{pk}/files/{path}", "GET"): "401 403 404 404 404 404 404 404",
    ("/api/projects/{project_pk}/evaluations/{pk}/gate/", "GET"): "401 403 404 ok ok 404 404 ok",
    ("/api/projects/{project_pk}/evaluations/{pk}/report/", "GET"): "401 403 404 404 404 404 404 404",
    ("/projects/{pk}/evaluations/", "GET"): "login 404 404 ok ok 404 404 ok",
    ("/projects/{pk}/evaluations/", "POST"): "login 404 404 bad bad 404 404 bad",
    ("/projects/{pk}/evaluations/compare/", "GET"): "login 404 404 ok ok 404 404 ok",
    ("/projects/{pk}/evaluations/compare/", "POST"): "login 405 405 405 405 405 405 405",
    ("/projects/{pk}/evaluations/gates/", "GET"): "login 405 405 405 405 405 405 405",
    ("/projects/{pk}/evaluations/gates/", "POST"): "login 404 404 404 redirect 404 404 redirect",
    ("/projects/{pk}/evaluations/gates/{gate_id}/delete/", "GET"): "login 405 405 405 405 405 405 405",
    ("/projects/{pk}/evaluations/gates/{gate_id}/delete/", "POST"): "login 404 404 404 redirect 404 404 redirect",
    ("/projects/{pk}/evaluations/{run_id}/", "GET"): "login 404 404 ok ok 404 404 ok",
    ("/projects/{pk}/evaluations/{run_id}/", "POST"): "login 405 405 405 405 405 405 405",
    ("/projects/{pk}/evaluations/{run_id}/files/{path}", "GET"): "login 404 404 404 404 404 404 404",
    ("/projects/{pk}/evaluations/{run_id}/files/{path}", "POST"): "login 405 405 405 405 405 405 405",
    ("/", "GET"): "login ok ok ok ok ok ok ok",
    ("/", "POST"): "login ok ok ok ok ok ok ok",
    ("/healthz", "GET"): "ok ok ok ok ok ok ok ok",
    ("/healthz", "POST"): "ok ok ok ok ok ok ok ok",
    ("/readyz", "GET"): "ok ok ok ok ok ok ok ok",
    ("/readyz", "POST"): "405 405 405 405 405 405 405 405",
    ("/login/", "GET"): "ok ok ok ok ok ok ok ok",
    ("/login/", "POST"): "ok ok ok ok ok ok ok ok",
    ("/logout/", "GET"): "405 405 405 405 405 405 405 405",
    ("/logout/", "POST"): "login login login login login login login login",
    # Everyone's own account page (the email address resets go to): an empty form is answered with its errors.
    ("/account/", "GET"): "login ok ok ok ok ok ok ok",
    ("/account/", "POST"): "login ok ok ok ok ok ok ok",
    # Password change: every signed-in account (an empty form re-renders: 200). Reset: anyone, the same answer
    # for every address; a bad link renders "this link does not work" (200).
    ("/account/password/", "GET"): "login ok ok ok ok ok ok ok",
    ("/account/password/", "POST"): "login ok ok ok ok ok ok ok",
    ("/account/password/done/", "GET"): "login ok ok ok ok ok ok ok",
    ("/account/password/done/", "POST"): "login 405 405 405 405 405 405 405",
    ("/account/password-reset/", "GET"): "ok ok ok ok ok ok ok ok",
    ("/account/password-reset/", "POST"): "ok ok ok ok ok ok ok ok",
    ("/account/password-reset/sent/", "GET"): "ok ok ok ok ok ok ok ok",
    ("/account/password-reset/sent/", "POST"): "405 405 405 405 405 405 405 405",
    ("/account/reset/{uidb64}/{token}/", "GET"): "ok ok ok ok ok ok ok ok",
    ("/account/reset/{uidb64}/{token}/", "POST"): "ok ok ok ok ok ok ok ok",
    ("/account/reset/done/", "GET"): "ok ok ok ok ok ok ok ok",
    ("/account/reset/done/", "POST"): "405 405 405 405 405 405 405 405",
    ("/projects/new/", "GET"): "login 404 404 404 ok ok ok ok",
    ("/projects/new/", "POST"): "login 404 404 404 ok ok ok ok",
    ("/projects/{pk}/", "GET"): "login 404 404 ok ok 404 404 ok",
    ("/projects/{pk}/", "POST"): "login 404 404 ok ok 404 404 ok",
    ("/projects/{pk}/settings/", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/settings/", "POST"): "login 404 404 404 ok 404 404 ok",
    # Archive, unarchive and delete pages: leads only (404 for everyone else); delete needs the name typed (400).
    ("/projects/{pk}/archive/", "GET"): "login 405 405 405 405 405 405 405",
    ("/projects/{pk}/archive/", "POST"): "login 404 404 404 redirect 404 404 redirect",
    ("/projects/{pk}/unarchive/", "GET"): "login 405 405 405 405 405 405 405",
    ("/projects/{pk}/unarchive/", "POST"): "login 404 404 404 redirect 404 404 redirect",
    ("/projects/{pk}/delete/", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/delete/", "POST"): "login 404 404 404 bad 404 404 bad",
    ("/projects/{pk}/images/", "GET"): "login 404 404 ok ok 404 404 ok",
    ("/projects/{pk}/images/", "POST"): "login 404 404 ok ok 404 404 ok",
    ("/projects/{pk}/import/", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/import/", "POST"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/imports/{batch_id}/", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/imports/{batch_id}/", "POST"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/members/", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/members/", "POST"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/examples/", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/examples/", "POST"): "login 404 404 404 redirect 404 404 redirect",
    ("/projects/{pk}/calibration/", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/projects/{pk}/calibration/", "POST"): "login 404 404 404 ok 404 404 ok",
    ("/images/{pk}/", "GET"): "login 404 404 ok ok 404 404 ok",
    ("/images/{pk}/", "POST"): "login 404 404 ok ok 404 404 ok",
    ("/images/{pk}/file/{kind}/", "GET"): "login ok 404 ok ok 404 404 ok",
    ("/images/{pk}/file/{kind}/", "POST"): "405 405 405 405 405 405 405 405",
    ("/phases/{pk}/", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/phases/{pk}/", "POST"): "login 404 404 404 redirect 404 404 redirect",
    ("/phases/{pk}/review/", "GET"): "login 404 404 404 ok 404 404 ok",
    ("/phases/{pk}/review/", "POST"): "login 404 404 404 ok 404 404 ok",
    ("/phases/{pk}/label/", "GET"): "login ok 404 404 404 404 404 404",
    ("/phases/{pk}/label/", "POST"): "login ok 404 404 404 404 404 404",
    ("/phases/{pk}/reflection/", "GET"): "login ok 404 404 404 404 404 404",
    ("/phases/{pk}/reflection/", "POST"): "login ok 404 404 404 404 404 404",
}


# --------------------------------------------------------------------------
# The cells: routes from the URLconf, methods from the OpenAPI schema
# --------------------------------------------------------------------------


def _walk(patterns, prefix=""):
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from _walk(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            yield prefix + str(p.pattern), p


def template_of(raw: str) -> str | None:
    """``api/^projects/(?P<pk>[^/.]+)/$`` and ``projects/<int:pk>/`` -> ``/api/projects/{pk}/``, ``/projects/{pk}/``."""
    text = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", raw)
    text = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", text)
    if "{format}" in text:
        return None  # a format-suffix twin of another route
    text = text.replace("^", "").replace("$", "").replace("\\.", ".")
    return "/" + text


def _shape(template: str) -> str:
    return re.sub(r"\{\w+\}", "{}", template)


@cache
def cells() -> tuple[tuple[str, str], ...]:
    from drf_spectacular.generators import SchemaGenerator

    templates = []
    for raw, _pattern in _walk(get_resolver().url_patterns):
        if raw.startswith("admin/"):
            continue
        template = template_of(raw)
        if template is not None and template not in templates:
            templates.append(template)
    schema = SchemaGenerator().get_schema(request=None, public=True)
    methods = {_shape(path): tuple(m.upper() for m in ops) for path, ops in schema["paths"].items()}
    unrouted = set(methods) - {_shape(t) for t in templates}
    assert not unrouted, f"schema paths without a route: {sorted(unrouted)}"
    return tuple((t, m) for t in templates for m in methods.get(_shape(t), PAGE_METHODS))


# --------------------------------------------------------------------------
# One world: a project with a lead, a reviewer and labelers, another project, staff
# --------------------------------------------------------------------------


def build_world() -> dict:
    add_project = Permission.objects.get(codename="add_project", content_type__app_label="labeling")
    users = {}
    for role in ROLES[1:]:
        users[role] = UserFactory(
            username=f"matrix-{role}", is_staff=role in ("staff", "superuser"), is_superuser=role == "superuser"
        )
    for role in ("lead", "lead_other"):
        users[role].user_permissions.add(add_project)
    project = ProjectFactory(created_by=users["lead"])
    other = ProjectFactory(created_by=users["lead_other"])
    labeler = MembershipFactory(project=project, user=users["labeler"], pseudonym="L1")
    helpers = [MembershipFactory(project=project, pseudonym=f"L{i}") for i in (2, 3)]
    MembershipFactory(project=project, user=users["reviewer"], role=Membership.Role.REVIEWER, pseudonym="R1")
    MembershipFactory(project=other, user=users["labeler_other"], pseudonym="L1")
    files = [(f"m{i}.png", io.BytesIO(png_bytes(colour=(40 * i, 120, 80)))) for i in range(1, 5)]
    batch = import_files(project=project, files=files, user=users["lead"])
    phase = open_calibration_1(project, size=4, cal1=4, labels_per_image=3)
    for m in (labeler, *helpers):
        for tone, a in enumerate(phase.assignments.filter(labeler=m).order_by("position"), start=3):
            submit(phase, m, a.image_id, tones=[tone])
    label = phase.labels.filter(labeler=labeler).order_by("id").first()
    image = label.image
    job = Job.objects.create(project=project, kind=Job.Kind.BASELINE, status=Job.Status.DONE, total=1, done=1)
    parameters = baseline_services.baseline_parameters_effective(project)
    baseline = ImageBaseline.objects.create(
        image=image,
        parameters=parameters,
        parameters_hash=baseline_services.baseline_parameters_hash(parameters),
        code_version=baseline_services.BASELINE_CODE_VERSION,
        status=ImageBaseline.Status.OK,
        ita_median=40.0,
        lightness_median=60.0,
        b_median=20.0,
        albedo=0.3,
        albedo_normalized=0.35,
        ita_class="intermediate",
        overlay=ContentFile(png_bytes(), name="matrix-overlay.png"),
        job=job,
    )
    release = release_services.release_request(
        project=project,
        user=users["lead"],
        rule={"include": dict.fromkeys(release_services.CATEGORIES, True)},
        card_text={name: f"The {name}." for name in release_services.CARD_FIELDS},
    )
    assert release_services.release_build(release).status == "published"
    run = EvaluationRun.objects.create(
        project=project, release=release, name="model A", status=EvaluationRun.Status.DONE, report={"summary": []}
    )
    gate = EvaluationGate.objects.create(project=project, name="strict", rules={"fail_on": ["significant"]})
    sample = MaskSample.objects.create(project=project, per_tone=1, seed=1, tone_definition="matrix")
    item = MaskSampleItem.objects.create(sample=sample, image=image, tone=3)
    subject = Subject.objects.create(project=project, external_id="matrix-subject")
    Image.objects.filter(pk=image.pk).update(subject=subject)
    by_segment = {
        "evaluations": run.pk,
        "evaluation-gates": gate.pk,
        "projects": project.pk,
        "images": image.pk,
        "phases": phase.pk,
        "labels": label.pk,
        "imports": batch.pk,
        "jobs": job.pk,
        "scales": project.scale_id,
        "baselines": baseline.pk,
    }
    values = {
        "image_id": image.pk,
        "batch_id": batch.pk,
        "job_id": job.pk,
        "kind": "display",
        "name": "kappa_heatmap",
        "plot": "scatter",
        "fmt": "png",
        "project_pk": project.pk,
        "version": release.version,
        "path": "images.csv",
        "run_id": run.pk,
        "gate_id": gate.pk,
        "uidb64": "MQ",
        "token": "not-a-token",
        "external_id": subject.external_id,
        "item_id": item.pk,
        "member_id": labeler.pk,
    }
    return {"users": users, "by_segment": by_segment, "values": values}


def url_for(template: str, world: dict) -> str:
    parts = template.split("/")
    out = []
    for i, part in enumerate(parts):

        def fill(match, previous=parts[i - 1] if i else ""):
            name = match.group(1)
            if name == "pk":
                return str(world["by_segment"][previous])
            return str(world["values"][name])

        out.append(re.sub(r"\{(\w+)\}", fill, part))
    return "/".join(out)


def answer(response) -> str:
    code = response.status_code
    if 200 <= code < 300:
        return "ok"
    if code in (301, 302, 303, 307, 308):
        location = response.headers.get("Location", "")
        return "login" if location.split("?")[0] == resolve_url(settings.LOGIN_URL) else "redirect"
    if code == 400:
        return "bad"
    return str(code)


def ask(session_key: str | None, method: str, url: str) -> str:
    client = Client()
    if session_key is not None:
        client.cookies[settings.SESSION_COOKIE_NAME] = session_key
    if method == "GET":
        return answer(client.get(url))
    if method == "POST":
        return answer(client.post(url, {}))
    return answer(getattr(client, method.lower())(url, "{}", content_type="application/json"))


def observe(role: str, world: dict) -> dict[tuple[str, str], str]:
    from django.core.cache import cache as django_cache

    user = world["users"].get(role)
    session_key = None
    if user is not None:  # one session for the role's cells (a cell that changes or ends it is rolled back)
        signed_in = Client()
        signed_in.force_login(user)
        session_key = signed_in.cookies[settings.SESSION_COOKIE_NAME].value
    observed = {}
    for template, method in cells():
        django_cache.clear()  # membership cache, login brakes, throttles: every cell starts alike
        with transaction.atomic():
            observed[(template, method)] = ask(session_key, method, url_for(template, world))
            transaction.set_rollback(True)
    return observed


# --------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker, tmp_path_factory):
    """The fixture world, built once for this module's roles (a release build is most of its cost) inside a
    transaction rolled back after the module's last test; each test runs in a savepoint inside it, and each
    cell in a savepoint inside that, so every role sees the same world, as if it had been built afresh."""
    from django.test import override_settings

    media = tmp_path_factory.mktemp("matrix") / "media"
    with django_db_blocker.unblock(), override_settings(MEDIA_ROOT=str(media)), transaction.atomic():
        yield build_world()
        transaction.set_rollback(True)


def test_every_route_and_method_has_designed_answers():
    generated = set(cells())
    missing = sorted(generated - set(EXPECTED))
    gone = sorted(set(EXPECTED) - generated)
    assert not missing, f"routes without an entry in EXPECTED (design their answers): {missing}"
    assert not gone, f"entries in EXPECTED without a route: {gone}"
    assert all(len(answers.split()) == len(ROLES) for answers in EXPECTED.values())


#: The fast tier asks every route as the outsiders (no account, a labeler and a lead of another project: the
#: answers that must not leak); CI asks as every role (pytest.ini: a sweep of every route as the members who
#: see the most renders every page, the lead's and the superuser's 2 s each).
OUTSIDERS = ("anonymous", "labeler_other", "lead_other")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "role", [role if role in OUTSIDERS else pytest.param(role, marks=pytest.mark.slow) for role in ROLES]
)
def test_authorization_matrix(role, world):
    observed = observe(role, world)
    column = ROLES.index(role)
    if dump := os.environ.get("FAIRTONE_MATRIX_DUMP"):
        with open(f"{dump}.{role}", "w") as out:
            for (template, method), got in observed.items():
                out.write(f"{template}\t{method}\t{got}\n")
    expected = {cell: answers.split()[column] for cell, answers in EXPECTED.items()}
    changed = [
        f"{method} {template}: expected {expected[(template, method)]}, got {got}"
        for (template, method), got in observed.items()
        if (template, method) in expected and expected[(template, method)] != got
    ]
    assert not changed, f"{role}: " + "; ".join(changed)


@pytest.mark.django_db
def test_the_one_rule_and_its_answers():
    """``selectors.project_access`` decides; ``errors.http_error`` answers (404 hides, 403 tells)."""
    from django.core.exceptions import PermissionDenied
    from django.http import Http404

    from labeling.errors import NotAMember, WrongRole, http_error
    from labeling.selectors import project_access

    lead, labeler, root = (UserFactory(username=n) for n in ("r-lead", "r-labeler", "r-root"))
    root.is_superuser = True
    root.save()
    project = ProjectFactory(created_by=lead)
    m = MembershipFactory(project=project, user=labeler)
    assert project_access(labeler, project, Membership.Role.LABELER) == m
    assert project_access(root, project, Membership.Role.LEAD) is None  # superusers pass as leads
    with pytest.raises(NotAMember):
        project_access(root, project, Membership.Role.LABELER)  # ...not as labelers
    with pytest.raises(WrongRole) as refused:
        project_access(labeler, project, Membership.Role.LEAD)
    assert isinstance(http_error(refused.value), PermissionDenied)
    with pytest.raises(WrongRole) as hidden:
        project_access(labeler, project, Membership.Role.LEAD, hide_from_other_roles=True)
    assert isinstance(http_error(hidden.value), Http404)
    with pytest.raises(NotAMember) as stranger:
        project_access(UserFactory(username="r-stranger"), project)
    assert isinstance(http_error(stranger.value), Http404)
