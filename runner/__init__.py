"""Composes benchmarks, providers and metrics into a sweep: config, scheduler, shards, resume, CLI."""

from ifsweep.runner.config import (
    BenchmarkConfig,
    ConfigError,
    RunConfig,
    SweepConfig,
    load_config,
    parse_config,
)
from ifsweep.runner.engine.sweep import SweepResult, check_ready, load_work, run_sweep
from ifsweep.runner.errors import UsageError
from ifsweep.runner.store.shards import DiskFullError, RunStore, record_key

__all__ = [
    "BenchmarkConfig",
    "ConfigError",
    "DiskFullError",
    "RunConfig",
    "RunStore",
    "SweepConfig",
    "SweepResult",
    "UsageError",
    "check_ready",
    "load_config",
    "load_work",
    "parse_config",
    "record_key",
    "run_sweep",
]
