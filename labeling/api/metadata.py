"""DRF's ``OPTIONS`` answer, for every view: the form of its writes when it has a serializer to describe them.

DRF's ``SimpleMetadata`` asks each view for its serializer to describe POST and PUT; a view that builds its
request bodies itself (the dashboards' ``/api/projects/{id}/baselines/run/``) has none, and DRF's assertion
was a 500. Such a view answers ``OPTIONS`` without the ``actions`` part.
"""

from rest_framework.metadata import SimpleMetadata


class Metadata(SimpleMetadata):
    def determine_actions(self, request, view):
        # Imported here: DRF reads this class while rest_framework.views (which generics imports) loads.
        from rest_framework.generics import GenericAPIView

        own_choice = type(view).get_serializer_class is not GenericAPIView.get_serializer_class
        if getattr(view, "serializer_class", None) is None and not own_choice:
            return {}
        return super().determine_actions(request, view)
