"""Pinned, verified download of a benchmark's data release into a local cache.

Every file is checked against the digest pinned in benchmarks.releases before it is used: files already in
the cache are re-checked on each call (a truncated or edited file is fetched again), and a download lands
under its final name only after its digest matched, so no reader ever sees a bad or partial file.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from ifsweep.benchmarks.base import DataFile, Release
from ifsweep.benchmarks.records import DataError

__all__ = ["DownloadError", "cache_root", "ensure_release", "file_digests", "git_blob_sha1"]

log = logging.getLogger(__name__)

_CHUNK = 1 << 20
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


class DownloadError(DataError):
    """A pinned file that could not be fetched, or whose digest is not the pinned one."""

    def __init__(
        self, path: str, message: str, *, expected: str | None = None, actual: str | None = None
    ) -> None:
        super().__init__(path, message)
        self.expected = expected
        self.actual = actual


def cache_root() -> Path:
    """$IFSWEEP_CACHE_DIR, else $XDG_CACHE_HOME/ifsweep, else ~/.cache/ifsweep (empty counts as unset)."""
    explicit = os.environ.get("IFSWEEP_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg).expanduser() / "ifsweep"
    return Path.home() / ".cache" / "ifsweep"


def git_blob_sha1(data: bytes) -> str:
    """The id git gives a file's content: sha1 of b"blob <size>\\0" + content."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def file_digests(path: Path) -> tuple[str, str]:
    """(sha256, git blob sha1) of a file, read once in chunks."""
    sha256 = hashlib.sha256()
    blob = hashlib.sha1(usedforsecurity=False)
    blob.update(b"blob %d\0" % path.stat().st_size)
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            sha256.update(chunk)
            blob.update(chunk)
    return sha256.hexdigest(), blob.hexdigest()


def _mismatch(entry: DataFile, path: Path) -> tuple[str, str] | None:
    """(expected, actual) of the first pinned digest the file fails, or None when it matches."""
    sha256, blob = file_digests(path)
    if entry.sha256 is not None and sha256 != entry.sha256.lower():
        return f"sha256 {entry.sha256}", f"sha256 {sha256}"
    if entry.git_blob is not None and blob != entry.git_blob.lower():
        return f"git blob {entry.git_blob}", f"git blob {blob}"
    return None


def _base_url(name: str, release: Release, override: str | None) -> str:
    if override:
        return override.rstrip("/")
    from_env = os.environ.get(f"IFSWEEP_DATA_BASE_URL_{name.upper()}")
    if from_env:
        return from_env.rstrip("/")
    return release.base_url.rstrip("/")


def _fetch(url: str, entry: DataFile, target: Path, timeout_s: float) -> None:
    """Stream `url` to a temporary file beside `target`, verify it, then rename it into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=timeout_s) as resp:
                    while chunk := resp.read(_CHUNK):
                        out.write(chunk)
            except (urllib.error.URLError, OSError) as exc:
                raise DownloadError(entry.relpath, f"download from {url} failed: {exc}") from exc
            out.flush()
            os.fsync(out.fileno())
        bad = _mismatch(entry, tmp)
        if bad is not None:
            expected, actual = bad
            raise DownloadError(
                entry.relpath,
                f"digest mismatch for {url}: expected {expected}, got {actual}",
                expected=expected,
                actual=actual,
            )
        os.replace(tmp, target)
        _fsync_dir(target.parent)
    finally:
        tmp.unlink(missing_ok=True)


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; not every platform lets a directory be opened for this.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _select(release: Release, files: Sequence[str] | None) -> list[DataFile]:
    if files is None:
        return list(release.files)
    by_path = {entry.relpath: entry for entry in release.files}
    unknown = [relpath for relpath in files if relpath not in by_path]
    if unknown:
        raise ValueError(f"not in the pinned release: {', '.join(unknown)}; known: {', '.join(by_path)}")
    return [by_path[relpath] for relpath in files]


def ensure_release(
    name: str,
    release: Release,
    *,
    base_url: str | None = None,
    files: Sequence[str] | None = None,
    timeout_s: float = 60,
) -> Path:
    """The local directory holding the release's files (all, or the relpaths in `files`), each verified.

    Missing files and cached files whose digest is wrong are downloaded from `base_url` (else
    $IFSWEEP_DATA_BASE_URL_<NAME>, else the pinned URL). Raises DownloadError naming the file and both
    digests when a download does not match its pin; nothing is then left in the cache for that file.
    """
    if not _NAME.match(name):
        raise ValueError(f"release name {name!r} must be letters, digits, '_', '-' or '.'")
    if not _NAME.match(release.revision):
        raise ValueError(f"release revision {release.revision!r} of {name} is not a plain identifier")
    root = cache_root() / name / release.revision
    url_base = _base_url(name, release, base_url)
    for entry in _select(release, files):
        if entry.sha256 is None and entry.git_blob is None:
            raise ValueError(f"{name}: {entry.relpath} has no pinned digest; refusing to use it")
        target = root / entry.relpath
        if root.resolve() not in target.resolve().parents:
            raise ValueError(f"{name}: relpath {entry.relpath!r} leaves the release directory")
        if target.is_file():
            bad = _mismatch(entry, target)
            if bad is None:
                continue
            log.warning("cached %s fails its pin (%s, got %s); fetching it again", target, *bad)
            target.unlink()
        _fetch(f"{url_base}/{entry.relpath}", entry, target, timeout_s)
    return root
