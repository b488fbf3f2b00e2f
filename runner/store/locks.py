"""Who may write a run directory: the run lock and the writer locks, and who holds them.

`RUN_DIR/run.lock` is the run-level lock: a plain `ifsweep run` holds it exclusively, each partition
shares it with the other partitions, so a plain run and a partitioned one (or two plain runs) never
write one directory at once: without a coordinator each would apply `max_usd` alone. Each writer also
holds `RUN_DIR/shards/WRITER.lock` exclusively, and writes into it who it is (pid, host, command), so a
refusal can name the other process. Both are flock locks: the kernel releases them when the holder
dies, even by kill -9, and whether a writer still runs is read from its lock alone.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

RUN_LOCK = "run.lock"
WRITER_RE = re.compile(r"[A-Za-z0-9_.]{1,64}")  # the writer ids RunStore.open accepts


class WriterBusyError(RuntimeError):
    """Another live process already writes this run (under this writer id, or the run lock)."""


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a writer lock, as it wrote into its lock file."""

    writer: str
    pid: int | None
    host: str | None
    command: str | None

    def __str__(self) -> str:
        who = f"pid {self.pid} on {self.host}" if self.pid is not None else "a process that wrote no details"
        return f"'{self.writer}' ({who}: {self.command or '?'})"


def _try_flock(fd: int, how: int) -> bool:
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def lock_writer(path: Path, writer: str) -> int:
    """Hold `path` exclusively for `writer` and write who holds it; the open descriptor (closing it
    releases the lock). Raises WriterBusyError naming the live holder."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    if not _try_flock(fd, fcntl.LOCK_EX):
        os.close(fd)
        raise WriterBusyError(
            f"{path}: another live process writes this run as {read_holder(path, writer)}; "
            "use a different writer id (partitions do) or wait for it to finish"
        )
    me = {"pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(sys.argv), "at": time.time()}
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, orjson.dumps(me), 0)
    except OSError:
        pass  # a full disk: the lock holds all the same; a refusal then names no process
    return fd


def read_holder(path: Path, writer: str) -> Holder:
    try:
        info = orjson.loads(path.read_bytes() or b"{}")
    except (OSError, orjson.JSONDecodeError):
        info = {}
    if not isinstance(info, dict):
        info = {}
    pid, host, command = info.get("pid"), info.get("host"), info.get("command")
    return Holder(
        writer,
        pid if isinstance(pid, int) else None,
        host if isinstance(host, str) else None,
        command if isinstance(command, str) else None,
    )


def writer_running(shards_dir: Path, writer: str) -> bool:
    """Whether a live process holds `writer`'s lock (a test lock taken and dropped at once)."""
    if WRITER_RE.fullmatch(writer) is None:
        return False  # no writer id a store accepts (a record's field, read from the shards)
    path = shards_dir / f"{writer}.lock"
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        free = _try_flock(fd, fcntl.LOCK_SH)
        return not free
    finally:
        os.close(fd)  # drops the test lock too


def live_writers(shards_dir: Path) -> list[Holder]:
    """Every writer of the run whose process still runs, with who it is."""
    if not shards_dir.is_dir():
        return []
    names = sorted(p.name[: -len(".lock")] for p in shards_dir.glob("*.lock"))
    return [read_holder(shards_dir / f"{w}.lock", w) for w in names if writer_running(shards_dir, w)]


def lock_run(run_dir: Path, *, shared: bool, shards_dir: Path, mine: str | None = None) -> int:
    """Hold RUN_DIR/run.lock: exclusively for a plain run (and an import), shared for a partition. The
    open descriptor, or WriterBusyError naming the processes that hold it; `mine` names the caller in
    that message (default: a plain run or a partition)."""
    path = run_dir / RUN_LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    if _try_flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX):
        return fd
    os.close(fd)
    others = live_writers(shards_dir)
    who = ", ".join(str(h) for h in others) or "a process that has not yet written its details"
    caller, theirs = ("a partition", "a plain run") if shared else ("a plain run", "another run")
    raise WriterBusyError(
        f"{run_dir}: {theirs} writes this directory now: {who}. {(mine or caller).capitalize()} cannot "
        "run beside it (each would apply max_usd alone, or write the same pairs); wait for it to finish "
        "or stop it, then run again"
    )


__all__ = [
    "RUN_LOCK",
    "WRITER_RE",
    "Holder",
    "WriterBusyError",
    "live_writers",
    "lock_run",
    "lock_writer",
    "writer_running",
]
