"""The FollowBench benchmark object: the Benchmark protocol over the pure functions of this package."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ifsweep.benchmarks._echo import template_prompt
from ifsweep.benchmarks.base import BenchmarkBase, Release
from ifsweep.benchmarks.followbench import _load, _parse, _prompts, _scoring
from ifsweep.benchmarks.records import Instance, JudgeTask, JudgeTurn, Plan, ScoringMode, TurnOutcome
from ifsweep.benchmarks.releases import FOLLOWBENCH


def _meta_str(instance: Instance, key: str) -> str:
    value = instance.meta.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{instance.instance_id}: meta {key!r} must be a string, got {value!r}")
    return value


def _level(instance: Instance) -> int:
    if instance.level is None or not 1 <= instance.level <= 5:
        raise ValueError(f"{instance.instance_id}: level must be 1..5, got {instance.level!r}")
    return instance.level


def instance_route(instance: Instance) -> _scoring.Route:
    example_id = instance.meta.get("example_id")
    if not isinstance(example_id, int):
        raise ValueError(f"{instance.instance_id}: meta 'example_id' must be an int, got {example_id!r}")
    return _scoring.route(
        instance.category or "",
        _meta_str(instance, "source"),
        example_id,
        _meta_str(instance, "language"),
    )


class FollowBench(BenchmarkBase):
    name = "followbench"
    display_name = "FollowBench"
    options = frozenset({"language", "categories"})
    release: Release = FOLLOWBENCH

    def check_options(self, options: Mapping[str, Any]) -> None:
        _load.validate_options(options)

    def report_name(self, data_dir: Path | None, options: Mapping[str, Any]) -> str:
        return _load.report_name(_load.language_of(data_dir, options))

    def load(self, data_dir: Path, options: Mapping[str, Any]) -> Iterator[Instance]:
        return _load.load(data_dir, options)

    def plan(self, instance: Instance, response: str, mode: ScoringMode) -> Plan:
        level = _level(instance)
        idxs = tuple(range(level))
        kind = instance_route(instance)
        if kind != "judge":
            passed = _scoring.rule_verdict(
                kind,
                response=response,
                target=_meta_str(instance, "target"),
                source=_meta_str(instance, "source"),
                example_id=int(instance.meta["example_id"]),
                level=level,
                language=_meta_str(instance, "language"),
            )
            return Plan(rule_values=dict.fromkeys(idxs, passed), judge_tasks=())
        path = tuple(instance.meta.get("evolution_path", ()))
        if len(path) != level + 1:
            raise ValueError(
                f"{instance.instance_id}: evolution path has {len(path)} steps, "
                f"level {level} needs {level + 1}"
            )
        prompt = _prompts.judge_prompt(
            instance.category or "", path, response, _meta_str(instance, "language")
        )
        rule = _prompts.format_rule(level, _meta_str(instance, "language"))
        task = JudgeTask(task_idx=0, turns=(JudgeTurn(user=prompt, constraint_idxs=idxs, reask=rule),))
        return Plan(rule_values={}, judge_tasks=(task,))

    def parse(
        self, instance: Instance, task: JudgeTask, turn_idx: int, reply: str, mode: ScoringMode
    ) -> TurnOutcome:
        level = len(task.turns[turn_idx].constraint_idxs)
        language = _meta_str(instance, "language")
        if mode == "paper":
            return TurnOutcome(
                values=_parse.decide_paper(
                    reply, level, language, template_prompt(task, _prompts.judge_templates(language))
                )
            )
        verdicts = _parse.decide_reference(reply, level, language)
        # The reference scores an unreadable reply as -1 and asks a human to fix it; with booleans the
        # nearest is "not satisfied" (docs/benchmarks/followbench.md, reference mode).
        return TurnOutcome(values=verdicts if verdicts is not None else (False,) * level)
