"""llama.cpp's `llama-server` as a test fixture's subprocess: started on a free loopback port, read for
readiness from its own log, stopped on every exit path, and asked what it has served.

Counting what the server received: this llama.cpp version logs no per-request line at the default
verbosity and its `/metrics` has no request counter. `/slots` does say which task each slot last took, and
every chat completion, even one refused for its size, is given a slot and a new, larger task id; together
with `/metrics`' decode and token counters this tells "the server saw no completion request between two
snapshots" exactly, which is what a resumed run must show.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import re
import signal
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

READY_LINE = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 15.0
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class ServerShape:
    """Context and slots: each slot gets ctx // slots tokens (16,384 / 4 = 4,096).

    One thread: on 2 cores that the test process (and anything else) also uses, llama.cpp's threads wait
    on each other at every step; measured with 4 parallel 64-token requests while the machine was busy,
    2 threads took 4-21 s and 1 thread 3-7 s.
    """

    ctx: int = 16384
    slots: int = 4
    threads: int = 1
    extra_args: tuple[str, ...] = ()  # more llama-server flags (perf/judge_cache.py: --kv-unified)


@dataclass(frozen=True)
class ServerCounters:
    slot_tasks: tuple[int, ...]  # the task id each slot last took (-1: none yet; /slots omits the field)
    prompt_tokens: int
    predicted_tokens: int
    decodes: int


class ServerFailed(RuntimeError):
    """What went wrong with a server, on one line that starts with its stage: "load" (it did not come up
    with the model) or "answer" (it came up but did not answer a chat completion with text)."""

    def __init__(self, stage: str, detail: str):
        super().__init__(f"{stage}: {detail}")
        self.stage = stage


def _die_with_parent() -> None:
    # Linux: the kernel sends SIGTERM to the server if pytest dies without running its finalizers (kill -9).
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class LlamaServer:
    def __init__(self, binary: Path, gguf: Path, log_path: Path, shape: ServerShape = ServerShape()):
        self.log_path = log_path
        self.shape = shape
        self.base_url = ""
        self._ready = threading.Event()
        self._log = log_path.open("w", encoding="utf-8")
        argv = [str(binary), "-m", str(gguf), "--host", "127.0.0.1", "--port", "0"]
        argv += ["-c", str(shape.ctx), "-np", str(shape.slots), "-t", str(shape.threads)]
        argv += ["--metrics", "--slots", *shape.extra_args]
        self._log.write(" ".join(argv) + "\n")
        self._log.flush()
        try:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                preexec_fn=_die_with_parent,
            )
        except OSError as e:  # not there, not executable, not a binary for this machine
            self._log.close()
            raise ServerFailed("load", f"cannot start {binary}: {e}") from e
        assert self.process.stdout is not None
        self._reader = threading.Thread(target=self._copy_log, args=(self.process.stdout,), daemon=True)
        self._reader.start()

    @property
    def api_base(self) -> str:
        return f"{self.base_url}/v1"

    def _copy_log(self, stream: IO[str]) -> None:
        # The pipe is drained for the server's whole life, so it never blocks on a full pipe.
        for line in stream:
            self._log.write(line)
            self._log.flush()
            if not self._ready.is_set() and (m := READY_LINE.search(line)):
                self.base_url = m.group(1)
                self._ready.set()
        self._ready.set()  # end of output: the server exited; wait_ready sees no base_url

    def wait_ready(self) -> None:
        if not self._ready.wait(START_TIMEOUT_S) or not self.base_url:
            state = self.exit_state()
            raise ServerFailed("load", f"llama-server {state} before it listened; {self.log_hint()}")
        status, _ = self.get("/health")
        if status != 200:
            raise ServerFailed("load", f"llama-server /health answered {status}; {self.log_hint()}")

    def exit_state(self) -> str:
        """How the process ended, a signal by name (SIGILL: the binary uses instructions this CPU lacks)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(2.0)
        code = self.process.returncode
        if code is None:
            return f"did not print its address within {START_TIMEOUT_S:.0f} s"
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
            hint = " (an instruction this CPU does not have)" if -code == signal.SIGILL else ""
            return f"was killed by {name}{hint}"
        return f"exited with status {code}"

    def log_hint(self) -> str:
        last = self.log_tail(1).strip()
        return f"last log line {last!r}; log {self.log_path}"

    def log_tail(self, lines: int = 30) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def answer_once(self) -> str:
        """One chat completion, which must come back as text: a server that loads but cannot compute (or
        dies at its first matrix product) fails here, with its stage named."""
        body = {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8, "temperature": 0}
        request = urllib.request.Request(
            f"{self.api_base}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as r:
                reply = json.loads(r.read())
        except (OSError, ValueError) as e:  # URLError, a dropped connection, a body that is not JSON
            state = self.exit_state() if self.process.poll() is not None else "is still running"
            detail = f"chat completion failed ({e}); llama-server {state}; {self.log_hint()}"
            raise ServerFailed("answer", detail) from e
        try:
            text = reply["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            text = None
        if not isinstance(text, str) or not text.strip():
            raise ServerFailed("answer", f"chat completion had no text: {json.dumps(reply)[:200]}")
        return text

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.base_url + path, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def get_json(self, path: str) -> Any:
        status, body = self.get(path)
        if status != 200:
            raise ServerFailed("answer", f"GET {path}: HTTP {status}: {body[:300]}")
        return json.loads(body)

    def counters(self) -> ServerCounters:
        status, text = self.get("/metrics")
        if status != 200:
            raise ServerFailed("answer", f"GET /metrics: HTTP {status}: {text[:300]}")
        metrics = dict(re.findall(r"^llamacpp:(\w+) ([0-9.e+-]+)$", text, flags=re.MULTILINE))
        slots = self.get_json("/slots")
        return ServerCounters(
            slot_tasks=tuple(int(s.get("id_task", -1)) for s in sorted(slots, key=lambda s: int(s["id"]))),
            prompt_tokens=int(float(metrics["prompt_tokens_total"])),
            predicted_tokens=int(float(metrics["tokens_predicted_total"])),
            decodes=int(float(metrics["n_decode_total"])),
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(STOP_TIMEOUT_S)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._log.close()


@contextlib.contextmanager
def running(
    binary: Path, gguf: Path, log_path: Path, shape: ServerShape = ServerShape()
) -> Iterator[LlamaServer]:
    server = LlamaServer(binary, gguf, log_path, shape)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def check_answers(binary: Path, gguf: Path, log_path: Path) -> str:
    """Start `binary` with `gguf`, ask one chat completion, stop it: the reply's text, or ServerFailed
    naming the stage. The build trusts a binary, new or cached, only after this."""
    with running(binary, gguf, log_path, ServerShape(ctx=2048, slots=1)) as server:
        return server.answer_once()
