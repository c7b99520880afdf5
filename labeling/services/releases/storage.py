"""Where a release's files live, and which of them may be served.

Stored through the media storage (the local disk or an S3 bucket, issue 25) under the names
``releases/<project id>/v<version>/<file>`` (a published release's files) and
``releases/<project id>/fairtone-<slug>-v<version>.zip`` (its archive). A release is built in a local working
folder (``<version>.tmp-<random>`` beside the published ones on the local disk, a temporary folder of the
worker otherwise) and then put into place: renamed on the local disk, uploaded file by file to a bucket,
before the transaction that publishes it (an unpublished release's files are never served, and are removed).
"""

from __future__ import annotations

import posixpath
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.core.files.storage import default_storage
from django.utils.text import slugify

from ...models import Project, Release
from ..media_files import local_copy, storage_delete_quietly, storage_delete_tree, storage_local_path
from .bundle import MANIFEST_NAME

TMP_MARK = ".tmp-"
RELEASES = "releases"


def project_releases_prefix(project_id: int) -> str:
    return f"{RELEASES}/{int(project_id)}"


def release_prefix(release: Release) -> str:
    """The storage folder of the published release's files."""
    return f"{project_releases_prefix(release.project_id)}/v{int(release.version)}"


def storage_local() -> bool:
    """True when releases are stored on this machine's disk (they can be renamed into place)."""
    return storage_local_path(RELEASES) is not None


def releases_root() -> Path:
    """The local folder of the releases (local disk only)."""
    path = storage_local_path(RELEASES)
    if path is None:
        raise NotImplementedError("releases are not stored on the local disk")
    return path


def project_releases_dir(project_id: int) -> Path:
    """The local folder of a project's releases (local disk only: tests and benches)."""
    return releases_root() / str(int(project_id))


def release_dir(release: Release) -> Path:
    """The published release's local folder (local disk only: tests and benches)."""
    return project_releases_dir(release.project_id) / f"v{int(release.version)}"


def work_dir(project_id: int) -> Path:
    """Where a build writes before its files are put into place: beside the releases on the local disk (renamed
    into place), a temporary folder of this process when they go to a bucket (uploaded, then removed)."""
    if storage_local():
        directory = project_releases_dir(project_id)
        directory.mkdir(parents=True, exist_ok=True)
        return directory
    return Path(tempfile.mkdtemp(prefix=f"fairtone-release-{int(project_id)}-"))


def zip_top(project: Project, version: int) -> str:
    """The archive's top folder (and its file name without ``.zip``): ``fairtone-<project slug>-v<version>``."""
    slug = slugify(project.name)[:60].strip("-") or f"project-{project.pk}"
    return f"fairtone-{slug}-v{int(version)}"


def release_zip_name(release: Release) -> str | None:
    """The storage name of the published archive if there is one (its name is in the manifest: a renamed
    project keeps it), else None."""
    if release.status != Release.Status.PUBLISHED:
        return None
    file_name = (release.manifest or {}).get("zip", {}).get("name")
    if not file_name:
        return None
    name = f"{project_releases_prefix(release.project_id)}/{file_name}"
    return name if default_storage.exists(name) else None


def release_zip_path(release: Release) -> Path | None:
    """The published archive's local path (local disk only: tests and benches), or None."""
    file_name = (release.manifest or {}).get("zip", {}).get("name")
    return project_releases_dir(release.project_id) / file_name if file_name else None


def _listed(release: Release, relative: str) -> bool:
    if release.status != Release.Status.PUBLISHED:
        return False
    files = (release.manifest or {}).get("files", {})
    if relative != MANIFEST_NAME and relative not in files:
        return False
    normal = posixpath.normpath(relative)
    return bool(relative) and normal == relative and not normal.startswith(("/", "..")) and "\\" not in relative


def release_file_name(release: Release, relative: str) -> str | None:
    """The storage name of the file ``relative`` of a published release if the manifest lists it (or it is the
    manifest) and it is stored, else None. Only names the manifest lists are served: no other path (``..``,
    absolute) can be asked for."""
    if not _listed(release, relative):
        return None
    name = f"{release_prefix(release)}/{relative}"
    local = storage_local_path(name)
    if local is not None:  # on the local disk: no symbolic link out of the release's folder either
        base = storage_local_path(release_prefix(release)).resolve()  # type: ignore[union-attr]
        resolved = local.resolve()
        return name if base in resolved.parents and resolved.is_file() else None
    return name if default_storage.exists(name) else None


def release_file_path(release: Release, relative: str) -> Path | None:
    """The local path of a published release's listed file (local disk only: tests and benches), or None."""
    name = release_file_name(release, relative)
    return None if name is None else storage_local_path(name)


def remove_quietly(path: Path) -> None:
    """Remove a local file or a directory tree; a missing one is fine."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    except OSError:
        pass


def release_files_remove(release: Release, zip_file_name: str) -> None:
    """Remove a release's stored files and its archive (an unpublished one's: nothing of it is served)."""
    storage_delete_tree(release_prefix(release))
    storage_delete_quietly(f"{project_releases_prefix(release.project_id)}/{zip_file_name}")


def leftovers_remove(project_id: int, version: int, inactive_versions: set[int]) -> None:
    """Remove what unfinished builds left on the local disk: temporary files of ``version`` (a retried or
    restarted build) and of any release no longer being built (``inactive_versions``: failed or cancelled).
    With a bucket the working folders are temporary folders of the worker (nothing to remove here)."""
    if not storage_local():
        return
    directory = project_releases_dir(project_id)
    if not directory.is_dir():
        return
    for entry in directory.iterdir():
        head, mark, _rest = entry.name.partition(TMP_MARK)
        if mark and head.isdigit() and (int(head) == version or int(head) in inactive_versions):
            remove_quietly(entry)


@contextmanager
def release_file_local(release: Release, relative: str) -> Iterator[Path | None]:
    """A local file with the content of a published release's listed file while the block runs (the stored
    file itself on the local disk, a temporary copy from a bucket), or None if there is no such file."""
    name = release_file_name(release, relative)
    if name is None:
        yield None
        return
    with local_copy(name) as path:
        yield path
