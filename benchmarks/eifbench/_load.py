"""Reading EIFBench's sorted_<scenario><n>.json files (one JSON array each) into validated tasks.

A task has an input (text or dialogue), sub-instructions `sub_instruction_<k>` each with its scoring
questions, and descriptive fields. The reference generates and judges from `input` and the
sub-instructions only; the top-level `instruction` / `scoring_questions` (empty in the released party
file) are read and checked but, as there, neither shown to the model nor judged.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from ifsweep.benchmarks._files import once, read_json_array, typed_field
from ifsweep.benchmarks.eifbench._prompts import SPLIT_THRESHOLD, generation_messages, input_text
from ifsweep.benchmarks.records import Constraint, DataError, Instance

BENCHMARK = "eifbench"
SCENARIOS = ("single", "dialogue", "party")
# The reference keeps its files under data/, and the dialogue set under updated_data/ (eval.sh).
DATA_FOLDERS = ("data", "updated_data")
_FILE_NAME = re.compile(r"sorted_(single|dialogue|party)\d*\.json")
_SUB_KEY = re.compile(r"sub_instruction_(\d+)")
_STR_FIELDS = ("group", "category", "task_types", "instruction", "input")


@dataclass(frozen=True, slots=True)
class SubInstruction:
    key: str
    idx: int  # the number in the key; keys need not be dense (the party file skips some)
    instruction: str
    questions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Task:
    record: int  # 0-based index in the file's array
    main_id: int
    group: str
    idx_in_group: int
    category: str
    task_types: str
    composition_types: tuple[str, ...]
    instruction: str
    scoring_questions: tuple[str, ...]
    sub_instructions: tuple[SubInstruction, ...]  # in the order of the number in the key
    input: str


def scenario_of(path: Path) -> str | None:
    m = _FILE_NAME.fullmatch(path.name)
    return m.group(1) if m else None


def _scenario_files(folder: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(folder.glob("sorted_*.json")):
        scenario = scenario_of(path)
        if scenario is None:
            continue
        if scenario in found:
            raise DataError(str(folder), f"two {scenario} files: {found[scenario].name} and {path.name}")
        found[scenario] = path
    return found


def resolve_files(data_dir: Path, scenario: str | None) -> list[tuple[str, Path]]:
    """(scenario, file) pairs to read: `data_dir` is a release root (holding data/), a data folder,
    or one file. Without a scenario a folder gives every scenario it holds, in SCENARIOS order."""
    if data_dir.is_file():
        named = scenario_of(data_dir)
        if named is None and scenario is None:
            raise ValueError(
                f"{data_dir}: cannot tell the scenario from the file name; set option 'scenario'"
            )
        if named is not None and scenario is not None and named != scenario:
            raise ValueError(f"{data_dir}: a {named} file, but option 'scenario' is {scenario!r}")
        return [(scenario or named or "", data_dir)]
    if not data_dir.is_dir():
        raise FileNotFoundError(f"{data_dir}: no such file or folder")
    folders = [data_dir / name for name in DATA_FOLDERS if (data_dir / name).is_dir()] + [data_dir]
    chosen: dict[str, Path] = {}
    for folder in folders:
        for name, path in _scenario_files(folder).items():
            chosen.setdefault(name, path)  # the first folder holding a scenario wins
    wanted = [scenario] if scenario is not None else [s for s in SCENARIOS if s in chosen]
    missing = [s for s in wanted if s not in chosen]
    if missing or not wanted:
        what = f"sorted_{missing[0]}*.json" if missing else "sorted_<scenario>*.json"
        raise FileNotFoundError(f"{data_dir}: no {what} in {', '.join(str(f) for f in folders)}")
    return [(s, chosen[s]) for s in wanted]


def _str_list(value: Any) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


def _sub_instructions(path: Path, record: int, value: Any) -> tuple[SubInstruction, ...]:
    def fail(message: str) -> DataError:
        return DataError(str(path), message, record=record, field="sub_instructions")

    if not isinstance(value, dict) or not value:
        raise fail("expected a non-empty object of sub_instruction_<k> entries")
    subs: dict[int, SubInstruction] = {}
    for key, item in value.items():
        m = _SUB_KEY.fullmatch(key)
        if m is None:
            raise fail(f"key {key!r} is not sub_instruction_<number>")
        idx = int(m.group(1))
        if idx in subs:
            raise fail(f"keys {subs[idx].key!r} and {key!r} have the same number")
        if not isinstance(item, dict):
            raise fail(f"{key}: expected an object")
        if not isinstance(item.get("instruction"), str):
            raise fail(f"{key}.instruction: missing or not a string")
        questions = item.get("scoring_questions")
        if not _str_list(questions) or not all(q.strip() for q in questions):
            raise fail(f"{key}.scoring_questions: missing or not a list of non-empty strings")
        subs[idx] = SubInstruction(key, idx, item["instruction"], tuple(questions))
    # 5_output.py orders by the number in the key; the released files already list them that way.
    return tuple(subs[i] for i in sorted(subs))


def parse_task(path: Path, record: int, obj: Any) -> Task:
    def fail(field: str, message: str) -> DataError:
        return DataError(str(path), message, record=record, field=field)

    if not isinstance(obj, dict):
        raise DataError(str(path), f"expected an object, got {type(obj).__name__}", record=record)
    for name in (
        *_STR_FIELDS,
        "main_id",
        "idx_in_group",
        "composition_types",
        "scoring_questions",
        "sub_instructions",
    ):
        if name not in obj:
            raise fail(name, "missing")
    for name in _STR_FIELDS:
        typed_field(path, record, obj, name, str)
    for name in ("main_id", "idx_in_group"):
        typed_field(path, record, obj, name, int)
    for name in ("composition_types", "scoring_questions"):
        if not _str_list(obj[name]):
            raise fail(name, "expected a list of strings")
    return Task(
        record=record,
        main_id=obj["main_id"],
        group=obj["group"],
        idx_in_group=obj["idx_in_group"],
        category=obj["category"],
        task_types=obj["task_types"],
        composition_types=tuple(obj["composition_types"]),
        instruction=obj["instruction"],
        scoring_questions=tuple(obj["scoring_questions"]),
        sub_instructions=_sub_instructions(path, record, obj["sub_instructions"]),
        input=obj["input"],
    )


def read_tasks(path: Path) -> Iterator[Task]:
    """Validated tasks in file order; a main_id seen twice fails on its second record."""
    data = read_json_array(path, "tasks")
    seen: dict[int, int] = {}
    for record, obj in enumerate(data):
        task = parse_task(path, record, obj)
        once(path, seen, task.main_id, record, "main_id")
        yield task


def instance_id(scenario: str, main_id: int) -> str:
    return f"{scenario}:{main_id}"


def to_instance(task: Task, scenario: str) -> Instance:
    blocks = [(s.key, s.instruction, s.questions) for s in task.sub_instructions]
    text = input_text(task.input, blocks)
    constraints = tuple(
        Constraint(idx=i, type=task.category or None, text=q, instruction_idx=s.idx)
        for i, (s, q) in enumerate((s, q) for s in task.sub_instructions for q in s.questions)
    )
    iid = instance_id(scenario, task.main_id)
    meta: Mapping[str, Any] = {
        "scenario": scenario,
        "main_id": task.main_id,
        "input": task.input,
        "sub_instructions": tuple(
            {"key": s.key, "idx": s.idx, "instruction": s.instruction} for s in task.sub_instructions
        ),
        "group": task.group,
        "idx_in_group": task.idx_in_group,
        "task_types": task.task_types,
        "composition_types": task.composition_types,
        # The reference would have split this task into two generation calls; we send one (see docs).
        "reference_split": len(text) > SPLIT_THRESHOLD,
    }
    return Instance(
        benchmark=BENCHMARK,
        instance_id=iid,
        group_id=iid,
        messages=generation_messages(text),
        constraints=constraints,
        category=task.category or None,
        split=scenario,
        meta=meta,
    )


def load_instances(data_dir: Path, scenario: str | None) -> Iterator[Instance]:
    for name, path in resolve_files(data_dir, scenario):
        for task in read_tasks(path):
            yield to_instance(task, name)
