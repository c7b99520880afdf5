"""The ``id`` path converter: a database id is 1 to 18 digits (issue 26).

Django's ``int`` converter takes any number of digits, and an id beyond PostgreSQL's bigint (9.2e18: 19
digits) reached the database as "integer out of range" (answered 503, and it broke the transaction of every
request after it in the deep schemathesis run). Ids longer than 18 digits cannot exist, so such a path is a 404
from the URL resolver, before any query. ``ID_PATTERN`` is the same rule for the API router's regexes.
"""

from django.urls import register_converter

#: A database id in a URL: 1 to 18 digits (below PostgreSQL's and SQLite's 64-bit limit).
ID_PATTERN = "[0-9]{1,18}"


class IdConverter:
    regex = ID_PATTERN

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int | str) -> str:
        return str(int(value))


register_converter(IdConverter, "id")
