"""Where benchmarks are found by name: the built-in table below, then the entry point group
`ifsweep.benchmarks` of every installed distribution (how a third-party package adds one).

This is the only list of benchmarks in ifsweep. A name is known without importing its module; the
module is imported on first `get`, so one broken benchmark breaks only itself, with an error naming
its entry point. A plugin's entry point names an object that is a `Benchmark`, or a class or function
that makes one when called without arguments:

    [project.entry-points."ifsweep.benchmarks"]
    mybench = "my_package:MyBench"
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module, metadata
from types import MappingProxyType
from typing import cast

from ifsweep.benchmarks.base import Benchmark

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "BenchmarkLoadError", "Loaded", "get", "load_all", "names"]

ENTRY_POINT_GROUP = "ifsweep.benchmarks"

# Built-in benchmarks, in report order. Adding one inside the repository: docs/CONTRIBUTING.md.
BUILTIN = MappingProxyType(
    {
        "followbench": "ifsweep.benchmarks.followbench:FollowBench",
        "cfbench": "ifsweep.benchmarks.cfbench:CFBench",
        "infobench": "ifsweep.benchmarks.infobench:InfoBench",
        "eifbench": "ifsweep.benchmarks.eifbench:EIFBench",
    }
)


class BenchmarkLoadError(Exception):
    """A registered benchmark that cannot be loaded. The message names its entry point."""


@dataclass(frozen=True, slots=True)
class _Target:
    value: str  # "module:attribute"
    origin: str  # where it was registered, for messages

    def describe(self, name: str) -> str:
        return f"benchmark {name!r} ({self.origin}: {name} = {self.value!r})"


@dataclass(frozen=True, slots=True)
class Loaded:
    """Every benchmark that loads, in registry order, and an error for each that does not."""

    benchmarks: tuple[Benchmark, ...]
    errors: tuple[BenchmarkLoadError, ...]


def _targets() -> tuple[dict[str, _Target], list[BenchmarkLoadError]]:
    found = {name: _Target(value, "built in") for name, value in BUILTIN.items()}
    clashes = []
    plugins = sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)
    for ep in plugins:
        dist = ep.dist.name if ep.dist is not None else "an unknown distribution"
        target = _Target(ep.value, f"entry point of {dist} in group {ENTRY_POINT_GROUP!r}")
        if ep.name in found:
            if found[ep.name].value != ep.value:  # one distribution found twice on the path is no clash
                clashes.append(
                    BenchmarkLoadError(
                        f"{target.describe(ep.name)}: the name is taken by {found[ep.name].origin}"
                    )
                )
            continue
        found[ep.name] = target
    return found, clashes


def names() -> tuple[str, ...]:
    """Every registered name: the built-in ones in report order, then the plugins' by name."""
    return tuple(_targets()[0])


def _members() -> list[str]:
    """What the Benchmark protocol asks for: its annotated attributes, methods and properties."""
    return sorted(set(Benchmark.__annotations__) | {n for n in vars(Benchmark) if not n.startswith("_")})


def _load(name: str, target: _Target) -> Benchmark:
    module_name, _, attr = target.value.partition(":")
    try:
        bench: object = import_module(module_name)
        for part in attr.split(".") if attr else ():
            bench = getattr(bench, part)
        if isinstance(bench, type) or (callable(bench) and not isinstance(bench, Benchmark)):
            bench = bench()  # a class or a factory
        complete = isinstance(bench, Benchmark)  # reads every member: a property may raise
    except Exception as e:
        raise BenchmarkLoadError(f"{target.describe(name)} cannot be loaded: {type(e).__name__}: {e}") from e
    if not complete:
        missing = [m for m in _members() if not hasattr(bench, m)]
        raise BenchmarkLoadError(
            f"{target.describe(name)} is not a benchmark: {type(bench).__name__} lacks {', '.join(missing)}"
        )
    found = cast(Benchmark, bench)
    if found.name != name:
        raise BenchmarkLoadError(
            f"{target.describe(name)} is registered as {name!r} but calls itself {found.name!r}"
        )
    return found


def get(name: str) -> Benchmark:
    """The benchmark called `name`. KeyError for a name nobody registered; BenchmarkLoadError, naming
    the entry point, for one that does not load."""
    targets, _ = _targets()
    if name not in targets:
        raise KeyError(f"unknown benchmark {name!r}; known: {', '.join(targets)}")
    return _load(name, targets[name])


def load_all() -> Loaded:
    """Every registered benchmark that loads; the others become errors and stop nothing."""
    targets, errors = _targets()
    loaded = []
    for name, target in targets.items():
        try:
            loaded.append(_load(name, target))
        except BenchmarkLoadError as e:
            errors.append(e)
    return Loaded(tuple(loaded), tuple(errors))
