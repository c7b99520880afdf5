"""Imports of many images at once: browser uploads, zip archives and manifests.

Each import is an ``ImportBatch`` with one ``ImportItem`` per file (or manifest
row) saying imported, duplicate or rejected, and why. An import that cannot be
trusted as a whole (a bad or malicious archive, an unreadable manifest) is refused
before any image is created; otherwise every file or row is its own atomic unit.

Modules: ``batches`` (the three entry points), ``report`` (a batch's report and the
atomic creation of one image), ``sources`` (zip archives and server folders, with
their safety checks), ``manifest`` (reading CSV / JSON Lines into rows and cells),
``rows`` (importing the rows of a manifest). Callers import the names below from
``labeling.services.imports``.
"""

from .batches import import_files, import_manifest, import_zip
from .manifest import is_formula_like, parse_cell
from .report import ImportRefused, ImportTooLarge

__all__ = [
    "ImportRefused",
    "ImportTooLarge",
    "import_files",
    "import_manifest",
    "import_zip",
    "is_formula_like",
    "parse_cell",
]
