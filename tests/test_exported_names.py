"""Each package's public names are pinned: a rename or removal is a deliberate, visible change."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

EXPECTED = {
    "benchmarks": {
        "ENTRY_POINT_GROUP",
        "Benchmark",
        "BenchmarkBase",
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
        "scoring_version",
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
        "MAJORITY",
        "METRIC_COLUMNS",
        "VERDICT_SCHEMA",
        "Agreement",
        "AgreementStat",
        "BenchmarkMetrics",
        "Catalog",
        "Chart",
        "Components",
        "Leaf",
        "RankChange",
        "VerdictError",
        "agreement_stats",
        "analytics",
        "benchmark_metrics",
        "compute_metrics",
        "coverage_metrics",
        "estimate_lines",
        "estimate_metrics",
        "estimates_html",
        "estimates_markdown",
        "judges_in",
        "kendall_tau_b",
        "kept_expr",
        "majority_rows",
        "one_judge",
        "paired_differences",
        "per_instance",
        "rank_changes",
        "read_verdicts",
        "render_csv",
        "render_html",
        "render_json",
        "render_markdown",
        "render_table",
        "select_judges",
        "split_slice",
        "streamed",
        "validate_verdicts",
        "with_estimate_keys",
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


def test_the_library_api() -> None:
    import ifsweep

    assert set(ifsweep.__all__) == {
        "ConfigError",
        "ConfigSource",
        "Estimate",
        "StatusRow",
        "SweepResult",
        "agreement",
        "arun",
        "plan",
        "report",
        "run",
        "scores",
        "status",
        "verdicts",
    }
    for name in ifsweep.__all__:
        assert getattr(ifsweep, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        ifsweep.nope  # noqa: B018


def test_importing_the_packages_stays_light() -> None:
    """No LiteLLM (2-3 s, a network fetch by default) and no simulator just for importing."""
    code = (
        "import sys\nfrom ifsweep import benchmarks, providers, runner, metrics\n"
        "print(sorted(m for m in ('litellm', 'ifsweep.simulator') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


# Which rooms (top folders, installed as ifsweep.<room>) each room may import: one way, no cycle.
ALLOWED_IMPORTS = {
    "api": {"runner"},
    "runner": {"benchmarks", "providers", "metrics", "simulator"},
    "simulator": {"benchmarks"},
    "benchmarks": {"metrics"},
    "metrics": set(),
    "providers": set(),
}


def _imported_rooms(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            parts = node.module.split(".")
            names = [".".join([*parts, a.name]) for a in node.names] if len(parts) == 1 else [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        found |= {n.split(".")[1] for n in names if n.startswith("ifsweep.") and len(n.split(".")) > 1}
    return found


def test_imports_point_one_way() -> None:
    repo = Path(__file__).resolve().parents[1]
    wrong = []
    for room, allowed in ALLOWED_IMPORTS.items():
        for path in sorted((repo / room).rglob("*.py")):
            for other in _imported_rooms(path) & set(ALLOWED_IMPORTS):
                if other != room and other not in allowed:
                    wrong.append(f"{path.relative_to(repo)} imports ifsweep.{other}")
    assert wrong == []
