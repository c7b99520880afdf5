"""The OpenAPI document's error answers, written once for every operation.

drf-spectacular documents the answer a view gives when all goes well; the errors come from the
same few places for every view, so they are documented here, from what the view is:

- 400 ``ValidationError``: a request body or query parameters that the view validates (a ``page`` that is
  not a whole number from 1 up: ``labeling.api.pagination``), and any
  change (POST, PUT, PATCH, DELETE) a service may refuse for the state of the data (a closed
  phase, a published release); per field (``{"field": ["message"]}``) or ``{"detail": "..."}``
  (``labeling.api.errors``);
- 401 (no or a bad token) and 403 (a role that may not do this, or a missing CSRF token with
  a session) for every operation that needs a signed-in user;
- 404 for an operation on an object named in the path (unknown, or not the requester's to
  know of: ``labeling.errors.http_error``), and for a page number past the last;
- 415 for an operation with a request body sent as another media type;
- 429 for a throttled view (the token endpoint: its rate and the per-username brake);
- 503 with ``Retry-After`` for every operation, while the database is unavailable
  (``labeling.middleware.DatabaseUnavailableMiddleware``).

An operation that documents a code itself (``extend_schema(responses=...)``) keeps its own.
"""

from drf_spectacular import openapi
from drf_spectacular.plumbing import ResolvedComponent

ERROR = {
    "type": "object",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}
VALIDATION_ERROR = {
    "type": "object",
    "description": "Per field: the field's name and its messages; ``detail`` when the request as a whole is refused.",
    "additionalProperties": {},
}
DESCRIPTIONS = {
    "400": "The request is invalid, or the data's state refuses it (the messages say why).",
    "401": "No credentials, or credentials that are not valid.",
    "403": "The requester's role may not do this.",
    "404": "No such object, or not one the requester may know of; or a page past the last.",
    "415": "The request body is not in a media type this operation reads.",
    "429": "Too many requests; retry later.",
    "503": "The database is unavailable just now; retry after ``Retry-After`` seconds.",
}


class AutoSchema(openapi.AutoSchema):
    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        for code in self._error_codes(operation):
            operation["responses"].setdefault(code, self._error_response(code))
        return operation

    def _error_codes(self, operation) -> list[str]:
        query = [p for p in operation.get("parameters", []) if p.get("in") == "query"]
        codes = []
        if "requestBody" in operation or query or self.method not in ("GET", "HEAD"):
            codes.append("400")
        security = operation.get("security", [])
        if security and {} not in security:
            codes += ["401", "403"]
        if "{" in self.path or any(p["name"] == "page" for p in query):
            codes.append("404")
        if "requestBody" in operation:
            codes.append("415")
        if getattr(self.view, "throttle_classes", None):
            codes.append("429")
        codes.append("503")
        return codes

    def _error_response(self, code: str) -> dict:
        name, schema = ("ValidationError", VALIDATION_ERROR) if code == "400" else ("Error", ERROR)
        component = ResolvedComponent(name=name, type=ResolvedComponent.SCHEMA, object=name, schema=schema)
        self.registry.register_on_missing(component)
        response = {"description": DESCRIPTIONS[code], "content": {"application/json": {"schema": component.ref}}}
        if code in ("429", "503"):
            response["headers"] = {
                "Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait before retrying."}
            }
        return response


#: Components whose alternatives overlap (one has every field of the other): ``anyOf``, not ``oneOf``.
ANY_OF = ("PhaseForRole",)


def postprocess(result, generator, request, public):
    """A postprocessing hook (``SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]``)."""
    schemas = result.get("components", {}).get("schemas", {})
    for name in ANY_OF:
        if "oneOf" in schemas.get(name, {}):
            schemas[name]["anyOf"] = schemas[name].pop("oneOf")
    return result
