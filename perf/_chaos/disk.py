"""A full disk for real: the run directory on its own small tmpfs, and a filler file that leaves only a
few kilobytes free while one round runs (writes then fail with ENOSPC, as on a full volume)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SIZE_MB = 64


class Disk:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.mounted = False

    def mount(self) -> bool:
        """Mount the tmpfs (needs the right to mount: root, or CAP_SYS_ADMIN); False if it cannot."""
        self.root.mkdir(parents=True, exist_ok=True)
        if shutil.which("mount") is None:
            return False
        args = ["mount", "-t", "tmpfs", "-o", f"size={SIZE_MB}m", "tmpfs", str(self.root)]
        done = subprocess.run(args, capture_output=True, check=False)
        self.mounted = done.returncode == 0
        return self.mounted

    @property
    def filler(self) -> Path:
        return self.root / "filler"

    def fill(self, room: int) -> None:
        """Take every free byte but `room`."""
        st = os.statvfs(self.root)
        free = st.f_bavail * st.f_frsize
        with self.filler.open("wb") as f:
            if free > room:
                os.posix_fallocate(f.fileno(), 0, free - room)

    def empty(self) -> None:
        self.filler.unlink(missing_ok=True)

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.root)], capture_output=True, check=False)
            self.mounted = False
