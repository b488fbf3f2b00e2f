"""Benchmark data, prompts, scoring rules and metric definitions: pure functions over plain records, found
by name through the registry (built in, or a plugin's `ifsweep.benchmarks` entry point)."""

from ifsweep.benchmarks.base import Benchmark, BenchmarkBase, DataFile, Decide, Release
from ifsweep.benchmarks.records import (
    Constraint,
    DataError,
    ImportedResult,
    Instance,
    JudgeTask,
    JudgeTurn,
    Message,
    Plan,
    ScoringMode,
    TurnOutcome,
)
from ifsweep.benchmarks.registry import ENTRY_POINT_GROUP, BenchmarkLoadError, Loaded, get, load_all, names
from ifsweep.benchmarks.versions import scoring_version

__all__ = [
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
]
