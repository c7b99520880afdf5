"""``?ordering=``: only what the list documents, a 400 for anything else.

DRF's ``OrderingFilter`` derives the allowed fields from the serializer's sources, so a computed
field such as ``n_images`` (source ``images.count``) became ``?ordering=images__count``, which the
database cannot sort by (a 500); and unknown names were silently ignored. Here a term must name a
field of the serializer without a relation lookup (``__``), or one the view lists in ``ordering_fields``.
"""

from rest_framework.exceptions import ValidationError
from rest_framework.filters import OrderingFilter


class StrictOrderingFilter(OrderingFilter):
    def get_valid_fields(self, queryset, view, context=None):
        fields = super().get_valid_fields(queryset, view, context or {})
        if getattr(view, "ordering_fields", None) is None:
            fields = [(name, label) for name, label in fields if "__" not in name]
        return fields

    def get_ordering(self, request, queryset, view):
        params = request.query_params.get(self.ordering_param)
        if not params:
            return self.get_default_ordering(view)
        terms = [term.strip() for term in params.split(",") if term.strip()]
        valid = {name for name, _label in self.get_valid_fields(queryset, view, {"request": request})}
        unknown = [term for term in terms if term.lstrip("-") not in valid]
        if unknown:
            raise ValidationError(
                {"ordering": f"Cannot sort by {', '.join(unknown)[:200]}; one of: {', '.join(sorted(valid))}."}
            )
        return terms

    def get_schema_operation_parameters(self, view):
        """``ordering`` with the names it accepts (each, or ``-`` and the name for descending): the
        document says what the 400 above refuses."""
        parameters = super().get_schema_operation_parameters(view)
        try:
            valid = sorted(name for name, _label in self.get_valid_fields(view.get_queryset(), view, {}))
        except Exception:  # a view whose fields cannot be known without a request: described as before
            return parameters
        for parameter in parameters:
            if parameter["name"] == self.ordering_param and valid:
                # "": the default order (an empty ``?ordering=`` is read as none).
                terms = ["", *(f"{sign}{n}" for n in valid for sign in ("", "-"))]
                parameter["schema"] = {"type": "string", "enum": terms}
        return parameters
