"""Reading InfoBench.json (JSON Lines) into validated rows, and rows into instances.

The Hugging Face file `kqsong/InFoBench/InfoBench.json` holds one instruction per line. Every field is
checked here so that a bad file fails with its path, its line number and the field, never later in
the middle of a run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ifsweep.benchmarks._files import iter_json_lines, once, typed_field
from ifsweep.benchmarks._options import one_of
from ifsweep.benchmarks.infobench._prompts import generation_messages
from ifsweep.benchmarks.records import Constraint, DataError, Instance

DATA_FILE = "InfoBench.json"
BENCHMARK = "infobench"
# The file's subset names and the split names our configs use for them.
SUBSETS: Mapping[str, str] = {"Easy_set": "easy", "Hard_set": "hard"}
SPLITS = ("easy", "hard")
_STR_FIELDS = ("id", "input", "category", "instruction", "subset")


@dataclass(frozen=True, slots=True)
class Row:
    """One validated line of InfoBench.json; `line` is its 1-based line number."""

    line: int
    id: str
    input: str
    category: str
    instruction: str
    questions: tuple[str, ...]
    subset: str
    labels: tuple[tuple[str, ...], ...]


def resolve_data_file(data_dir: Path) -> Path:
    """`data_dir` may be the file itself or a folder holding InfoBench.json."""
    if data_dir.is_file():
        return data_dir
    candidate = data_dir / DATA_FILE
    if candidate.is_file():
        return candidate
    raise FileNotFoundError(f"{data_dir}: no {DATA_FILE} there (expected the file or a folder holding it)")


def parse_row(path: Path, line: int, obj: Mapping[str, Any]) -> Row:
    def fail(field: str, message: str) -> DataError:
        return DataError(str(path), message, record=line, field=field)

    for name in (*_STR_FIELDS, "decomposed_questions", "question_label"):
        if name not in obj:
            raise fail(name, "missing")
    for name in _STR_FIELDS:
        typed_field(path, line, obj, name, str)
    if not obj["id"]:
        raise fail("id", "is empty")
    if obj["subset"] not in SUBSETS:
        raise fail("subset", f"expected one of {', '.join(SUBSETS)}, got {obj['subset']!r}")
    questions = obj["decomposed_questions"]
    if not isinstance(questions, list) or not questions:
        raise fail("decomposed_questions", "expected a non-empty list of strings")
    for i, q in enumerate(questions):
        if not isinstance(q, str) or not q.strip():
            raise fail("decomposed_questions", f"item {i} is not a non-empty string")
    labels = obj["question_label"]
    if not isinstance(labels, list) or len(labels) != len(questions):
        got = len(labels) if isinstance(labels, list) else type(labels).__name__
        raise fail(
            "question_label", f"expected a list of {len(questions)} label lists (one per question), got {got}"
        )
    for i, item in enumerate(labels):
        if not isinstance(item, list) or not all(isinstance(x, str) and x for x in item):
            raise fail("question_label", f"item {i} is not a list of non-empty strings")
    return Row(
        line=line,
        id=obj["id"],
        input=obj["input"],
        category=obj["category"],
        instruction=obj["instruction"],
        questions=tuple(questions),
        subset=obj["subset"],
        labels=tuple(tuple(item) for item in labels),
    )


def read_rows(path: Path) -> Iterator[Row]:
    """Validated rows in file order; an id seen twice fails on its second line."""
    seen: dict[str, int] = {}
    for line, obj in iter_json_lines(path):
        row = parse_row(path, line, obj)
        once(path, seen, row.id, line, "id", line=True)
        yield row


def to_instance(row: Row) -> Instance:
    constraints = tuple(
        # An empty label list has no type rather than the empty string, so slices do not show "".
        Constraint(idx=i, type="|".join(labels) or None, text=question)
        for i, (question, labels) in enumerate(zip(row.questions, row.labels, strict=True))
    )
    return Instance(
        benchmark=BENCHMARK,
        instance_id=row.id,
        group_id=row.id,
        messages=generation_messages(row.instruction, row.input),
        constraints=constraints,
        category=row.category or None,
        split=SUBSETS[row.subset],
        meta={"input": row.input, "instruction": row.instruction, "subset": row.subset},
    )


def wanted_split(options: Mapping[str, Any]) -> str | None:
    """The `split` option: None for both."""
    return one_of(options, "split", SPLITS)
