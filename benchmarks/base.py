"""The contract every benchmark fulfils (the registry, benchmarks/registry.py, finds them by name).

A benchmark is a set of pure functions over records (benchmarks.records): it loads and validates its
data, says how a response is scored (rule values now, judge tasks for the rest), parses judge replies,
and describes its metrics for the metrics engine. It never performs I/O beyond reading its own data
files, and never imports the runner. It is the one place that knows it exists: everything else (config
checks, metrics, reports, the simulator, the demo) asks the registry.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from ifsweep.benchmarks._options import check_known
from ifsweep.benchmarks.records import (
    ImportedResult,
    Instance,
    JudgeTask,
    Message,
    Plan,
    ScoringMode,
    TurnOutcome,
)

if TYPE_CHECKING:
    from ifsweep.metrics import BenchmarkMetrics

# A simulated judge's decision: (the answer being judged, a key naming the decision) -> satisfied.
Decide = Callable[[str, str], bool]


@dataclass(frozen=True, slots=True)
class DataFile:
    """One file of a benchmark's pinned release: where it lives below the base URL, and how to check it.
    `sha256` or `git_blob` (sha1 of b"blob <size>\\0" + content) must be given."""

    relpath: str  # path below the benchmark's data directory, and below its base URL
    sha256: str | None = None
    git_blob: str | None = None


@dataclass(frozen=True, slots=True)
class Release:
    """Where the pinned data comes from: `base_url` + "/" + relpath for each file."""

    base_url: str
    revision: str
    files: tuple[DataFile, ...]


@runtime_checkable
class Benchmark(Protocol):
    name: str  # what a [[benchmarks]] table names it by; its entry point's name
    display_name: str  # how reports title it ("FollowBench")
    # Keys a [[benchmarks]] table may hold for this benchmark, besides name, data, limit and scoring.
    options: frozenset[str]

    @property
    def release(self) -> Release:
        """The pinned data release (read lazily: most runs never download)."""

    def validate_options(self, options: Mapping[str, Any]) -> None:
        """Raise ValueError naming the option when a value is wrong (unknown keys are caught before)."""

    def load(self, data_dir: Path, options: Mapping[str, Any]) -> Iterator[Instance]:
        """Instances to generate for, in file order, filtered by `options`. Raises DataError."""

    def report_name(self, data_dir: Path | None, options: Mapping[str, Any]) -> str:
        """The name a table with these options reports under, the `benchmark` of its instances: `name`,
        or `name-<language>` for a language other than the benchmark's first (FollowBench Chinese is
        "followbench-zh"), so that both languages run in one sweep and report as separate rows."""

    def plan(self, instance: Instance, response: str, mode: ScoringMode) -> Plan:
        """Rule values for rule-scored constraints and judge tasks for the rest."""

    def parse(
        self, instance: Instance, task: JudgeTask, turn_idx: int, reply: str, mode: ScoringMode
    ) -> TurnOutcome:
        """Turn a judge reply into per-constraint values. Never eval()s the reply."""

    def template_version(self) -> str:
        """A short hash of every prompt template this benchmark sends; goes into the run manifest."""

    def fixture_dir(self) -> Path:
        """The small built-in sample in the real schema (our own text), used by the demo and tests."""

    def metrics(self) -> tuple[BenchmarkMetrics, ...]:
        """Its metric definitions for the metrics engine: one per report name its rows may carry (see
        `report_name`). Imports Polars, so only what computes metrics calls it."""

    def simulated_judge_reply(self, messages: Sequence[Message], decide: Decide) -> str | None:
        """For the simulator: when `messages` is a judge request this benchmark sends, a reply in the
        shape its `parse` reads, each verdict `decide(judged answer, decision key)`; otherwise None (a
        rule-only benchmark always answers None)."""


class BenchmarkBase:
    """What every benchmark laid out as a package shares; the built-in ones and a plugin subclass it.

    The layout: the package holds `_benchmark.py` (the subclass: `name`, `display_name`, `options`,
    `release`, `load`, `plan`, `parse`, and `check_options` when an option takes a value from a set),
    `_prompts.py` (`template_version()`), `_metrics.py` (`definitions(display_name)`), `_simulated.py`
    (`simulated_judge_reply(messages, decide)`), optionally `_import.py`
    (`read_reference_outputs(paths, data_dir, options, mode)`), and `fixtures/`. A subclass overrides
    any of the methods below for a layout of its own."""

    name: str
    display_name: str
    options: frozenset[str] = frozenset()

    def validate_options(self, options: Mapping[str, Any]) -> None:
        check_known(self.name, options, self.options)
        self.check_options(options)

    def check_options(self, options: Mapping[str, Any]) -> None:
        """Raise ValueError naming an option whose value is wrong (the keys are known ones by now)."""

    def report_name(self, data_dir: Path | None, options: Mapping[str, Any]) -> str:
        return self.name  # one language

    def template_version(self) -> str:
        return str(self._part("_prompts").template_version())

    def fixture_dir(self) -> Path:
        return self.package_dir() / "fixtures"

    def metrics(self) -> tuple[BenchmarkMetrics, ...]:
        # Imports Polars: only what computes metrics calls this.
        return cast("tuple[BenchmarkMetrics, ...]", self._part("_metrics").definitions(self.display_name))

    def simulated_judge_reply(self, messages: Sequence[Message], decide: Decide) -> str | None:
        return cast("str | None", self._part("_simulated").simulated_judge_reply(messages, decide))

    def rule_gold(self, instance: Instance, response: str) -> tuple[str, tuple[bool, ...]] | None:
        """What a rule says of an instance it decides, for the judge audit: ("per_constraint", a value
        per constraint) or ("whole_answer", (passed,)), from the package's `_scoring.instance_rule_gold`;
        None where it has none."""
        try:
            scoring = self._part("_scoring")
        except ModuleNotFoundError:
            return None
        found = getattr(scoring, "instance_rule_gold", None)
        return (
            None if found is None else cast("tuple[str, tuple[bool, ...]] | None", found(instance, response))
        )

    def read_reference_outputs(
        self,
        paths: list[Path],
        data_dir: Path | None,
        options: Mapping[str, Any],
        *,
        mode: ScoringMode = "paper",
    ) -> Iterator[ImportedResult]:
        """Each stored (model, instance, response, judge replies) of the reference tools' output files
        (`ifsweep import`; a benchmark without this method cannot import). Raises DataError on a bad
        file. `mode` is the scoring the import is for: where the reference reads its files by rules of
        its own (EIFBench), reference mode follows them."""
        self.validate_options(options)
        try:
            reader = self._part("_import").read_reference_outputs
        except ModuleNotFoundError as e:
            if e.name != f"{self.package()}._import":
                raise
            raise ValueError(f"{self.name}: importing reference outputs is not supported") from None
        return cast("Iterator[ImportedResult]", reader(paths, data_dir, options, mode))

    def package(self) -> str:
        """The package the subclass lives in (its own module, when that is not inside a package)."""
        module = sys.modules[type(self).__module__]
        return module.__package__ or module.__name__

    def package_dir(self) -> Path:
        return Path(cast(str, sys.modules[self.package()].__file__)).resolve().parent

    def _part(self, module: str) -> ModuleType:
        return import_module(f"{self.package()}.{module}")
