"""The real-model tier's own machinery, without the server: the cache cannot be left half-filled, a bad
download is refused, and a missing build skips the tier locally but fails it in CI."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
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


def _tier_without_build(tmp_path: Path, cache: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """One real-model test in a pytest of its own, its cache `cache` and its server a path that does
    not exist: whatever this machine has cached, or the caller's environment names, is out of it."""
    missing = str(tmp_path / "no-such-llama-server")
    one_test = "tests/test_real_model.py::test_the_sweep_reached_the_server"
    child_env = subprocess_env(IFSWEEP_REAL_MODEL_CACHE=str(cache), IFSWEEP_LLAMA_SERVER=missing, **env)
    child_env.pop("IFSWEEP_SMOLLM2_GGUF", None)
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
        env=child_env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def _missing_line(missing: list[Path]) -> str:
    return f"real-model tier: {', '.join(map(str, missing))} missing; {realmodel.BUILD_HINT}"


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
