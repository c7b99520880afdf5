"""Where a release's files live, and which of them may be served.

``MEDIA_ROOT/releases/<project id>/v<version>/`` holds a published release's files and
``MEDIA_ROOT/releases/<project id>/fairtone-<slug>-v<version>.zip`` its archive. A release being built
writes into ``<version>.tmp-<random>`` beside them, renamed into place when it is published.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from django.conf import settings
from django.utils.text import slugify

from ...models import Project, Release
from .bundle import MANIFEST_NAME

TMP_MARK = ".tmp-"


def releases_root() -> Path:
    return Path(settings.MEDIA_ROOT) / "releases"


def project_releases_dir(project_id: int) -> Path:
    return releases_root() / str(int(project_id))


def release_dir(release: Release) -> Path:
    """The published release's directory."""
    return project_releases_dir(release.project_id) / f"v{int(release.version)}"


def zip_top(project: Project, version: int) -> str:
    """The archive's top folder (and its file name without ``.zip``): ``fairtone-<project slug>-v<version>``."""
    slug = slugify(project.name)[:60].strip("-") or f"project-{project.pk}"
    return f"fairtone-{slug}-v{int(version)}"


def release_zip_path(release: Release) -> Path | None:
    """The published archive (its name is recorded in the manifest: a renamed project keeps it)."""
    name = (release.manifest or {}).get("zip", {}).get("name")
    return project_releases_dir(release.project_id) / name if name else None


def release_file_path(release: Release, relative: str) -> Path | None:
    """The file ``relative`` of a published release if the manifest lists it (or it is the manifest), else None.

    Only names the manifest lists are served: no other path (``..``, absolute, symbolic links) can be asked for.
    """
    if release.status != Release.Status.PUBLISHED:
        return None
    files = (release.manifest or {}).get("files", {})
    if relative != MANIFEST_NAME and relative not in files:
        return None
    base = release_dir(release).resolve()
    path = (base / relative).resolve()
    if base not in path.parents or not path.is_file():
        return None
    return path


def remove_quietly(path: Path) -> None:
    """Remove a file or a directory tree; a missing one is fine."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    except OSError:
        pass


def leftovers_remove(project_id: int, version: int, inactive_versions: set[int]) -> None:
    """Remove what unfinished builds left: temporary files of ``version`` (a retried or restarted build)
    and of any release no longer being built (``inactive_versions``: failed or cancelled)."""
    directory = project_releases_dir(project_id)
    if not directory.is_dir():
        return
    for entry in directory.iterdir():
        head, mark, _rest = entry.name.partition(TMP_MARK)
        if mark and head.isdigit() and (int(head) == version or int(head) in inactive_versions):
            remove_quietly(entry)
