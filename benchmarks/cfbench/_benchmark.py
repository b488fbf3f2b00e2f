"""The CFBench benchmark (Zhang et al., 2024): 1,000 Chinese instructions, each with a checklist of
primary (主需) and secondary (次需) requirements that one judge call scores 0 or 1 each."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ifsweep.benchmarks._echo import template_prompt
from ifsweep.benchmarks.base import BenchmarkBase, Release
from ifsweep.benchmarks.cfbench._load import load_instances, wanted_splits
from ifsweep.benchmarks.cfbench._parse import paper_values, reference_values
from ifsweep.benchmarks.cfbench._prompts import format_rule, judge_template, render_judge_prompt
from ifsweep.benchmarks.records import Instance, JudgeTask, JudgeTurn, Plan, ScoringMode, TurnOutcome
from ifsweep.benchmarks.releases import CFBENCH

__all__ = ["CFBench"]


class CFBench(BenchmarkBase):
    name = "cfbench"
    display_name = "CFBench"
    options: frozenset[str] = frozenset({"split"})
    release: Release = CFBENCH

    def check_options(self, options: Mapping[str, Any]) -> None:
        wanted_splits(options)

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
        return TurnOutcome(paper_values(instance, reply, template_prompt(task, (judge_template(),))))
