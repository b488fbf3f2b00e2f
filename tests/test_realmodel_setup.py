"""The real-model tier's own machinery, without the server: the cache cannot be left half-filled, a bad
download is refused, and a missing build skips the tier locally but fails it in CI."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import realmodel
from conftest import subprocess_env

TESTS = Path(__file__).resolve().parent

KILLED_FILL = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
import realmodel

def fill(stage: Path, work: Path) -> None:
    (stage / "half").write_text("half of an entry")
    print("filling", flush=True)
    sys.stdin.read()  # until the parent kills us

root = Path({root!r})
with realmodel.locked(root):
    realmodel.install_entry(root, "thing-1.0", fill)
"""


def test_a_killed_fill_leaves_no_entry_and_the_next_run_starts_clean(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    code = textwrap.dedent(KILLED_FILL).format(tests=str(TESTS), root=str(root))
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline().strip() == "filling"
    child.kill()
    child.wait()
    child.stdout.close()
    child.stdin.close()
    assert not (root / "thing-1.0").exists()
    assert list(root.glob(".tmp-thing-1.0-*")), "the killed fill's temp directory is where it was"

    calls: list[Path] = []

    def fill(stage: Path, work: Path) -> None:
        calls.append(stage)
        (stage / "whole").write_text("a whole entry")

    with realmodel.locked(root):  # the killed child's lock went with it
        realmodel.remove_stale_temps(root)
        entry = realmodel.install_entry(root, "thing-1.0", fill)
        again = realmodel.install_entry(root, "thing-1.0", fill)
    assert entry == again == root / "thing-1.0"
    assert sorted(p.name for p in entry.iterdir()) == ["whole"]
    assert len(calls) == 1, "a present entry is reused, not rebuilt"
    assert not list(root.glob(".tmp-*"))


def test_a_failed_fill_leaves_nothing(tmp_path: Path) -> None:
    def fill(stage: Path, work: Path) -> None:
        (stage / "half").write_text("x")
        raise RuntimeError("compiler died")

    with pytest.raises(RuntimeError, match="compiler died"):
        realmodel.install_entry(tmp_path, "thing-1.0", fill)
    assert list(tmp_path.iterdir()) == []


def test_a_download_with_the_wrong_checksum_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "artifact.tar.gz"
    src.write_bytes(b"not what was pinned")
    with pytest.raises(SystemExit, match="sha256"):
        realmodel.download(src.as_uri(), realmodel.LLAMA_SDIST_SHA256, tmp_path / "copy")


def _tier_with(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """One real-model test in a pytest of its own, in the environment `env` adds to this one."""
    one_test = "tests/test_real_model.py::test_the_sweep_reached_the_server"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rs",
            f"--basetemp={tmp_path / 'bt'}",
            "-m",
            "real_model",
            one_test,
        ],
        cwd=TESTS.parent,
        env=subprocess_env(**env),
        capture_output=True,
        text=True,
        timeout=240,
    )


