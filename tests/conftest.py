"""Shared fixtures: paths to the real benchmark data beside the checkout, and sweep configs."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import realmodel
from llamaserver import LlamaServer, ServerFailed, ServerShape, running

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "benchmarks"


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may read or fill the user's real data cache."""
    monkeypatch.setenv("IFSWEEP_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def shared_benchmarks() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared/benchmarks is not beside this checkout")
    return SHARED


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama.cpp's server with SmolLM2 on a free loopback port, 4 slots of 4,096 tokens, for the session.

    Without the binary or model the tests skip locally, but fail in CI: there the tier must run. A
    binary that is there but cannot load the model or answer one chat completion fails everywhere. Each
    says on one line what failed: build, load or answer.
    """
    paths = realmodel.expected_paths()
    missing = [str(p) for p in (paths.server, paths.gguf) if not p.is_file()]
    if missing:
        reason = f"real-model tier: build: {', '.join(missing)} missing; {realmodel.BUILD_HINT}"
        if in_ci():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with contextlib.ExitStack() as stack:
        try:
            shape = ServerShape(ctx=16384, slots=4, threads=1)
            server = stack.enter_context(running(paths.server, paths.gguf, log, shape))
            server.answer_once()
        except ServerFailed as e:
            pytest.fail(f"real-model tier: {e}", pytrace=False)
        yield server
