"""A real redis-server for tests: Debian's binary on a free loopback port, its files in a temp dir, no
persistence unless asked. Always stopped. Missing binary: skip locally, fail under CI (.ci/run
installs it), so the coordinator's tests never silently vanish."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

_START_S = 10.0


def require_redis_server() -> str:
    path = shutil.which("redis-server")
    if path is None:
        message = "redis-server is not installed (apt-get install redis-server)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message}: CI must run the coordinator tests")
        pytest.skip(message)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class RedisServer:
    """One redis-server process; `restart()` brings it back on the same port (empty, or with its
    append-only file when `persist`)."""

    def __init__(self, root: Path, *, persist: bool = False) -> None:
        self.binary = require_redis_server()
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.persist = persist
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        cmd = [
            self.binary,
            "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.root),
            "--save", "", "--appendonly", "yes" if self.persist else "no", "--appendfsync", "always",
            "--logfile", str(self.root / "redis.log"), "--protected-mode", "no",
        ]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + _START_S
        while not self.ping():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = (self.root / "redis.log").read_text(errors="replace")[-2000:]
                self.stop()
                raise RuntimeError(f"redis-server did not start on port {self.port}:\n{log}")
            time.sleep(0.02)

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=10)
        self.proc = None

    def restart(self, down_s: float = 0.0) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()


@contextmanager
def redis_server(root: Path, *, persist: bool = False) -> Iterator[RedisServer]:
    server = RedisServer(root, persist=persist)
    server.start()
    try:
        yield server
    finally:
        server.stop()
