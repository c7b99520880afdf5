"""``/api/phases/{id}/reopen/`` and ``/api/phases/{id}/close-summary/``: a lead's safe phase control.

Closing ends a phase for the whole team, so a lead reads what it means first (the unfinished
assignments) and can reopen a closed phase, with a recorded reason, while the next one has not started.
"""

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from ... import selectors
from ...models import Image, Membership, Phase
from ...services import phases as phase_services
from ...services import review_decisions
from ...services.progress import phase_labels_per_day
from .. import serializers as s


class ReviewDecisionSerializer(serializers.Serializer):
    image = serializers.IntegerField(help_text="The image's id (``id`` in the review's candidates).")
    state = serializers.ChoiceField(
        choices=["accepted", "resolved", "open"],
        help_text="accepted (labels fine as they are), resolved (fixed), or open (withdraw the decision).",
    )
    note = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class PhaseControlViewSet(viewsets.GenericViewSet):
    serializer_class = s.PhaseSerializer
    queryset = Phase.objects.select_related("project")

    def _lead(self) -> Phase:
        phase = self.get_object()
        selectors.project_access(self.request.user, phase.project, Membership.Role.LEAD)
        return phase

    @extend_schema(
        responses=inline_serializer(
            "PhaseCloseSummary",
            {
                "n_unfinished": serializers.IntegerField(),
                "unfinished_by_labeler": serializers.DictField(child=serializers.IntegerField()),
                "can_reopen_after_close": serializers.BooleanField(),
            },
        )
    )
    @action(detail=True, methods=["get"], url_path="close-summary")
    def close_summary(self, request, pk=None):
        """What closing the phase means: the assignments that would stay unfinished, per labeler."""
        phase = self._lead()
        following = phase_services.phase_next(phase)
        return Response(
            {
                **phase_services.phase_close_summary(phase),
                "can_reopen_after_close": following is None or following.status == Phase.Status.DRAFT,
            }
        )

    @extend_schema(
        responses=inline_serializer(
            "PhaseProgressOverTime",
            {
                "days": serializers.ListField(child=serializers.DateField()),
                "labelers": serializers.ListField(
                    child=inline_serializer(
                        "LabelerLabelsPerDay",
                        {
                            "pseudonym": serializers.CharField(),
                            "per_day": serializers.ListField(child=serializers.IntegerField()),
                            "total": serializers.IntegerField(),
                        },
                    )
                ),
                "per_day": serializers.ListField(child=serializers.IntegerField()),
                "total": serializers.IntegerField(),
                "first_day": serializers.DateField(allow_null=True),
                "last_day": serializers.DateField(allow_null=True),
                "truncated": serializers.BooleanField(),
            },
        )
    )
    @action(detail=True, methods=["get"], url_path="progress-over-time")
    def progress_over_time(self, request, pk=None):
        """Labels per day (UTC, the day of each label's first answer) and per labeler, from the first day with a
        label to the last (days without labels count 0): the phase page's chart as numbers (leads)."""
        return Response(phase_labels_per_day(self._lead()))

    @extend_schema(request=s.PhaseReopenSerializer, responses=s.PhaseSerializer)
    @action(detail=True, methods=["post"])
    def reopen(self, request, pk=None):
        """Open a closed phase again (recorded with the reason), while the next phase has not started."""
        phase = self._lead()
        data = s.PhaseReopenSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        phase_services.phase_reopen(phase=phase, user=request.user, **data.validated_data)
        phase.refresh_from_db()
        return Response(s.PhaseSerializer(phase).data)

    @extend_schema(request=ReviewDecisionSerializer, responses={200: dict})
    @action(detail=True, methods=["post"], url_path="review-decisions")
    def review_decisions(self, request, pk=None):
        """Decide an image of the review: accepted as labelled, resolved, or open again (withdrawn).
        Answers the review's progress counts."""
        phase = self._lead()
        data = ReviewDecisionSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        image = Image.objects.filter(pk=v["image"], project_id=phase.project_id).first()
        if image is None:
            raise serializers.ValidationError({"image": ["No such image in this project."]})
        if v["state"] == "open":
            review_decisions.review_withdraw(phase=phase, image=image)
        else:
            review_decisions.review_decide(
                phase=phase, image=image, state=v["state"], user=request.user, note=v["note"]
            )
        return Response(review_decisions.review_report(phase, limit=0)["progress"])
