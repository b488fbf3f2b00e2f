"""EIFBench as a `Benchmark`: one single-turn judge task per scoring question."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ifsweep.benchmarks._echo import template_prompt
from ifsweep.benchmarks._options import one_of
from ifsweep.benchmarks.base import BenchmarkBase, Release
from ifsweep.benchmarks.eifbench import _parse, _prompts
from ifsweep.benchmarks.eifbench._load import SCENARIOS, load_instances
from ifsweep.benchmarks.records import Instance, JudgeTask, JudgeTurn, Plan, ScoringMode, TurnOutcome
from ifsweep.benchmarks.releases import EIFBENCH


def scenario(options: Mapping[str, Any]) -> str | None:
    return one_of(options, "scenario", SCENARIOS)


class EIFBench(BenchmarkBase):
    name = "eifbench"
    display_name = "EIFBench"
    options = frozenset({"scenario"})
    release: Release = EIFBENCH

    def check_options(self, options: Mapping[str, Any]) -> None:
        scenario(options)

    def load(self, data_dir: Path, options: Mapping[str, Any]) -> Iterator[Instance]:
        return load_instances(data_dir, scenario(options))

    def plan(self, instance: Instance, response: str, mode: ScoringMode) -> Plan:
        # The same requests in both modes; they differ only in how replies are read.
        subs = {
            int(s["idx"]): (str(s["key"]), str(s["instruction"])) for s in instance.meta["sub_instructions"]
        }
        task_input = str(instance.meta["input"])
        tasks = []
        for c in instance.constraints:
            if c.instruction_idx is None or c.instruction_idx not in subs:
                raise ValueError(
                    f"{instance.instance_id}: constraint {c.idx} names no sub-instruction of the task"
                )
            key, instruction = subs[c.instruction_idx]
            user = _prompts.score_user(task_input, response, key, instruction, c.text)
            tasks.append(
                JudgeTask(
                    task_idx=c.idx,
                    turns=(JudgeTurn(user, (c.idx,), _prompts.FORMAT_RULE),),
                    system=_prompts.SYSTEM,
                )
            )
        return Plan(rule_values={}, judge_tasks=tuple(tasks))

    def parse(
        self, instance: Instance, task: JudgeTask, turn_idx: int, reply: str, mode: ScoringMode
    ) -> TurnOutcome:
        if turn_idx != 0:
            raise ValueError(f"EIFBench judge tasks have one turn, got turn {turn_idx}")
        return _parse.parse_turn(reply, mode, template_prompt(task, _prompts.JUDGE_TEMPLATES))
