"""The CFBench benchmark (Zhang et al., 2024): 1,000 Chinese instructions, each with a checklist of
primary (主需) and secondary (次需) requirements that one judge call scores 0 or 1 each."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ifsweep.benchmarks._echo import task_prompt
from ifsweep.benchmarks._options import check_known
from ifsweep.benchmarks.base import Decide, Release
from ifsweep.benchmarks.cfbench.imports import read_reference_outputs
from ifsweep.benchmarks.cfbench.load import load_instances, wanted_splits
from ifsweep.benchmarks.cfbench.parse import paper_values, reference_values
from ifsweep.benchmarks.cfbench.prompts import format_rule, render_judge_prompt, template_hash
from ifsweep.benchmarks.cfbench.simulated import simulated_judge_reply
from ifsweep.benchmarks.records import (
    ImportedResult,
    Instance,
    JudgeTask,
    JudgeTurn,
    Message,
    Plan,
    ScoringMode,
    TurnOutcome,
)
from ifsweep.benchmarks.releases import CFBENCH

if TYPE_CHECKING:
    from ifsweep.metrics import BenchmarkMetrics

__all__ = ["CFBench"]


class CFBench:
    name = "cfbench"
    display_name = "CFBench"
    options: frozenset[str] = frozenset({"split"})
    release: Release = CFBENCH

    def validate_options(self, options: Mapping[str, Any]) -> None:
        check_known(self.name, options, self.options)
        wanted_splits(options)

    def report_name(self, data_dir: Path | None, options: Mapping[str, Any]) -> str:
        return self.name  # one language

    def load(self, data_dir: Path, options: Mapping[str, Any]) -> Iterator[Instance]:
        return load_instances(data_dir, options)

    def plan(self, instance: Instance, response: str, mode: ScoringMode) -> Plan:
        # Both modes send the same single judge message; they differ only in how its reply is read.
        turn = JudgeTurn(
            user=render_judge_prompt(instance, response),
            constraint_idxs=tuple(c.idx for c in instance.constraints),
            reask=format_rule(),
        )
        return Plan(rule_values={}, judge_tasks=(JudgeTask(task_idx=0, turns=(turn,)),))

    def parse(
        self, instance: Instance, task: JudgeTask, turn_idx: int, reply: str, mode: ScoringMode
    ) -> TurnOutcome:
        if task.task_idx != 0 or turn_idx != 0:
            raise ValueError(
                f"cfbench has one judge task of one turn, got task {task.task_idx} turn {turn_idx}"
            )
        if mode == "reference":
            # The reference re-asks an unreadable reply up to 10 times, then applies its fallback; an
            # imported reply is the last one it got, so the fallback applies at once here.
            return TurnOutcome(reference_values(instance, reply))
        return TurnOutcome(paper_values(instance, reply, task_prompt(task)))

    def template_version(self) -> str:
        return template_hash()

    def fixture_dir(self) -> Path:
        return Path(__file__).resolve().parent / "fixtures"

    def simulated_judge_reply(self, messages: Sequence[Message], decide: Decide) -> str | None:
        return simulated_judge_reply(messages, decide)

    def metrics(self) -> tuple[BenchmarkMetrics, ...]:
        from ifsweep.benchmarks.cfbench import metrics  # Polars: only where metrics are computed

        return (metrics.definition(self.display_name),)

    def read_reference_outputs(
        self,
        paths: list[Path],
        data_dir: Path | None,
        options: Mapping[str, Any],
        *,
        mode: ScoringMode = "paper",
    ) -> Iterator[ImportedResult]:
        return read_reference_outputs(paths, data_dir, options)
