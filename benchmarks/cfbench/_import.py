"""Reading the files CFBench's reference code writes: output/response/<model>_infer.json (the model's
responses) and output/judge/<model>_eval.json (the same records plus the judge's reply and scores).

Both are JSON arrays of data records with `response` and `infer_model` added; eval files also hold
`judge_response`, `judge_score`, `judge_parsing` and `judge_metric`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ifsweep.benchmarks._files import typed_field
from ifsweep.benchmarks.cfbench._load import (
    instance_from_record,
    load_instances,
    read_json_array,
    wanted_splits,
)
from ifsweep.benchmarks.records import DataError, ImportedResult, Instance, ScoringMode

__all__ = ["expand_paths", "model_from_filename", "read_reference_outputs"]

_SUFFIXES = ("_eval", "_infer")
_SAME_AS_DATA = ("prompt", "gold", "split")


def model_from_filename(path: Path) -> str:
    stem = path.stem
    for suffix in _SUFFIXES:
        if stem.endswith(suffix) and len(stem) > len(suffix):
            return stem[: -len(suffix)]
    return stem


def expand_paths(paths: list[Path]) -> list[Path]:
    """Files as given; a folder stands for every *_eval.json and *_infer.json below it. Eval files come
    first: when both files hold a (model, instance), the one with the judge's reply wins."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(path.rglob("*_eval.json")) + sorted(path.rglob("*_infer.json"))
        elif path.is_file():
            files.append(path)
        else:
            raise DataError(str(path), "no such file or folder")
    return sorted(dict.fromkeys(files), key=lambda p: not p.stem.endswith("_eval"))


def _from_data(record: dict[str, Any], known: Mapping[str, Instance], path: str, index: int) -> Instance:
    idx = record.get("idx")
    if isinstance(idx, bool) or not isinstance(idx, int):
        raise DataError(path, f"expected an integer, got {idx!r}", record=index, field="idx")
    instance = known.get(str(idx))
    if instance is None:
        raise DataError(path, f"idx {idx} is not in the data", record=index, field="idx")
    data_values = {"prompt": instance.messages[-1].content, "gold": instance.meta["gold"]}
    data_values["split"] = instance.split or ""
    for key in _SAME_AS_DATA:
        if key in record and record[key] != data_values[key]:
            raise DataError(path, f"differs from the data's record {idx}", record=index, field=key)
    if "criteria" in record and [c[0] for c in record["criteria"] if isinstance(c, list) and c] != [
        c.text for c in instance.constraints
    ]:
        raise DataError(path, f"differs from the data's record {idx}", record=index, field="criteria")
    return instance


def _read_file(path: Path, known: Mapping[str, Instance] | None) -> Iterator[ImportedResult]:
    where = str(path)
    is_eval = path.stem.endswith("_eval")
    default_model = model_from_filename(path)
    for index, record in enumerate(read_json_array(path)):
        if not isinstance(record, dict):
            raise DataError(where, f"expected an object, got {type(record).__name__}", record=index)
        if known is None:
            instance = instance_from_record(record, where, index)
        else:
            instance = _from_data(record, known, where, index)
        response: str = typed_field(where, index, record, "response", str)
        # An infer file has no judge reply yet; an eval file must hold one.
        kind = str if is_eval else (str, type(None))
        reply: str | None = typed_field(where, index, record, "judge_response", kind, required=is_eval)
        model = (
            typed_field(where, index, record, "infer_model", (str, type(None)), required=False)
            or default_model
        )
        replies = {} if reply is None else {(0, 0): reply}
        yield ImportedResult(model=model, instance=instance, response=response, replies=replies)


def read_reference_outputs(
    paths: list[Path], data_dir: Path | None, options: Mapping[str, Any], mode: ScoringMode = "paper"
) -> Iterator[ImportedResult]:
    """Every stored (model, instance, response, judge reply) of the given files or folders, filtered by
    the `split` option. With `data_dir` the instance comes from the data (and must agree with the
    record); without it, from the record's own fields."""
    splits = wanted_splits(options)
    known = None
    if data_dir is not None:
        known = {instance.instance_id: instance for instance in load_instances(data_dir, {})}
    seen: dict[tuple[str, str], str] = {}
    for path in expand_paths(paths):
        for result in _read_file(path, known):
            key = (result.model, result.instance.instance_id)
            if key in seen:
                if seen[key] == str(path):
                    raise DataError(str(path), f"model {key[0]} has instance {key[1]} twice")
                continue  # already read with its judge reply from an eval file
            seen[key] = str(path)
            if result.instance.split in splits:
                yield result
