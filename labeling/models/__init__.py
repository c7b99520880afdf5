"""FairTone's data model, split by domain.

- ``scales``: scales and their ordered tones.
- ``accounts``: the per-username brake on password guessing, who created a sign-in.
- ``projects``: projects, memberships (roles, pseudonyms, labeler profiles), tone examples.
- ``images``: subjects, images, masks, imports and their per-row reports.
- ``phases``: the four labeling phases, the images in each, per-labeler assignments.
- ``labels``: labels with append-only revisions, reflections.
- ``jobs``: background jobs, colorimetric baselines, evaluation runs.
- ``review``: reopened phases (with the reason), post-calibration review decisions, images a lead
  excluded from the dataset (with the reason).
- ``releases``: dataset releases (versioned, immutable once published) and their images.
- ``audit``: the append-only audit log of what leads and staff do.
- ``erasure``: the record that a subject was erased on request.
- ``validation``: tone-stratified samples of images given skin masks, to score the baseline (issue 21).
"""

from .accounts import AccountOrigin, SigninFailure
from .audit import AuditEntry, AuditImmutable
from .erasure import SubjectErasure
from .images import Image, ImportBatch, ImportItem, Subject
from .jobs import EvaluationGate, EvaluationRun, ImageBaseline, Job, PendingTask
from .labels import Label, LabelRevision, Reflection
from .phases import Assignment, Phase, PhaseImage, PhaseParticipant
from .projects import Membership, Project, ToneExample
from .releases import Release, ReleaseImage, ReleaseImmutable
from .review import ImageExclusion, PhaseReopening, ReviewDecision
from .scales import Scale, Tone
from .validation import MaskSample, MaskSampleItem

__all__ = [
    "AccountOrigin",
    "AuditEntry",
    "AuditImmutable",
    "Assignment",
    "EvaluationGate",
    "EvaluationRun",
    "Image",
    "ImageBaseline",
    "ImageExclusion",
    "ImportBatch",
    "ImportItem",
    "MaskSample",
    "MaskSampleItem",
    "Job",
    "Label",
    "LabelRevision",
    "Membership",
    "PendingTask",
    "Phase",
    "PhaseImage",
    "PhaseParticipant",
    "PhaseReopening",
    "Project",
    "Reflection",
    "Release",
    "ReleaseImage",
    "ReleaseImmutable",
    "ReviewDecision",
    "Scale",
    "SigninFailure",
    "Subject",
    "SubjectErasure",
    "Tone",
    "ToneExample",
]
