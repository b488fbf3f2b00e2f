"""Shared fixtures: paths to the real benchmark data beside the checkout, and sweep configs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
