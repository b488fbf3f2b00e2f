"""Each package's public names are pinned: a rename or removal is a deliberate, visible change."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

EXPECTED = {
    "benchmarks": {
        "ENTRY_POINT_GROUP",
        "Benchmark",
        "BenchmarkLoadError",
        "Constraint",
        "DataError",
        "DataFile",
        "Decide",
        "ImportedResult",
        "Instance",
        "JudgeTask",
        "JudgeTurn",
        "Loaded",
        "Message",
        "Plan",
        "Release",
        "ScoringMode",
        "TurnOutcome",
        "get",
        "load_all",
        "names",
    },
    "providers": {
        "Budget",
        "BudgetExhausted",
        "CallStatus",
        "Completion",
        "Endpoint",
        "EndpointSpec",
        "EndpointStats",
        "ErrorKind",
        "Price",
        "ProviderEvent",
        "ProviderPool",
        "Reservation",
        "RetryDecision",
        "RetryPolicy",
        "UnknownPrice",
        "check_prices",
        "classify",
        "estimate_tokens",
        "import_litellm",
        "resolve_price",
        "resolve_route",
        "scrub",
    },
    "metrics": {
        "METRIC_COLUMNS",
        "VERDICT_SCHEMA",
        "BenchmarkMetrics",
        "Catalog",
        "Chart",
        "Components",
        "Leaf",
        "VerdictError",
        "analytics",
        "benchmark_metrics",
        "compute_metrics",
        "coverage_metrics",
        "kept_expr",
        "paired_differences",
        "per_instance",
        "read_verdicts",
        "render_csv",
        "render_html",
        "render_json",
        "render_markdown",
        "render_table",
        "split_slice",
        "validate_verdicts",
    },
    "runner": {
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
    },
    "simulator": {
        "FAULT_NAMES",
        "FaultRates",
        "SimConfig",
        "SimStats",
        "Simulator",
        "SimulatorThread",
        "serve_main",
    },
}


@pytest.mark.parametrize("package", sorted(EXPECTED))
def test_exported_names(package: str) -> None:
    module = importlib.import_module(f"ifsweep.{package}")
    assert set(module.__all__) == EXPECTED[package]
    for name in module.__all__:
        assert getattr(module, name) is not None


def test_importing_the_packages_stays_light() -> None:
    """No LiteLLM (2-3 s, a network fetch by default) and no simulator just for importing."""
    code = (
        "import sys\nfrom ifsweep import benchmarks, providers, runner, metrics\n"
        "print(sorted(m for m in ('litellm', 'ifsweep.simulator') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
