"""Where an instance's prompt and constraint texts come from: the benchmark data the run was made from.

The shards hold answers and judge replies, not prompts (they are the benchmark's, and the same for every
model). The viewer looks for the data where the run's manifest says it was read (`data_path`), then among
the directories given with `--data` and below them, in folders named as the benchmark is registered
(`CFBench/data` under a folder of benchmarks), then the benchmark's built-in sample and its pinned
download in the local cache, and takes a candidate only when its hash is the one the manifest recorded
(the same `data_hash` the sweep wrote), so a prompt it shows is the prompt of this run. Nothing is
downloaded.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ifsweep import benchmarks
from ifsweep.benchmarks import Benchmark, Instance
from ifsweep.runner.store.manifest import Manifest

__all__ = ["Found", "InstanceSource"]


@dataclass(frozen=True, slots=True)
class Found:
    """One benchmark table's data: its instances by id, or why there are none."""

    bench: Benchmark | None
    instances: Mapping[str, Instance]
    data_dir: Path | None
    reason: str = ""


@dataclass(eq=False, slots=True)
class InstanceSource:
    manifest: Manifest | None
    data_dirs: Sequence[Path] = ()
    _found: dict[str, Found] = field(default_factory=dict)

    def instance(self, label: str, instance_id: str) -> tuple[Instance | None, Found]:
        found = self._found.get(label)
        if found is None:
            found = self._found[label] = self._find(label)
        return found.instances.get(instance_id), found

    def _find(self, label: str) -> Found:
        entry = None if self.manifest is None else self.manifest.benchmarks.get(label)
        if entry is None:
            return Found(None, {}, None, "the run's manifest does not name this benchmark")
        options = {k: v for k, v in entry.settings.items() if k != "reask"}
        bench = _benchmark_of(label, options)
        if bench is None:
            return Found(None, {}, None, f"no registered benchmark reports as {label!r}")
        from ifsweep.runner.engine.sweep import data_hash

        tried = []
        for d in dict.fromkeys(self._candidates(bench, entry.data_path)):
            if not d.exists():
                continue
            tried.append(str(d))
            if data_hash(d) == entry.data_hash:
                instances = {i.instance_id: i for i in bench.load(d, options)}
                return Found(bench, instances, d)
        where = ", ".join(tried) or "no candidate directory exists"
        return Found(
            bench,
            {},
            None,
            f"the data this run was made from (hash {entry.data_hash[:12]}) was not found ({where}); "
            "pass its directory with --data",
        )

    def _candidates(self, bench: Benchmark, recorded: str | None) -> Iterator[Path]:
        from ifsweep.runner.engine.datasets import cache_root

        if recorded is not None:
            yield Path(recorded)
        yield from (Path(d) for d in self.data_dirs)
        for d in self.data_dirs:
            yield from below(Path(d), bench.name)
        yield bench.fixture_dir()
        with contextlib.suppress(Exception):  # a plugin without a release: its other candidates count
            yield cache_root() / bench.name / bench.release.revision


_SEARCH_DEPTH = 3  # how far below a --data folder a benchmark's folder may sit


def below(root: Path, name: str) -> Iterator[Path]:
    """Below `root`, each folder named `name` (the benchmark's registered name, case aside) within
    _SEARCH_DEPTH levels, then what it holds down to two levels: its folders and data files, any of
    which a config may have named as the benchmark's `data` (the hash decides which one it was)."""
    if not root.is_dir():
        return
    level = [root]
    for _ in range(_SEARCH_DEPTH):
        level = sorted(p for d in level for p in _subdirs(d))
        for match in (p for p in level if p.name.casefold() == name.casefold()):
            yield match
            inner = sorted(_subdirs(match))
            for d in (match, *inner):
                yield from sorted(p for p in d.iterdir() if p.is_file() and p.suffix in (".json", ".jsonl"))
            yield from inner
            yield from (p for d in inner for p in sorted(_subdirs(d)))


def _subdirs(d: Path) -> Iterator[Path]:
    with contextlib.suppress(OSError):
        yield from (p for p in d.iterdir() if p.is_dir() and not p.name.startswith("."))


def _benchmark_of(label: str, options: Mapping[str, Any]) -> Benchmark | None:
    for name in benchmarks.names():
        if label != name and not label.startswith(f"{name}-"):
            continue
        try:
            bench = benchmarks.get(name)
            if bench.report_name(None, options) == label:
                return bench
        except Exception:  # a broken plugin or options it refuses: not this one
            continue
    return None
