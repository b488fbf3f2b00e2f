"""Where an instance's prompt and constraint texts come from: the benchmark data the run was made from.

The shards hold answers and judge replies, not prompts (they are the benchmark's, and the same for every
model). The viewer looks for the data among the directories given with `--data`, the benchmark's
built-in sample and its pinned download in the local cache, and takes a directory only when its hash is
the one the run's manifest recorded (the same `data_hash` the sweep wrote), so a prompt it shows is the
prompt of this run. Nothing is downloaded.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
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
        for d in self._candidates(bench):
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

    def _candidates(self, bench: Benchmark) -> list[Path]:
        from ifsweep.runner.engine.datasets import cache_root

        out = [Path(d) for d in self.data_dirs]
        out += [Path(d) / bench.name for d in self.data_dirs]
        out.append(bench.fixture_dir())
        with contextlib.suppress(Exception):  # a plugin without a release: its other candidates count
            out.append(cache_root() / bench.name / bench.release.revision)
        return out


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
