"""EIFBench as a `Benchmark`: one single-turn judge task per scoring question."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ifsweep.benchmarks._echo import task_prompt
from ifsweep.benchmarks._options import check_known, one_of
from ifsweep.benchmarks.base import Decide, Release
from ifsweep.benchmarks.eifbench import _import, _parse, _prompts, _simulated
from ifsweep.benchmarks.eifbench._load import SCENARIOS, load_instances
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

if TYPE_CHECKING:
    from ifsweep.metrics import BenchmarkMetrics

FIXTURE_DIR = Path(__file__).resolve().parent / "fixtures"


def _scenario(options: Mapping[str, Any]) -> str | None:
    return one_of(options, "scenario", SCENARIOS)


class EIFBench:
    name = "eifbench"
    display_name = "EIFBench"
    options = frozenset({"scenario"})

    @property
    def release(self) -> Release:
        from ifsweep.benchmarks import releases

        return releases.EIFBENCH

    def validate_options(self, options: Mapping[str, Any]) -> None:
        check_known(self.name, options, self.options)
        _scenario(options)

    def report_name(self, data_dir: Path | None, options: Mapping[str, Any]) -> str:
        return self.name  # one language

    def load(self, data_dir: Path, options: Mapping[str, Any]) -> Iterator[Instance]:
        return load_instances(data_dir, _scenario(options))

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
        return _parse.parse_turn(reply, mode, task_prompt(task))

    def template_version(self) -> str:
        return _prompts.template_version()

    def fixture_dir(self) -> Path:
        return FIXTURE_DIR

    def simulated_judge_reply(self, messages: Sequence[Message], decide: Decide) -> str | None:
        return _simulated.simulated_judge_reply(messages, decide)

    def metrics(self) -> tuple[BenchmarkMetrics, ...]:
        from ifsweep.benchmarks.eifbench import _metrics  # Polars: only where metrics are computed

        return (_metrics.definition(self.display_name),)

    def read_reference_outputs(
        self,
        paths: list[Path],
        data_dir: Path | None,
        options: Mapping[str, Any],
        *,
        mode: ScoringMode = "paper",
    ) -> Iterator[ImportedResult]:
        return _import.read_reference_outputs(paths, data_dir, _scenario(options), mode)
