"""Benchmark data, prompts and scoring rules: pure functions over plain records."""

from ifsweep.benchmarks.base import Benchmark, DataFile, Release, get, names
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

__all__ = [
    "Benchmark",
    "Constraint",
    "DataError",
    "DataFile",
    "ImportedResult",
    "Instance",
    "JudgeTask",
    "JudgeTurn",
    "Message",
    "Plan",
    "Release",
    "ScoringMode",
    "TurnOutcome",
    "get",
    "names",
]
