"""The processes of a chaos run: `ifsweep run` (plain or partitions) and a real redis-server."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from _chaos.sweepfile import KEY_ENV

RUN_TIMEOUT_S = 240.0


@dataclass(slots=True)
class Proc:
    """One `ifsweep run` process; `out`/`err` are filled when it has ended."""

    popen: subprocess.Popen[bytes]
    partition: str | None
    killed: bool = False
    out: str = ""
    err: str = ""

    @property
    def code(self) -> int | None:
        return self.popen.returncode

    def finish(self, timeout: float = RUN_TIMEOUT_S) -> int:
        try:
            out, err = self.popen.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            out, err = self.popen.communicate()
            err += f"\n[chaos] killed after {timeout:.0f}s: the run did not end".encode()
        self.out, self.err = out.decode(errors="replace"), err.decode(errors="replace")
        return self.popen.returncode

    def kill9(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            self.killed = True


def child_env(secret: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IFSWEEP_", "SLURM_"))}
    env.pop("JOB_COMPLETION_INDEX", None)
    return env | {KEY_ENV: secret}


def start_run(cfg: Path, secret: str, partition: str | None = None) -> Proc:
    args = [sys.executable, "-m", "ifsweep.runner.commands.cli", "run", str(cfg)]
    if partition is not None:
        args += ["--partition", partition]
    popen = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(secret), cwd=cfg.parent
    )
    return Proc(popen, partition)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass(slots=True)
class Redis:
    """A redis-server on a loopback port with a password (the coordinator URL carries it: a secret
    that must reach no file of the run). `restart` keeps the port and, with `persist`, the data."""

    password: str
    persist: bool
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="chaos-redis-")))
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    # A round's restart runs in a thread beside the main one: one lock orders their starts and stops, and
    # a start after close() starts nothing (a server started then outlived the seed, its folder gone).
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closed: bool = False

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0?lease_s=3"

    def start(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._stop()  # never two servers, one of them unreachable from here
            self._start()

    def _start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        cmd = [
            binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.root),
            "--save", "", "--appendonly", "yes" if self.persist else "no", "--appendfsync", "always",
            "--requirepass", self.password, "--protected-mode", "no", "--logfile", "redis.log",
        ]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10.0
        while not self._up():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.02)

    def _up(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith((b"+PONG", b"-NOAUTH"))
        except OSError:
            return False

    def stop(self) -> None:
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None

    def restart(self, down_s: float) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._stop()
        shutil.rmtree(self.root, ignore_errors=True)
