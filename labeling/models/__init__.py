"""FairTone's data model, split by domain.

- ``scales``: scales and their ordered tones.
- ``projects``: projects, memberships (roles, pseudonyms, labeler profiles), tone examples.
- ``images``: subjects, images, masks, imports and their per-row reports.
- ``phases``: the four labeling phases, the images in each, per-labeler assignments.
- ``labels``: labels with append-only revisions, reflections.
- ``jobs``: background jobs, colorimetric baselines, dataset exports, evaluation runs.
"""

from .images import Image, ImportBatch, ImportItem, Subject
from .jobs import DatasetExport, EvaluationRun, ImageBaseline, Job
from .labels import Label, LabelRevision, Reflection
from .phases import Assignment, Phase, PhaseImage, PhaseParticipant
from .projects import Membership, Project, ToneExample
from .scales import Scale, Tone

__all__ = [
    "Assignment",
    "DatasetExport",
    "EvaluationRun",
    "Image",
    "ImageBaseline",
    "ImportBatch",
    "ImportItem",
    "Job",
    "Label",
    "LabelRevision",
    "Membership",
    "Phase",
    "PhaseImage",
    "PhaseParticipant",
    "Project",
    "Reflection",
    "Scale",
    "Subject",
    "Tone",
    "ToneExample",
]
