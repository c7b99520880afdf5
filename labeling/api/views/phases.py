"""``/api/phases/{id}/``: a phase for its lead (open, close, progress, reflections, review, label
imports) and for its labelers (the next image, submitting answers, the reflection)."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from ... import selectors
from ...models import Membership, Phase
from ...services import labels as label_services
from ...services import phases as phase_services
from .. import serializers as s
from .common import phase_for_role

_IMAGE = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "width": {"type": "integer", "nullable": True},
        "height": {"type": "integer", "nullable": True},
        "display_url": {"type": "string"},
        "box": {
            "type": "object",
            "nullable": True,
            "description": "The person to label, when the photo shows several: their box in pixels of the "
            "photo (width x height); null for the whole photo.",
            "properties": {k: {"type": "integer"} for k in ("x", "y", "width", "height")},
        },
    },
    "required": ["id", "display_url", "box"],
}
_ASSIGNMENT = {
    "type": "object",
    "nullable": True,
    "properties": {
        "id": {"type": "integer"},
        "position": {"type": "integer"},
        "kind": {"type": "string"},
        "request_reason": {"type": "string"},
        "image": _IMAGE,
    },
    "required": ["id", "position", "kind", "image"],
}
_MY_LABEL = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "image": {"type": "integer"},
        "tones": {"type": "array", "items": {"type": "integer"}},
        "value": {"type": "number", "nullable": True},
        "uncertain": {"type": "boolean"},
        "skip_reason": {"type": "string"},
        "n_revisions": {"type": "integer"},
        "updated_at": {"type": "string", "format": "date-time"},
    },
    "required": ["id", "image", "tones", "n_revisions"],
}
#: ``GET next/``: the labeler's next image, the one after it (to preload), and their progress.
NEXT = {
    "type": "object",
    "properties": {
        "phase": {
            "type": "object",
            "properties": {"id": {"type": "integer"}, "kind": {"type": "string"}, "status": {"type": "string"}},
        },
        "done": {"type": "integer"},
        "total": {"type": "integer"},
        "current": _ASSIGNMENT,
        "preload": _ASSIGNMENT,
    },
    "required": ["phase", "done", "total", "current", "preload"],
}
#: ``GET labels/``: the labeler's own answers in this phase, in the order shown.
MY_LABELS = {
    "type": "array",
    "items": {
        "allOf": [
            _MY_LABEL,
            {
                "type": "object",
                "properties": {
                    "position": {"type": "integer"},
                    "display_url": {"type": "string"},
                    "box": _IMAGE["properties"]["box"],
                    "width": {"type": "integer"},
                    "height": {"type": "integer"},
                },
            },
        ]
    },
}
#: ``POST labels/``: the answer as stored, and the next images.
SUBMITTED = {
    "type": "object",
    "properties": {
        "label": _MY_LABEL,
        "revision": {"type": "integer"},
        "next": _ASSIGNMENT,
        "preload": _ASSIGNMENT,
    },
    "required": ["label", "revision", "next", "preload"],
}


def assignment_payload(assignment) -> dict:
    """What a labeler gets about the next image: nothing but the picture (blind labeling).

    The same fields as ``AssignmentSerializer``, built directly: this is on every submit.
    """
    image = assignment.image
    return assignment_fields(
        id=assignment.id,
        position=assignment.position,
        kind=assignment.kind,
        request_reason=assignment.request_reason,
        image_id=image.id,
        width=image.width,
        height=image.height,
        box_x=image.box_x,
        box_y=image.box_y,
        box_width=image.box_width,
        box_height=image.box_height,
    )


def assignment_fields(
    *, id, position, kind, request_reason, image_id, width, height, box_x, box_y, box_width, box_height
) -> dict:
    """:func:`assignment_payload` from the values (the fast submit path reads them in its statement)."""
    return {
        "id": id,
        "position": position,
        "kind": kind,
        # Why a lead sent this image (back) to the labeler; empty for the phase's own images.
        "request_reason": request_reason,
        "image": {
            "id": image_id,
            "width": width,
            "height": height,
            "display_url": f"/images/{image_id}/file/display/",
            # One person's box in a photo of several (the labeling page highlights it), or None.
            "box": box_payload(box_x, box_y, box_width, box_height),
        },
    }


def box_payload(x, y, width, height) -> dict | None:
    """A box as the labeling page takes it (``Image.box_dict``'s shape), or None for a whole photo."""
    return None if x is None else {"x": x, "y": y, "width": width, "height": height}


def _queue_payload(phase: Phase, m: Membership) -> dict:
    queue = selectors.assignment_queue(phase=phase, labeler=m, limit=2)
    return {
        "current": assignment_payload(queue[0]) if queue else None,
        "preload": assignment_payload(queue[1]) if len(queue) > 1 else None,
    }


def _own_label_payload(label, own: dict) -> dict:
    """A label as its labeler sees it: their own latest answer (``selectors.labeler_own_answers``),
    never a lead's correction. The same fields as ``MyLabelSerializer``."""
    return {
        "id": label.id,
        "image": label.image_id,
        "tones": [t for t in (own["tone_low"], own["tone_high"]) if t is not None],
        "value": own["value"],
        "uncertain": own["uncertain"],
        "skip_reason": own["skip_reason"],
        "n_revisions": own["n_revisions"],
        "updated_at": own["created_at"],
    }


def _submitted_payload(revision) -> dict:
    """The label as its labeler sees it right after a submit: the answer just stored (or replayed)."""
    own = {f: getattr(revision, f) for f in ("tone_low", "tone_high", "value", "uncertain", "skip_reason")}
    # A first answer is its own first revision (the hot path: no query); otherwise count the labeler's own.
    if revision.number == 1:
        own["n_revisions"] = 1
    else:
        own["n_revisions"] = selectors.labeler_own_answers([revision.label_id])[revision.label_id]["n_revisions"]
    own["created_at"] = revision.created_at
    return _own_label_payload(revision.label, own)


class PhaseViewSet(viewsets.GenericViewSet, mixins.RetrieveModelMixin):
    serializer_class = s.PhaseSerializer
    queryset = Phase.objects.select_related("project", "project__scale")

    @extend_schema(responses=phase_for_role())
    def retrieve(self, request, *args, **kwargs):
        phase = self.get_object()
        if self.membership is not None and self.membership.role == Membership.Role.LABELER:
            return Response(s.LabelerPhaseSerializer(phase).data)
        return Response(s.PhaseSerializer(phase).data)

    def get_object(self):
        """The phase for any member; a labeler only sees the phases they take part in."""
        phase = super().get_object()
        self.membership = selectors.project_access(self.request.user, phase.project)
        if (
            self.membership
            and self.membership.role == Membership.Role.LABELER
            and not phase.assignments.filter(labeler=self.membership).exists()
        ):
            raise NotFound()
        return phase

    def _lead(self) -> Phase:
        phase = self.get_object()
        selectors.project_access(self.request.user, phase.project, Membership.Role.LEAD)
        return phase

    def _labeler(self) -> tuple[Phase, Membership]:
        """The phase and the requester's labeler membership (the labeling hot path: two queries).

        A labeler of the project who takes no part in the phase gets empty results
        (``next`` answers 404), never another labeler's data.
        """
        phase = super().get_object()
        m = selectors.project_access(self.request.user, phase.project, Membership.Role.LABELER)
        m.user = self.request.user
        m.project = phase.project
        return phase, m

    @extend_schema(request=s.PhaseOpenSerializer, responses=s.PhaseSerializer)
    @action(detail=True, methods=["post"])
    def open(self, request, pk=None):
        phase = self._lead()
        data = s.PhaseOpenSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        phase = phase_services.phase_open(phase=phase, **data.validated_data)
        return Response(s.PhaseSerializer(phase).data)

    @extend_schema(request=None, responses=s.PhaseSerializer)
    @action(detail=True, methods=["post"])
    def close(self, request, pk=None):
        phase = phase_services.phase_close(phase=self._lead())
        return Response(s.PhaseSerializer(phase).data)

    @extend_schema(request=s.LabelsPerImageSerializer, responses=s.PhaseSerializer)
    @action(detail=True, methods=["post"], url_path="labels-per-image")
    def labels_per_image(self, request, pk=None):
        phase = self._lead()
        data = s.LabelsPerImageSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        added = phase_services.phase_set_labels_per_image(phase=phase, **data.validated_data)
        phase.refresh_from_db()
        return Response({**s.PhaseSerializer(phase).data, "assignments_added": added})

    @extend_schema(
        responses=OpenApiTypes.OBJECT,
        description="A lead: every labeler's progress; a labeler: ``phase_id``, ``status`` and their own (``me``).",
    )
    @action(detail=True, methods=["get"])
    def progress(self, request, pk=None):
        phase = self.get_object()
        m = self.membership
        report = phase_services.phase_progress(phase)
        if m is not None and m.role == Membership.Role.LABELER:
            mine = [r for r in report["labelers"] if r["labeler_id"] == m.id]
            return Response({"phase_id": phase.id, "status": phase.status, "me": mine[0] if mine else None})
        selectors.project_access(request.user, phase.project, Membership.Role.LEAD)
        return Response(report)

    @extend_schema(responses={200: NEXT})
    @action(detail=True, methods=["get"])
    def next(self, request, pk=None):
        """My next image in this phase, the one after it (to preload), and my progress."""
        phase, m = self._labeler()
        counts = selectors.labeler_progress(phase=phase, labeler=m)
        if not counts["total"]:
            raise NotFound()
        return Response(
            {
                "phase": {"id": phase.id, "kind": phase.kind, "status": phase.status},
                "done": counts["done"],
                "total": counts["total"],
                **_queue_payload(phase, m),
            }
        )

    @extend_schema(methods=["GET"], responses={200: MY_LABELS})
    @extend_schema(
        methods=["POST"],
        request=s.LabelSubmitSerializer,
        responses={201: SUBMITTED, 200: OpenApiResponse(SUBMITTED, description="A changed answer, or a replay.")},
    )
    @action(detail=True, methods=["get", "post"], pagination_class=None)
    def labels(self, request, pk=None):
        """GET: my answers in this phase (in the order shown). POST: submit an answer (idempotent on client_id)."""
        phase, m = self._labeler()
        if request.method == "GET":
            history = selectors.labeler_history(phase=phase, labeler=m)
            own = selectors.labeler_own_answers([h["label"].id for h in history])
            return Response(
                [
                    {
                        **_own_label_payload(h["label"], own[h["label"].id]),
                        "position": h["assignment"].position,
                        "display_url": s.LabelerImageSerializer(h["assignment"].image).data["display_url"],
                        "box": h["assignment"].image.box_dict,
                        "width": h["assignment"].image.width,
                        "height": h["assignment"].image.height,
                    }
                    for h in history
                ]
            )
        data = s.LabelSubmitSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        revision = label_services.label_submit(
            phase=phase,
            labeler=m,
            image_id=v["image"],
            client_id=v["client_id"],
            tones=v.get("tones"),
            uncertain=v["uncertain"],
            skip_reason=v["skip_reason"],
            time_spent_ms=v["time_spent_ms"],
            tone_order=v.get("tone_order"),
            client_info=v.get("client_info"),
        )
        queue = _queue_payload(phase, m)
        label = _submitted_payload(revision)
        return Response(
            {
                "label": label,
                # The labeler's own revision number (a lead's corrections are not theirs to see).
                "revision": label["n_revisions"],
                "next": queue["current"],
                "preload": queue["preload"],
            },
            # 201: a new label; 200: a changed answer, or a replay of a submit already stored.
            status=status.HTTP_201_CREATED
            if revision.number == 1 and not getattr(revision, "replayed", False)
            else status.HTTP_200_OK,
        )

    @extend_schema(request=s.ReflectionSerializer, responses=s.ReflectionSerializer)
    @action(detail=True, methods=["get", "put"])
    def reflection(self, request, pk=None):
        """My reflection at the end of a calibration phase."""
        phase, m = self._labeler()
        if request.method == "GET":
            reflection = phase.reflections.filter(labeler=m).first()
            if reflection is None:
                raise NotFound("No reflection yet.")
            return Response(s.ReflectionSerializer(reflection).data)
        data = s.ReflectionSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        reflection = label_services.reflection_submit(phase=phase, labeler=m, **data.validated_data)
        return Response(s.ReflectionSerializer(reflection).data)

    @extend_schema(responses=s.ReflectionSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None)
    def reflections(self, request, pk=None):
        """Every labeler's reflection, side by side (leads)."""
        phase = self._lead()
        return Response(s.ReflectionSerializer(phase.reflections.select_related("labeler"), many=True).data)

    @extend_schema(
        request={
            "multipart/form-data": {"type": "object", "properties": {"file": {"type": "string", "format": "binary"}}}
        },
        responses={200: OpenApiTypes.OBJECT},
    )
    @action(detail=True, methods=["post"], url_path="labels-import", parser_classes=[MultiPartParser])
    def labels_import(self, request, pk=None):
        """Import labels made elsewhere (CSV: image_id, labeler, tones, uncertain, skip_reason, time_spent_s)."""
        from ...services.label_imports import labels_import

        phase = self._lead()
        upload = request.FILES.get("file")
        if upload is None:
            raise ValidationError({"file": "Send a CSV file as 'file'."})
        if upload.size > 50 * 1024 * 1024:
            raise ValidationError({"file": "At most 50 MB."})
        return Response(labels_import(phase=phase, data=upload.read(), user=request.user))

    @extend_schema(responses=OpenApiTypes.OBJECT)
    @action(detail=True, methods=["get"])
    def review(self, request, pk=None):
        """Images that look like mistakes (an outlying selection, skips, uncertain or invalid labels), each
        with its state (open, waiting for a relabel, relabelled, accepted, resolved) and the progress counts."""
        from ...services.review_decisions import review_report

        phase = self._lead()
        return Response(review_report(phase))
