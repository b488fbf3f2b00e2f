"""ifsweep: evaluate many LLMs on constraint-following benchmarks in one fast, budgeted, resumable sweep.

The library API (each documented where it is defined, runner/commands/library.py):

    result = ifsweep.run("sweep.toml")          # or a dict of the same tables; blocking
    result = await ifsweep.arun(config)         # in a running event loop (a notebook cell)
    ifsweep.plan(config)                        # calls, tokens and cost, before anything is spent
    ifsweep.status("runs/first")                # per model and benchmark, from the files alone
    ifsweep.verdicts("runs/first")              # polars.DataFrame, one row per constraint
    ifsweep.scores("runs/first", ci=True)       # polars.DataFrame of every benchmark's metrics
    ifsweep.report("runs/first", "html", out="report.html")
    ifsweep.agreement("runs/first")             # how much the judges agree; rank changes between them

The repository's folders install under this one package: `ifsweep.runner`, `ifsweep.providers`,
`ifsweep.metrics` (the metrics engine; hence `scores`, not `metrics`, for the function),
`ifsweep.benchmarks`, `ifsweep.simulator`. Importing `ifsweep` loads none of them: each name above loads
on first use. The library changes no process-wide state (signal handlers, garbage collector, allocator).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ifsweep.exports import LIBRARY_NAMES

if TYPE_CHECKING:  # the names below, for type checkers (`X as X`: re-exported)
    from ifsweep.runner.commands.library import ConfigSource as ConfigSource
    from ifsweep.runner.commands.library import Estimate as Estimate
    from ifsweep.runner.commands.library import StatusRow as StatusRow
    from ifsweep.runner.commands.library import SweepResult as SweepResult
    from ifsweep.runner.commands.library import agreement as agreement
    from ifsweep.runner.commands.library import arun as arun
    from ifsweep.runner.commands.library import plan as plan
    from ifsweep.runner.commands.library import report as report
    from ifsweep.runner.commands.library import run as run
    from ifsweep.runner.commands.library import scores as scores
    from ifsweep.runner.commands.library import status as status
    from ifsweep.runner.commands.library import verdicts as verdicts
    from ifsweep.runner.config import ConfigError as ConfigError

# name -> the module that defines it, imported on first use (`import ifsweep` stays instant).
_LAZY = {
    "ConfigError": "ifsweep.runner.config",
    **dict.fromkeys(LIBRARY_NAMES, "ifsweep.runner.commands.library"),
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ifsweep' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
