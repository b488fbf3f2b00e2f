"""InFoBench as a `Benchmark`: every decomposed question is judged in one multi-turn conversation."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ifsweep.benchmarks._echo import template_prompt
from ifsweep.benchmarks.base import BenchmarkBase, Release
from ifsweep.benchmarks.infobench import _parse, _prompts
from ifsweep.benchmarks.infobench._load import SPLITS, read_rows, resolve_data_file, to_instance, wanted_split
from ifsweep.benchmarks.records import Instance, JudgeTask, Plan, ScoringMode, TurnOutcome
from ifsweep.benchmarks.releases import INFOBENCH

__all__ = ["SPLITS", "InfoBench"]


class InfoBench(BenchmarkBase):
    name = "infobench"
    display_name = "InFoBench"
    options = frozenset({"split"})
    release: Release = INFOBENCH

    def check_options(self, options: Mapping[str, Any]) -> None:
        wanted_split(options)

    def load(self, data_dir: Path, options: Mapping[str, Any]) -> Iterator[Instance]:
        wanted = wanted_split(options)
        for row in read_rows(resolve_data_file(data_dir)):
            instance = to_instance(row)
            if wanted is None or instance.split == wanted:
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
        return _parse.parse_turn(reply, mode, template_prompt(task, _prompts.JUDGE_TEMPLATES))
