"""Reading benchmark files into plain JSON values, failing with a DataError that names the file, the
record (array index or 1-based line) and the field, as every loader and importer must."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import orjson

from ifsweep.benchmarks.records import DataError

__all__ = ["iter_json_lines", "once", "read_json_array", "read_text", "typed_field"]

_K = TypeVar("_K")

_KIND_NAMES: Mapping[type, str] = {
    str: "a string",
    int: "an integer",
    bool: "true or false",
    list: "a list",
    dict: "an object",
    type(None): "null",
}


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(str(path), "file not found") from None
    except UnicodeDecodeError as exc:
        raise DataError(str(path), f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise DataError(str(path), f"not readable: {exc.strerror or exc}") from None


def read_json_array(path: Path, items: str = "records") -> list[Any]:
    """The file's top-level JSON array; `items` names what it holds in the error for anything else."""
    try:
        raw = path.read_bytes()
    except OSError:
        read_text(path)  # the precise error for a missing or unreadable file
        raise
    try:
        # orjson parses from the bytes: no decoded copy of the file, and about a third of the stdlib
        # parser's peak memory (81 vs 200 MB on a 23 MB file); on any failure the stdlib parser below
        # gives the usual message with its line and column.
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        data = _strict_json(path)
    if not isinstance(data, list):
        raise DataError(str(path), f"expected a JSON array of {items}, got {type(data).__name__}")
    return data


def _strict_json(path: Path) -> Any:
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(
            str(path), f"not valid JSON (invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None


def iter_json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(1-based line number, object) for each non-blank line; a line that is not a JSON object fails
    with its number as the record."""
    for line, raw in enumerate(read_text(path).splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise DataError(
                str(path), f"not valid JSON: {exc.msg} (column {exc.colno})", record=line
            ) from None
        if not isinstance(obj, dict):
            raise DataError(str(path), f"expected a JSON object, got {type(obj).__name__}", record=line)
        yield line, obj


def typed_field(
    path: Path | str,
    record: int,
    obj: Mapping[str, Any],
    name: str,
    kind: type | tuple[type, ...],
    *,
    required: bool = True,
) -> Any:
    """obj[name] when it is of `kind`. bool passes only where `kind` names it: JSON true is no integer
    id or level. An absent optional field reads as None."""
    if name not in obj:
        if required:
            raise DataError(str(path), "missing", record=record, field=name)
        return None
    value = obj[name]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        wanted = " or ".join(_KIND_NAMES.get(k, k.__name__) for k in kinds)
        got = "null" if value is None else type(value).__name__
        raise DataError(str(path), f"expected {wanted}, got {got}", record=record, field=name)
    return value


def once(path: Path, seen: dict[_K, int], key: _K, at: int, name: str, *, line: bool = False) -> None:
    """Note that the id `key` (the field `name`) stands in record `at`; an id seen before is a
    DataError at its second record naming the first (`line`: records are 1-based lines)."""
    if key in seen:
        first = f"on line {seen[key]}" if line else f"in record {seen[key]}"
        raise DataError(str(path), f"duplicate {name} {key!r} (first {first})", record=at, field=name)
    seen[key] = at
