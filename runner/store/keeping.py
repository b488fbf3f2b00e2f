"""A running sweep keeps its shards' digest (runner/store/digest.py) as they grow, off its process.

Every time the shards have grown by `every_bytes` since the last round, `poke` (called with the
summary, every 2 s) starts a child process that digests the new bytes and keeps their parts, unless
the last one still runs. The sweep's process imports no Polars and parses nothing for it: the child
does, on its own interpreter (the event loop never waits on it), and a part is written to a temporary
name and renamed (digest.py), so a child stopped at any moment leaves the digest whole. The first
`ifsweep status` of a run this version wrote then parses only the bytes of the last round (about
`every_bytes`: 16 MB, about a second), not the whole run (issue 35: 16.8 s, 732 MB at full size).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ifsweep.runner.store.shards import shard_files

__all__ = ["KEEP_EVERY_BYTES", "DigestKeeper"]

KEEP_EVERY_BYTES = 16 << 20  # new shard bytes per round: what a first status parses at most, and a round


class DigestKeeper:
    """The child processes that keep one run directory's digest while a sweep writes it."""

    def __init__(self, run_dir: Path, every_bytes: int = KEEP_EVERY_BYTES) -> None:
        self.run_dir = Path(run_dir)
        self.every_bytes = every_bytes
        self.kept_at = 0  # shard bytes when the last round started
        self.rounds = 0
        self._child: subprocess.Popen[bytes] | None = None

    def poke(self) -> bool:
        """Start a round if the shards grew by `every_bytes` since the last and none runs; whether one
        started. A stat per shard file."""
        if self._child is not None and self._child.poll() is None:
            return False
        size = self._size()
        if size - self.kept_at < self.every_bytes:
            return False
        self.kept_at, self.rounds = size, self.rounds + 1
        cmd = [sys.executable, "-m", "ifsweep.runner.store.digest", str(self.run_dir)]
        self._child = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        return True

    def close(self) -> None:
        """Stop a round still running (its finished parts stay; the rest is the next reader's)."""
        child, self._child = self._child, None
        if child is not None and child.poll() is None:
            child.terminate()
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()

    def _size(self) -> int:
        total = 0
        for _, _, path in shard_files(self.run_dir):
            try:
                total += path.stat().st_size
            except OSError:
                continue
        return total
