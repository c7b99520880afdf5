"""Request parsers: DRF's, with nesting too deep for Python's JSON decoder answered as a 400.

``json.loads`` recurses once per nesting level: ``[[[[...]]]]`` 100,000 deep raises ``RecursionError``,
which DRF's ``JSONParser`` does not catch (a 500, reachable anonymously on ``/api/auth/token/``).
"""

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the document is nested too deeply.") from None


#: The API's parsers (``REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]`` and views that name their own).
DEFAULT = [JSONParser, parsers.FormParser, parsers.MultiPartParser]
