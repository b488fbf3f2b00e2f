"""Composes benchmarks, providers and metrics into a sweep: config, scheduler, shards, resume, CLI.

The names below load on first use: every CLI command imports this package, and `ifsweep status` needs
none of the sweep's machinery (its providers, asyncio and the scheduler cost a fifth of a second).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below, for type checkers (`X as X`: re-exported)
    from ifsweep.runner.config import BenchmarkConfig as BenchmarkConfig
    from ifsweep.runner.config import ConfigError as ConfigError
    from ifsweep.runner.config import RunConfig as RunConfig
    from ifsweep.runner.config import SweepConfig as SweepConfig
    from ifsweep.runner.config import load_config as load_config
    from ifsweep.runner.config import parse_config as parse_config
    from ifsweep.runner.engine.sweep import SweepResult as SweepResult
    from ifsweep.runner.engine.sweep import check_ready as check_ready
    from ifsweep.runner.engine.sweep import load_work as load_work
    from ifsweep.runner.engine.sweep import run_sweep as run_sweep
    from ifsweep.runner.errors import UsageError as UsageError
    from ifsweep.runner.store.shards import DiskFullError as DiskFullError
    from ifsweep.runner.store.shards import RunStore as RunStore
    from ifsweep.runner.store.shards import record_key as record_key

_LAZY = {
    **dict.fromkeys(
        ("BenchmarkConfig", "ConfigError", "RunConfig", "SweepConfig", "load_config", "parse_config"),
        "ifsweep.runner.config",
    ),
    **dict.fromkeys(("SweepResult", "check_ready", "load_work", "run_sweep"), "ifsweep.runner.engine.sweep"),
    "UsageError": "ifsweep.runner.errors",
    **dict.fromkeys(("DiskFullError", "RunStore", "record_key"), "ifsweep.runner.store.shards"),
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ifsweep.runner' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
