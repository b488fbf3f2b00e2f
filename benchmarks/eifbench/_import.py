"""Reading the reference's judge output, `evaluate_<name>_<scenario>.jsonl` (6_evaluation.py).

One JSON line per judged scoring question: main_id, point_id, rule, input, sub_instruction_id,
sub_instruction, question, output (the model's answer), point_judge (its parsed bool) and
point_explanation (the judge's raw reply). The lines do not hold the whole task, so the data is needed
to rebuild each instance. A question judged twice (a resumed run appends) keeps its last line with a
reply; a line whose reply is "None" or "Err" gives none.

A point without a reply (no line, or only such lines):
- reference mode, as 8_metric.py (lines 42-44 skip the line): the point is left out and its task scored
  on the rest (`ImportedResult.unscored`); a task left with no point drops out, as there;
- paper mode: the point has no verdict, so its task is not scored (an error row: counted by coverage,
  never a pass or a failure), because GAcc and ILAcc are undefined without every point.
A JSON null reply (6_evaluation.py never writes one) is, in reference mode, its stored `point_judge`,
which is what 8_metric.py scores for it; in paper mode it is no reply.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ifsweep.benchmarks._files import iter_json_lines, typed_field
from ifsweep.benchmarks._options import one_of
from ifsweep.benchmarks.eifbench._load import SCENARIOS, load_instances
from ifsweep.benchmarks.records import DataError, ImportedResult, Instance, ScoringMode

_PREFIX = "evaluate_"
_NOT_A_REPLY = ("None", "Err")
# Replies that 6_evaluation.py's rule (and ours, in both modes) reads as the stored point_judge.
_VERDICT_REPLY = {True: "答案：是", False: "答案：否"}


def scenario_from_name(path: Path) -> str | None:
    for scenario in SCENARIOS:
        if path.stem.endswith("_" + scenario):
            return scenario
    return None


def model_name(path: Path, scenario: str) -> str:
    """eval.sh names the file evaluate_<step identifier>_<scenario>.jsonl; the identifier names the model."""
    name = path.stem
    if name.startswith(_PREFIX) and len(name) > len(_PREFIX):
        name = name[len(_PREFIX) :]
    suffix = "_" + scenario
    if name.endswith(suffix) and len(name) > len(suffix):
        name = name[: -len(suffix)]
    return name


class _Gathered:
    """Everything read for one task of one file: the last output seen and a reply per constraint."""

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self.output = ""
        self.replies: dict[tuple[int, int], str] = {}
        self.index = {(c.instruction_idx, c.text): c.idx for c in instance.constraints}
        self.keys = {str(s["key"]): int(s["idx"]) for s in instance.meta["sub_instructions"]}

    def result(self, model: str, mode: ScoringMode) -> ImportedResult:
        unscored: frozenset[int] = frozenset()
        if mode == "reference":
            unscored = frozenset(c.idx for c in self.instance.constraints if (c.idx, 0) not in self.replies)
        return ImportedResult(
            model=model,
            instance=self.instance,
            response=self.output,
            replies=dict(self.replies),
            unscored=unscored,
        )


def _reply(path: Path, line: int, obj: dict[str, object], mode: ScoringMode) -> str | None:
    """The judge reply a line gives to its point, or None when it gives none."""
    reply = typed_field(path, line, obj, "point_explanation", (str, type(None)))
    if reply is None and mode == "reference":
        judged: bool = typed_field(path, line, obj, "point_judge", bool)
        return _VERDICT_REPLY[judged]
    if reply is None or reply in _NOT_A_REPLY:
        return None
    return str(reply)


def _read_file(path: Path, instances: Mapping[int, Instance], mode: ScoringMode) -> Iterator[_Gathered]:
    tasks: dict[int, _Gathered] = {}
    for line, obj in iter_json_lines(path):
        main_id = typed_field(path, line, obj, "main_id", int)
        key = typed_field(path, line, obj, "sub_instruction_id", str)
        question = typed_field(path, line, obj, "question", str)
        output = typed_field(path, line, obj, "output", (str, type(None)))
        reply = _reply(path, line, obj, mode)
        if reply is None and mode == "reference":
            continue  # 8_metric.py never sees the line; a task with no other line is not scored at all
        if main_id not in instances:
            raise DataError(str(path), f"main_id {main_id} is not in the data", record=line, field="main_id")
        gathered = tasks.setdefault(main_id, _Gathered(instances[main_id]))
        sub_idx = gathered.keys.get(key)
        idx = gathered.index.get((sub_idx, question))
        if idx is None:
            raise DataError(
                str(path),
                f"no scoring question of {key!r} in task {main_id} reads so",
                record=line,
                field="question",
            )
        # The reference judged a null output as the text "None"; we keep the answer as the model gave it.
        gathered.output = "" if output is None else output
        if reply is not None:
            gathered.replies[(idx, 0)] = reply
    yield from tasks.values()


def read_reference_outputs(
    paths: list[Path], data_dir: Path | None, options: Mapping[str, Any], mode: ScoringMode = "paper"
) -> Iterator[ImportedResult]:
    scenario = one_of(options, "scenario", SCENARIOS)
    if data_dir is None:
        raise ValueError(
            "importing EIFBench results needs the data directory: the output lines lack the tasks"
        )
    cache: dict[str, dict[int, Instance]] = {}
    for path in paths:
        name = scenario or scenario_from_name(path)
        if name is None:
            raise ValueError(f"{path}: cannot tell the scenario from the file name; set option 'scenario'")
        if name not in cache:
            cache[name] = {int(i.meta["main_id"]): i for i in load_instances(data_dir, name)}
        model = model_name(path, name)
        for g in _read_file(path, cache[name], mode):
            yield g.result(model, mode)
