"""InFoBench as a `Benchmark`: every decomposed question is judged in one multi-turn conversation."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ifsweep.benchmarks._echo import task_prompt
from ifsweep.benchmarks._options import check_known, one_of
from ifsweep.benchmarks.base import Decide, Release
from ifsweep.benchmarks.infobench import _import, _parse, _prompts, _simulated
from ifsweep.benchmarks.infobench._load import read_rows, resolve_data_file, to_instance
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

SPLITS = ("easy", "hard")
FIXTURE_DIR = Path(__file__).resolve().parent / "fixtures"


def _split(options: Mapping[str, Any]) -> str | None:
    return one_of(options, "split", SPLITS)


class InfoBench:
    name = "infobench"
    display_name = "InFoBench"
    options = frozenset({"split"})

    @property
    def release(self) -> Release:
        from ifsweep.benchmarks import releases

        return releases.INFOBENCH

    def validate_options(self, options: Mapping[str, Any]) -> None:
        check_known(self.name, options, self.options)
        _split(options)

    def report_name(self, data_dir: Path | None, options: Mapping[str, Any]) -> str:
        return self.name  # one language

    def load(self, data_dir: Path, options: Mapping[str, Any]) -> Iterator[Instance]:
        split = _split(options)
        for row in read_rows(resolve_data_file(data_dir)):
            instance = to_instance(row)
            if split is None or instance.split == split:
                yield instance

    def plan(self, instance: Instance, response: str, mode: ScoringMode) -> Plan:
        # The same conversation in both modes; they differ only in how replies are read.
        questions = [c.text for c in instance.constraints]
        task = _prompts.judge_task(str(instance.meta.get("input", "")), response, questions)
        return Plan(rule_values={}, judge_tasks=(task,))

    def parse(
        self, instance: Instance, task: JudgeTask, turn_idx: int, reply: str, mode: ScoringMode
    ) -> TurnOutcome:
        if not 0 <= turn_idx < len(task.turns):
            raise ValueError(f"turn {turn_idx} out of range: the task has {len(task.turns)} turns")
        return _parse.parse_turn(reply, mode, task_prompt(task))

    def template_version(self) -> str:
        return _prompts.template_version()

    def fixture_dir(self) -> Path:
        return FIXTURE_DIR

    def simulated_judge_reply(self, messages: Sequence[Message], decide: Decide) -> str | None:
        return _simulated.simulated_judge_reply(messages, decide)

    def metrics(self) -> tuple[BenchmarkMetrics, ...]:
        from ifsweep.benchmarks.infobench import _metrics  # Polars: only where metrics are computed

        return (_metrics.definition(self.display_name),)

    def read_reference_outputs(
        self,
        paths: list[Path],
        data_dir: Path | None,
        options: Mapping[str, Any],
        *,
        mode: ScoringMode = "paper",
    ) -> Iterator[ImportedResult]:
        return _import.read_reference_outputs(paths, data_dir, _split(options))
