"""``/api/jobs/{id}/``: a background job's progress (leads); an import's job is recounted while it runs."""

from rest_framework import mixins, viewsets

from ... import selectors
from ...models import Job, Membership
from ...services.image_jobs import image_job_refresh
from .. import serializers as s


class JobViewSet(viewsets.GenericViewSet, mixins.RetrieveModelMixin):
    serializer_class = s.JobSerializer
    queryset = Job.objects.select_related("project")

    def get_object(self):
        job = super().get_object()
        selectors.project_access(self.request.user, job.project, Membership.Role.LEAD)
        if job.kind == Job.Kind.DERIVATIVES and job.status in (Job.Status.QUEUED, Job.Status.RUNNING):
            job = image_job_refresh(job.pk, alive=False) or job
        return job
