"""The FollowBench benchmark object: the Benchmark protocol over the pure functions of this package."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
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


def _judge_task(instance: Instance, response: str, level: int, *, audit: bool = False) -> JudgeTask:
    """The one judge task of an instance: every one of its `level` constraints in one prompt."""
    path = tuple(instance.meta.get("evolution_path", ()))
    if len(path) != level + 1:
        raise ValueError(
            f"{instance.instance_id}: evolution path has {len(path)} steps, level {level} needs {level + 1}"
        )
    language = _meta_str(instance, "language")
    prompt = _prompts.judge_prompt(instance.category or "", path, response, language)
    turn = JudgeTurn(
        user=prompt, constraint_idxs=tuple(range(level)), reask=_prompts.format_rule(level, language)
    )
    return JudgeTask(task_idx=0, turns=(turn,), audit=audit)


class FollowBench(BenchmarkBase):
    name = "followbench"
    display_name = "FollowBench"
    options = frozenset({"language", "categories", "audit_rule_items"})
    release: Release = FOLLOWBENCH

    def check_options(self, options: Mapping[str, Any]) -> None:
        _load.validate_options(options)

    def report_name(self, data_dir: Path | None, options: Mapping[str, Any]) -> str:
        return _load.report_name(_load.language_of(data_dir, options))

    def load(self, data_dir: Path, options: Mapping[str, Any]) -> Iterator[Instance]:
        if not options.get("audit_rule_items", False):
            return _load.load(data_dir, options)
        # The rule-decided instances are marked so that plan() also sends them to the judge, for the audit.
        return (
            replace(i, meta={**i.meta, "audit_rule_items": True})
            if instance_route(i) in ("rule", "format_rule")
            else i
            for i in _load.load(data_dir, options)
        )

    def plan(self, instance: Instance, response: str, mode: ScoringMode) -> Plan:
        level = _level(instance)
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
            audit = (
                (_judge_task(instance, response, level, audit=True),)
                if instance.meta.get("audit_rule_items")
                else ()
            )
            return Plan(rule_values=dict.fromkeys(range(level), passed), judge_tasks=audit)
        return Plan(rule_values={}, judge_tasks=(_judge_task(instance, response, level),))

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