def _tier_without_build(tmp_path: Path, cache: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The tier with its cache `cache` and its server a path that does not exist: whatever this machine
    has cached, or the caller's environment names, is out of it."""
    missing = str(tmp_path / "no-such-llama-server")
    saved = os.environ.pop("IFSWEEP_SMOLLM2_GGUF", None)
    try:
        return _tier_with(tmp_path, IFSWEEP_REAL_MODEL_CACHE=str(cache), IFSWEEP_LLAMA_SERVER=missing, **env)
    finally:
        if saved is not None:
            os.environ["IFSWEEP_SMOLLM2_GGUF"] = saved


def _missing_line(missing: list[Path]) -> str:
    return f"real-model tier: build: {', '.join(map(str, missing))} missing; {realmodel.BUILD_HINT}"


@pytest.mark.skipif(os.name != "posix", reason="the tier runs on Linux")
@pytest.mark.parametrize("model_cached", [False, True], ids=["empty-cache", "model-cached"])
def test_without_the_build_the_tier_skips_locally_and_fails_in_ci(tmp_path: Path, model_cached: bool) -> None:
    """With an empty cache both the server and the model are named as missing; with the model cached
    (a stand-in file where the cache keeps it) only the server is."""
    cache = tmp_path / "cache"
    gguf = cache / f"smollm2-{realmodel.SMOLLM2_VERSION}" / realmodel.GGUF_NAME
    if model_cached:
        gguf.parent.mkdir(parents=True)
        gguf.write_bytes(b"")  # only whether it is there is read before the server would start
    server = tmp_path / "ci" / "no-such-llama-server"
    expected = _missing_line([server] if model_cached else [server, gguf])

    local = _tier_without_build(tmp_path / "local", cache, CI="")
    assert local.returncode == 0, local.stdout + local.stderr
    assert "skipped" in local.stdout and "python tests/realmodel.py" in local.stdout

    ci = _tier_without_build(tmp_path / "ci", cache, CI="true")
    assert ci.returncode == 1, ci.stdout + ci.stderr
    assert expected in ci.stdout and "skipped" not in ci.stdout, ci.stdout


# A stand-in for llama-server, run as a real process: it takes llama-server's arguments, prints the line
# llama-server prints when it listens, and answers /health and chat completions. MODE picks what it does:
# "answers" replies with text, "mute" with an empty message, "sigill" dies the way a binary built for
# another CPU dies while loading the model.
FAKE_SERVER = """#!{python}
import json, os, signal, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = {mode!r}
if MODE == "sigill":
    print("load_tensors: loading model", flush=True)
    os.kill(os.getpid(), signal.SIGILL)

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.reply({{"status": "ok"}})

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        text = "Hello there." if MODE == "answers" else ""
        self.reply({{"choices": [{{"message": {{"role": "assistant", "content": text}}}}]}})

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"main: server is listening on http://127.0.0.1:{{server.server_port}}", flush=True)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
server.serve_forever()
"""


def _fake_server(path: Path, mode: str) -> Path:
    path.write_text(FAKE_SERVER.format(python=sys.executable, mode=mode))
    path.chmod(0o755)
    return path


def _fake_fill(mode: str, calls: list[str]) -> Callable[[Path, Path], None]:
    def fill(stage: Path, work: Path) -> None:
        calls.append(mode)
        _fake_server(stage / "llama-server", mode)

    return fill


def test_the_build_flags_fix_a_portable_instruction_set_and_name_the_cache_entry() -> None:
    flags = set(realmodel.CMAKE_FLAGS)
    assert "-DGGML_NATIVE=OFF" in flags, "a native build targets the building CPU alone"
    assert {"-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON"} <= flags
    wide = [f for f in realmodel.CMAKE_FLAGS if "AVX512" in f or "AMX" in f]
    assert wide and all(f.endswith("=OFF") for f in wide), wide
    assert not any("BACKEND_DL" in f or "ALL_VARIANTS" in f for f in flags), "needs shared libraries"
    entry = realmodel.server_entry()
    assert entry.startswith(f"llama-server-{realmodel.LLAMA_VERSION}-")
    assert realmodel.server_entry(realmodel.CMAKE_FLAGS) == entry
    other = tuple(f.replace("-DGGML_AVX2=ON", "-DGGML_AVX2=OFF") for f in realmodel.CMAKE_FLAGS)
    assert realmodel.server_entry(other) != entry, "a change of flags is a new cache entry"


def test_a_cached_binary_that_cannot_answer_is_rebuilt_and_one_that_answers_is_kept(tmp_path: Path) -> None:
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"")
    for broken in ("sigill", "mute"):
        root = tmp_path / broken
        (root / "llama-server-x").mkdir(parents=True)
        _fake_server(root / "llama-server-x" / "llama-server", broken)
        calls: list[str] = []
        server = realmodel.ensure_server(root, gguf, _fake_fill("answers", calls), "llama-server-x")
        assert calls == ["answers"], f"a cached binary that {broken} was trusted"
        assert server == root / "llama-server-x" / "llama-server"
        assert "MODE = 'answers'" in server.read_text()
        again = realmodel.ensure_server(root, gguf, _fake_fill("answers", calls), "llama-server-x")
        assert again == server and calls == ["answers"], "a cached binary that answers is reused"


@pytest.mark.parametrize(("mode", "stage"), [("sigill", "load: "), ("mute", "answer: ")])
def test_a_new_build_that_cannot_answer_never_enters_the_cache(tmp_path: Path, mode: str, stage: str) -> None:
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"")
    root = tmp_path / "cache"
    root.mkdir()
    with pytest.raises(SystemExit, match=f"failed its check: {stage}") as raised:
        realmodel.ensure_server(root, gguf, _fake_fill(mode, []), "llama-server-x")
    if mode == "sigill":
        assert "SIGILL" in str(raised.value)
    assert list(root.iterdir()) == [], "nothing of the failed build is left in the cache"


@pytest.mark.skipif(os.name != "posix", reason="the tier runs on Linux")
@pytest.mark.parametrize(
    ("mode", "line"), [("sigill", "load: llama-server was killed by SIGILL"), ("mute", "answer: ")]
)
def test_the_tier_names_the_stage_that_failed_in_one_line(tmp_path: Path, mode: str, line: str) -> None:
    """A binary that is there but dies loading the model, or loads and answers nothing, fails the tier
    (locally too: it is no missing build) with one line that starts with the stage."""
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"")
    server = _fake_server(tmp_path / "llama-server", mode)
    run = _tier_with(tmp_path, IFSWEEP_LLAMA_SERVER=str(server), IFSWEEP_SMOLLM2_GGUF=str(gguf), CI="")
    assert run.returncode == 1, run.stdout + run.stderr
    lines = [ln for ln in run.stdout.splitlines() if "real-model tier: " in ln]
    assert lines and all(f"real-model tier: {line}" in ln for ln in lines), run.stdout
