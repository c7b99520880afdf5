"""``/api/jobs/{id}/``: a background job's progress (leads)."""

from rest_framework import mixins, viewsets

from ... import selectors
from ...models import Job, Membership
from .. import serializers as s


class JobViewSet(viewsets.GenericViewSet, mixins.RetrieveModelMixin):
    serializer_class = s.JobSerializer
    queryset = Job.objects.select_related("project")

    def get_object(self):
        job = super().get_object()
        selectors.project_access(self.request.user, job.project, Membership.Role.LEAD)
        return job
