"""Reading the reference tool's `<model>_DecomposeEval.json` files (JSON Lines).

evaluation.py writes each input entry back with two added fields: `output` (the model's answer) and
`eval`, a list of true / false / null, one per question asked. It stops asking at the first unclear
judge reply and stores null for it, so `eval` may be shorter than the question list. The raw judge
replies are not stored: each stored value is turned back into a reply that parses to it ("YES", "NO",
and "" for null, which is unclear in both scoring modes).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ifsweep.benchmarks._files import iter_json_lines, typed_field
from ifsweep.benchmarks.infobench._load import (
    SUBSETS,
    parse_row,
    read_rows,
    resolve_data_file,
    to_instance,
    wanted_split,
)
from ifsweep.benchmarks.records import DataError, ImportedResult, Instance, ScoringMode

SUFFIX = "_DecomposeEval"
_REPLY_FOR: Mapping[bool | None, str] = {True: "YES", False: "NO", None: ""}


def model_name(path: Path) -> str:
    """evaluation.py names its output `<model>_DecomposeEval.json`; other names give the file stem."""
    stem = path.stem
    return stem[: -len(SUFFIX)] if stem.endswith(SUFFIX) and len(stem) > len(SUFFIX) else stem


def _eval_values(path: Path, line: int, obj: Mapping[str, Any], n_questions: int) -> list[bool | None]:
    values = obj.get("eval")
    if not isinstance(values, list):
        raise DataError(
            str(path),
            "missing or not a list (was the file written by evaluation.py?)",
            record=line,
            field="eval",
        )
    if len(values) > n_questions:
        raise DataError(
            str(path), f"{len(values)} values for {n_questions} questions", record=line, field="eval"
        )
    for i, v in enumerate(values):
        if v is not None and not isinstance(v, bool):
            raise DataError(
                str(path), f"item {i} is {v!r}, expected true, false or null", record=line, field="eval"
            )
    return values


def read_decompose_eval(
    path: Path, known: Mapping[str, Instance] | None, split: str | None
) -> Iterator[ImportedResult]:
    model = model_name(path)
    for line, obj in iter_json_lines(path):
        row = parse_row(path, line, obj)
        if split is not None and SUBSETS[row.subset] != split:
            continue
        if known is None:
            instance = to_instance(row)
        else:
            try:
                instance = known[row.id]
            except KeyError:
                raise DataError(
                    str(path), f"id {row.id!r} is not in the data", record=line, field="id"
                ) from None
            if tuple(c.text for c in instance.constraints) != row.questions:
                raise DataError(
                    str(path), "questions differ from the data's", record=line, field="decomposed_questions"
                )
        output = typed_field(path, line, obj, "output", str)
        values = _eval_values(path, line, obj, len(row.questions))
        replies = {(0, i): _REPLY_FOR[v] for i, v in enumerate(values)}
        yield ImportedResult(model=model, instance=instance, response=output, replies=replies)


def read_reference_outputs(
    paths: list[Path], data_dir: Path | None, options: Mapping[str, Any], mode: ScoringMode = "paper"
) -> Iterator[ImportedResult]:
    split = wanted_split(options)
    # The output files repeat every input field, so the data is optional; given, it is the authority
    # and each imported entry must match it.
    known = (
        None if data_dir is None else {r.id: to_instance(r) for r in read_rows(resolve_data_file(data_dir))}
    )
    for path in paths:
        yield from read_decompose_eval(path, known, split)
