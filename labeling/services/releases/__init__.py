"""Fairness-evaluation dataset releases: final labels, readiness, the release files and their data card.

A lead checks the project's readiness (:func:`release_readiness`: the images of each category, to include
or exclude explicitly), then asks for a release (:func:`release_request`); a background task builds it
(:func:`release_build`): every file is written into a temporary directory, renamed into place and the
release published in one transaction. A published release never changes; a later correction makes
the next version, and :func:`release_diff` says what moved.

Modules, each importing only those before it: ``bundle`` (the file writers, no Django), ``rules``
(choices and validation), ``finalise`` (the database in chunks -> ``metrics.finalise.final_tones``),
``readiness``, ``tables`` (the schemas and rows of the images, labels and labelers tables), ``storage``
(paths, which files may be served), ``diff``, ``memory`` (freed memory back to the system between stages),
``agreement`` (a phase's agreement in chunks of images), ``card_facts`` and ``card`` (the data card), ``croissant``
(``croissant.json`` and the imagefolder's Hub dataset card), ``build``,
``lifecycle`` (request, cancel), ``reimport`` (a release back into a new project). Callers import the names below from ``labeling.services.releases``.
"""

from .build import (
    RELEASE_FORMAT_VERSION,
    RELEASE_TASK_SOFT_TIME_LIMIT,
    RELEASE_TASK_TIME_LIMIT,
    code_version,
    release_build,
    release_fail,
    release_write,
)
from .diff import release_diff
from .finalise import CHUNK_IMAGES, counted_labels, project_has_labels, release_chunks
from .lifecycle import release_cancel, release_request
from .readiness import MAX_EXAMPLES, release_readiness, release_readiness_cached
from .reimport import release_import
from .rules import (
    CARD_FIELDS,
    CARD_REQUIRED,
    CARD_SECTIONS,
    CATEGORIES,
    DEFAULT_INCLUDE,
    DEFAULT_MIN_VALID_LABELS,
    card_text_clean,
    rule_clean,
)
from .storage import (
    release_dir,
    release_file_local,
    release_file_name,
    release_file_path,
    release_zip_name,
    release_zip_path,
)

__all__ = [
    "CARD_FIELDS",
    "CARD_REQUIRED",
    "CARD_SECTIONS",
    "CATEGORIES",
    "CHUNK_IMAGES",
    "DEFAULT_INCLUDE",
    "DEFAULT_MIN_VALID_LABELS",
    "MAX_EXAMPLES",
    "RELEASE_FORMAT_VERSION",
    "RELEASE_TASK_SOFT_TIME_LIMIT",
    "RELEASE_TASK_TIME_LIMIT",
    "card_text_clean",
    "code_version",
    "counted_labels",
    "project_has_labels",
    "release_build",
    "release_cancel",
    "release_chunks",
    "release_diff",
    "release_dir",
    "release_fail",
    "release_import",
    "release_file_local",
    "release_file_name",
    "release_file_path",
    "release_readiness",
    "release_readiness_cached",
    "release_request",
    "release_write",
    "release_zip_name",
    "release_zip_path",
    "rule_clean",
]
