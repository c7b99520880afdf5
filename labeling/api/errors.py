"""The API's exception handler: domain errors become clear 4xx answers, in this one place.

Views raise what the domain raises (``AccessDenied`` from ``selectors.project_access``,
Django's ``ValidationError`` from services) and never translate it themselves; pages use
the same mapping (``labeling.errors``) through ``views.access``. Never a 500 for bad input.
"""

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from ..errors import AccessDenied, error_fields, http_error


def exception_handler(exc, context):
    if isinstance(exc, AccessDenied):
        exc = http_error(exc)
    if isinstance(exc, DjangoValidationError):
        return Response(error_fields(exc), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    return drf_exception_handler(exc, context)
