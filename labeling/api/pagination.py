"""The API's page numbers: one answer for every paginated list (``REST_FRAMEWORK["DEFAULT_PAGINATION_CLASS"]``).

``?page=`` is a whole number from 1 to :data:`MAX_PAGE` (the OpenAPI document says so, with these answers):

- absent or empty (``?page=``, as a form sends an unset field): the first page; spaces around are ignored;
- not a whole number (``abc``, ``1.5``, ``-1``, ``+2``, ``last``), 0, or above :data:`MAX_PAGE`: 400,
  ``{"page": ["..."]}`` (a malformed request, as for any other query parameter);
- a page past the last (``?page=9`` of a 3-page list): 404, ``{"detail": "Invalid page: there are 3 page(s)."}``
  (DRF's answer: no such page; the first page of an empty list is there, with no results).

``?page_size=`` is not read by these lists (50 a page); the data manager's table
(``api.views.data``) reads it with the same rules (1 to its maximum; empty: its default).
"""

from django.core.paginator import InvalidPage
from rest_framework import pagination
from rest_framework.exceptions import NotFound, ValidationError

#: The highest page number a request may name (the data manager's table has the same bound).
MAX_PAGE = 10**7
#: ``?page=`` in the OpenAPI document, for the views that declare their parameters themselves.
PAGE_SCHEMA = {"type": "integer", "minimum": 1, "maximum": MAX_PAGE}
PAGE_DESCRIPTION = (
    f"A page number (the first when absent or empty). Not a whole number from 1 to {MAX_PAGE}: 400; "
    "a page past the last: 404."
)


def page_number(raw: str | None, *, maximum: int = MAX_PAGE) -> int:
    """``raw`` (a query parameter's value) as a page number: 1 when absent or empty; ``ValidationError`` else."""
    raw = (raw or "").strip()
    if not raw:
        return 1
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= maximum:
        raise ValidationError({"page": [f"A whole number from 1 to {maximum}, or leave it out for the first page."]})
    return int(raw)


class PageNumberPagination(pagination.PageNumberPagination):
    last_page_strings = ()

    def get_page_number(self, request, paginator):
        return page_number(request.query_params.get(self.page_query_param))

    def paginate_queryset(self, queryset, request, view=None):
        self.request = request
        paginator = self.django_paginator_class(queryset, self.get_page_size(request))
        number = self.get_page_number(request, paginator)
        try:
            self.page = paginator.page(number)
        except InvalidPage:
            raise NotFound(f"Invalid page: there are {paginator.num_pages} page(s).") from None
        if paginator.num_pages > 1 and self.template is not None:
            self.display_page_controls = True
        return list(self.page)

    def get_schema_operation_parameters(self, view):
        return [
            {
                "name": self.page_query_param,
                "required": False,
                "in": "query",
                "description": PAGE_DESCRIPTION,
                "schema": dict(PAGE_SCHEMA),
            }
        ]
