"""Reading and validating CFBench records (data/cfbench_data.json and the reference tool's output files).

A record is a JSON object with `idx`, `prompt`, `gold`, `isanswer`, `doamin` (sic: the released data
spells it so), `scenario`, `source`, `split` ("easy" | "hard") and `criteria`: a list of
[text, "主需" | "次需", type, subtype] items, where type and subtype are "" for 129 items.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ifsweep.benchmarks._files import once, read_json_array, typed_field
from ifsweep.benchmarks.records import Constraint, DataError, Instance, Message, Priority

__all__ = [
    "DATA_FILE",
    "SPLITS",
    "instance_from_record",
    "load_instances",
    "read_json_array",
    "resolve",
    "wanted_splits",
]

DATA_FILE = "cfbench_data.json"
SPLITS = ("easy", "hard")
_PRIORITIES: Mapping[str, Priority] = {"主需": "primary", "次需": "secondary"}
_TEXT_FIELDS = ("prompt", "gold", "isanswer", "doamin", "scenario", "source")


def resolve(data_dir: Path) -> Path:
    """The data file: `data_dir` itself, or cfbench_data.json in it or in its data/ folder."""
    if data_dir.is_file():
        return data_dir
    for candidate in (data_dir / DATA_FILE, data_dir / "data" / DATA_FILE):
        if candidate.is_file():
            return candidate
    raise DataError(str(data_dir), f"no {DATA_FILE} here, nor in its data/ folder")


def _constraint(item: Any, pos: int, path: str, index: int) -> tuple[Constraint, str | None]:
    where = f"criteria[{pos}]"
    if not isinstance(item, list) or len(item) != 4 or not all(isinstance(x, str) for x in item):
        raise DataError(path, "expected [text, priority, type, subtype] strings", record=index, field=where)
    text, priority, ctype, subtype = item
    if not text.strip():
        raise DataError(path, "empty criterion text", record=index, field=where)
    if priority not in _PRIORITIES:
        raise DataError(path, f"priority {priority!r} is not 主需 or 次需", record=index, field=where)
    constraint = Constraint(idx=pos, type=ctype or None, priority=_PRIORITIES[priority], text=text)
    return constraint, subtype or None


def instance_from_record(record: Any, path: str, index: int) -> Instance:
    """One validated Instance. Criterion texts are kept verbatim (leading spaces included): the reference
    parser compares the judge's echo of them byte for byte."""
    if not isinstance(record, dict):
        raise DataError(path, f"expected an object, got {type(record).__name__}", record=index)
    idx = record.get("idx")
    if isinstance(idx, bool) or not isinstance(idx, int) or idx < 0:
        raise DataError(path, f"expected a non-negative integer, got {idx!r}", record=index, field="idx")
    texts = {key: typed_field(path, index, record, key, str) for key in _TEXT_FIELDS}
    split = typed_field(path, index, record, "split", str)
    if split not in SPLITS:
        raise DataError(path, f"expected 'easy' or 'hard', got {split!r}", record=index, field="split")
    criteria = record.get("criteria")
    if not isinstance(criteria, list) or not criteria:
        raise DataError(path, "expected a non-empty list", record=index, field="criteria")
    pairs = [_constraint(item, pos, path, index) for pos, item in enumerate(criteria)]
    return Instance(
        benchmark="cfbench",
        instance_id=str(idx),
        group_id=str(idx),
        # CFBench sends the prompt as is, with no system message (idx 810's prompt is empty).
        messages=(Message("user", texts["prompt"]),),
        constraints=tuple(constraint for constraint, _ in pairs),
        category=texts["doamin"],
        split=split,
        meta={
            "gold": texts["gold"],
            "isanswer": texts["isanswer"],
            "domain": texts["doamin"],
            "scenario": texts["scenario"],
            "source": texts["source"],
            "subtypes": tuple(subtype for _, subtype in pairs),
        },
    )


def wanted_splits(options: Mapping[str, Any]) -> frozenset[str]:
    """The splits the `split` option selects: one name, a list of names, or (absent) both."""
    value = options.get("split")
    if value is None:
        return frozenset(SPLITS)
    names: Sequence[Any] = [value] if isinstance(value, str) else value
    if not isinstance(names, list | tuple) or not names or any(name not in SPLITS for name in names):
        raise ValueError(f"option 'split' must be 'easy', 'hard' or a list of them, got {value!r}")
    return frozenset(names)


def load_instances(data_dir: Path, options: Mapping[str, Any]) -> Iterator[Instance]:
    """Every record of the data file, validated, in file order, filtered by the `split` option."""
    splits = wanted_splits(options)
    path = resolve(data_dir)
    records = read_json_array(path)
    seen: dict[int, int] = {}
    instances = []
    # Validate the whole file before yielding anything, so a bad record fails the load, not a run midway.
    for index, record in enumerate(records):
        instance = instance_from_record(record, str(path), index)
        idx = int(instance.instance_id)
        once(path, seen, idx, index, "idx")
        instances.append(instance)
    return iter([instance for instance in instances if instance.split in splits])
