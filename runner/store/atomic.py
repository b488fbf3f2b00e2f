"""Replacing a small file of the run directory whole (manifest.json, summary.json), so a reader or a
crash sees the old file or the new one, never a mix, and a full disk leaves neither half a file nor a
temporary one behind."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ifsweep.runner.store.shards import disk_full


def atomic_write(path: Path, data: bytes, *, in_place_if_full: bool = False) -> None:
    """Write `data` to a temporary file beside `path`, fsync it, rename it over `path`, fsync the
    directory. On any failure the temporary file is removed; a full disk (or file size limit) raises
    DiskFullError naming `path`. `in_place_if_full`: on a full disk, overwrite `path` itself instead,
    in the room its old contents free (a run's last summary: the truth about how it ended matters more
    than the atomic swap, and the disk-full stop is when it is needed most)."""
    # Per process: partitions rewrite the one manifest at once.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        _write(tmp, data)
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        error = disk_full(e, f"{path}: not written")
        if not (in_place_if_full and error is not e and path.exists()):
            raise error from e
        try:
            before = path.read_bytes()
        except OSError:
            raise error from e
        try:
            _write(path, data)
        except OSError as again:
            with contextlib.suppress(OSError):
                _write(path, before)  # no room even so: the old file back, in the room it had
            raise disk_full(again, f"{path}: not written") from again
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["atomic_write"]
