"""Reading and validating FollowBench's six JSON arrays into one Instance per level-1..5 row.

A file holds groups of consecutive rows sharing an example_id: levels 0..5 (the example category has
no level 0). Level 0 is the base instruction, never generated; it opens each judge prompt's evolution
path. Every row is checked before any instance is yielded, so a bad file fails as a whole.
"""

from __future__ import annotations

import ast
import difflib
import itertools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ifsweep.benchmarks._files import read_json_array
from ifsweep.benchmarks.followbench._prompts import generation_messages
from ifsweep.benchmarks.records import Constraint, DataError, Instance

BENCHMARK = "followbench"
CATEGORIES = ("content", "situation", "style", "format", "example", "mixed")
LANGUAGES = {"en": "data", "zh": "data_zh"}
# The types a mixed row may list, one per added constraint ("format, content, style").
MIXED_PARTS = frozenset({"content", "situation", "style", "format"})

_REQUIRED: dict[str, type] = {
    "example_id": int,
    "category": str,
    "source": str,
    "level": int,
    "instruction": str,
    "target": str,
}
_OPTIONAL: dict[str, type] = {"answer": str}


def file_name(category: str) -> str:
    return f"{category}_constraints.json"


@dataclass(frozen=True, slots=True)
class Row:
    example_id: int
    category: str
    source: str
    level: int
    instruction: str
    target: str
    answer: str | None


def validate_options(options: Mapping[str, Any]) -> None:
    audit = options.get("audit_rule_items", False)
    if not isinstance(audit, bool):
        raise ValueError(f"option 'audit_rule_items' must be true or false, got {audit!r}")
    language = options.get("language", "en")
    if language not in LANGUAGES:
        raise ValueError(f"option 'language' must be one of {sorted(LANGUAGES)}, got {language!r}")
    if "categories" in options:
        categories = options["categories"]
        if not isinstance(categories, list | tuple) or not categories:
            raise ValueError(f"option 'categories' must be a non-empty list, got {categories!r}")
        for category in categories:
            if category not in CATEGORIES:
                raise ValueError(
                    f"option 'categories': unknown category {category!r}; known: {', '.join(CATEGORIES)}"
                )
        if len(set(categories)) != len(categories):
            raise ValueError(f"option 'categories' lists a category twice: {categories!r}")


def _is_language_dir(data_dir: Path) -> bool:
    return any(data_dir.glob("*_constraints.json"))


def language_of(data_dir: Path | None, options: Mapping[str, Any]) -> str:
    """The `language` option, else Chinese for a language folder whose name ends in _zh, else English."""
    if "language" in options:
        return str(options["language"])
    if data_dir is not None and data_dir.name.endswith("_zh") and _is_language_dir(data_dir):
        return "zh"
    return "en"


def report_name(language: str) -> str:
    """English keeps the plain name; another language reports as its own benchmark, `followbench-zh`:
    the two share example ids, so their instances must never meet in one set of rows."""
    return BENCHMARK if language == "en" else f"{BENCHMARK}-{language}"


def resolve_language_dir(data_dir: Path, options: Mapping[str, Any]) -> tuple[Path, str]:
    """`data_dir` is either a language folder (holding *_constraints.json) or the release root holding
    data/ and data_zh/. A language folder named data_zh means Chinese unless `language` says otherwise."""
    language = language_of(data_dir, options)
    if _is_language_dir(data_dir):
        return data_dir, language
    return data_dir / LANGUAGES[language], language


def _row(path: Path, index: int, record: Any) -> Row:
    where = str(path)
    if not isinstance(record, dict):
        raise DataError(where, f"expected an object, got {type(record).__name__}", record=index)
    for name in _REQUIRED:
        if name not in record:
            raise DataError(where, "missing", record=index, field=name)
    for name, value in record.items():
        kind = _REQUIRED.get(name) or _OPTIONAL.get(name)
        if kind is None:
            raise DataError(where, "unknown field", record=index, field=name)
        # bool is an int subclass; a true/false level or id is a schema error, not 1/0.
        if not isinstance(value, kind) or isinstance(value, bool):
            raise DataError(
                where, f"expected {kind.__name__}, got {type(value).__name__}", record=index, field=name
            )
    level = record["level"]
    if not 0 <= level <= 5:
        raise DataError(where, f"level must be 0..5, got {level}", record=index, field="level")
    if level > 0 and not record["instruction"]:
        raise DataError(where, "empty instruction on a level above 0", record=index, field="instruction")
    return Row(
        example_id=record["example_id"],
        category=record["category"],
        source=record["source"],
        level=level,
        instruction=record["instruction"],
        target=record["target"],
        answer=record.get("answer"),
    )


def constraint_types(path: Path, index: int, category: str, row: Row) -> tuple[str, ...]:
    """Each added constraint's type: the file's category, or for mixed rows the row's own list."""
    if category != "mixed":
        if row.category != category:
            raise DataError(
                str(path),
                f"expected category {category!r}, got {row.category!r}",
                record=index,
                field="category",
            )
        return (category,) * row.level
    if row.level == 0:
        if row.category != "mixed":
            raise DataError(
                str(path),
                f"expected 'mixed' on level 0, got {row.category!r}",
                record=index,
                field="category",
            )
        return ()
    parts = tuple(part.strip() for part in row.category.split(","))
    if len(parts) != row.level or not set(parts) <= MIXED_PARTS:
        raise DataError(
            str(path),
            f"a level-{row.level} mixed row must list {row.level} constraint types from "
            f"{sorted(MIXED_PARTS)}, got {row.category!r}",
            record=index,
            field="category",
        )
    return parts


def _check_target(path: Path, index: int, category: str, row: Row) -> None:
    if row.level == 0:
        return
    if category == "example" and "{answer}" not in row.target:
        raise DataError(
            str(path), "an example-category target needs an {answer} slot", record=index, field="target"
        )
    if category != "example" and row.source == "CONLL2003":
        try:
            listed = ast.literal_eval(row.target)
        except (ValueError, SyntaxError) as exc:
            raise DataError(
                str(path),
                f"CONLL2003 target is not a Python list literal: {exc}",
                record=index,
                field="target",
            ) from None
        if not isinstance(listed, list | tuple | set):
            raise DataError(
                str(path), "CONLL2003 target must be a list of entities", record=index, field="target"
            )


def read_category(language_dir: Path, category: str, language: str) -> list[Instance]:
    """Every evaluated instance of one category file, after validating the whole file."""
    path = language_dir / file_name(category)
    records = read_json_array(path)
    first_level = 1 if category == "example" else 0
    instances: list[Instance] = []
    seen: set[int] = set()
    path_so_far: list[str] = []
    # What each level of the open group added, kept as the group grows: each diff is made once, not
    # again for every later level (the example category's diffs of 5,000-token prompts took minutes).
    added: list[str] = []
    for index, record in enumerate(records):
        row = _row(path, index, record)
        types = constraint_types(path, index, category, row)
        _check_target(path, index, category, row)
        starts_group = row.level == first_level
        if starts_group:
            _check_complete(path, index - 1, first_level, path_so_far)
            if row.example_id in seen:
                raise DataError(
                    str(path),
                    f"example_id {row.example_id} appears in two groups",
                    record=index,
                    field="example_id",
                )
            seen.add(row.example_id)
            path_so_far, added = [], []
        else:
            expected = first_level + len(path_so_far)
            if index == 0 or row.level != expected or records[index - 1].get("example_id") != row.example_id:
                raise DataError(
                    str(path),
                    f"rows of example {row.example_id} must run through levels {first_level}..5 in order; "
                    f"got level {row.level}",
                    record=index,
                    field="level",
                )
        path_so_far.append(row.instruction)
        if row.level > 0:
            added.append(added_text(path_so_far[-2], path_so_far[-1]) if len(path_so_far) > 1 else "")
            evolution = tuple(path_so_far) if first_level == 0 else ()
            instances.append(_instance(category, language, row, types, evolution, tuple(added)))
    _check_complete(path, len(records) - 1, first_level, path_so_far)
    return instances


def _check_complete(path: Path, last_index: int, first_level: int, group: list[str]) -> None:
    if group and first_level + len(group) - 1 != 5:
        reached = first_level + len(group) - 1
        raise DataError(
            str(path), f"group stops at level {reached}, before level 5", record=last_index, field="level"
        )


_SHORTEST = 4  # tokens (words, or characters of Chinese) of an added piece that is not a rewording
_TOKEN = re.compile(r"[A-Za-z0-9_]+|\s+|.", re.S)  # words of Latin script; one character else (Chinese)


# Up to this many tokens in both, a pair is diffed token by token alone (a tenth of a second at the
# most): the short instructions of every category keep the texts a whole token diff finds.
_WHOLE_DIFF_TOKENS = 2000


def added_text(before: str, after: str, whole: int = _WHOLE_DIFF_TOKENS) -> str:
    """The text a level added to the instruction of the level before it (the data holds each level's
    whole instruction, not the constraint alone): the pieces AFTER inserts or rewrites, joined by " … ";
    constraint i was added at level i + 1, and a level with no instruction before it added "". `whole`:
    see `_matching_blocks` (perf/load_perf.py passes one no pair reaches, for the token diff alone)."""
    old, new = _TOKEN.findall(before), _TOKEN.findall(after)
    pieces, j = [], 0
    for _, bj, k in _matching_blocks(old, new, whole):  # what lies between blocks was inserted or rewritten
        if bj > j:
            pieces.append(new[j:bj])
        j = bj + k
    # A rewording swaps a word here and there: the constraint is in the longer pieces, when any.
    long = [p for p in pieces if sum(not t.isspace() for t in p) >= _SHORTEST]
    texts = ("".join(p).strip() for p in long or pieces)
    return " … ".join(t for t in texts if t)


def _matching_blocks(
    old: list[str], new: list[str], whole: int = _WHOLE_DIFF_TOKENS
) -> list[tuple[int, int, int]]:
    """The blocks of tokens `old` and `new` share, in order, ending with (len(old), len(new), 0).
    Whole lines are matched first and tokens only within the lines between them: a diff of tokens
    alone costs about the product of the two lengths in tokens as common as a space, which at the
    5,000 to 8,000 tokens of the example category's prompts took seconds a pair (70 s for the English
    release), where the lines that changed are a few hundred characters."""
    if len(old) + len(new) <= whole:
        return [
            (a, b, n)
            for a, b, n in difflib.SequenceMatcher(None, old, new, autojunk=False).get_matching_blocks()
        ]
    old_starts, new_starts = _line_starts(old), _line_starts(new)
    old_lines = ["".join(old[a:b]) for a, b in itertools.pairwise(old_starts)]
    new_lines = ["".join(new[a:b]) for a, b in itertools.pairwise(new_starts)]
    blocks: list[tuple[int, int, int]] = []
    li = lj = 0
    for bi, bj, k in difflib.SequenceMatcher(
        None, old_lines, new_lines, autojunk=False
    ).get_matching_blocks():
        a0, a1, b0, b1 = old_starts[li], old_starts[bi], new_starts[lj], new_starts[bj]
        if a1 > a0 and b1 > b0:  # lines rewritten: their tokens diffed alone
            inner = difflib.SequenceMatcher(None, old[a0:a1], new[b0:b1], autojunk=False)
            blocks += [(a0 + i, b0 + j, n) for i, j, n in inner.get_matching_blocks() if n]
        if k:
            blocks.append((a1, b1, old_starts[bi + k] - a1))
        li, lj = bi + k, bj + k
    merged: list[tuple[int, int, int]] = []
    for i, j, n in blocks:  # a block ending where the next one starts (in both) is one block
        if merged and merged[-1][0] + merged[-1][2] == i and merged[-1][1] + merged[-1][2] == j:
            merged[-1] = (merged[-1][0], merged[-1][1], merged[-1][2] + n)
        else:
            merged.append((i, j, n))
    return [*merged, (len(old), len(new), 0)]


def _line_starts(tokens: list[str]) -> list[int]:
    """The token index each line starts at, and len(tokens): a line ends with a whitespace token that
    holds a newline (a whitespace token is a whole run, so a line never splits a word)."""
    starts = [0]
    starts += [i + 1 for i, t in enumerate(tokens) if "\n" in t and i + 1 < len(tokens)]
    return [*starts, len(tokens)] if tokens else [0]


def _instance(
    category: str,
    language: str,
    row: Row,
    types: tuple[str, ...],
    evolution: tuple[str, ...],
    added: tuple[str, ...] = (),
) -> Instance:
    return Instance(
        benchmark=report_name(language),
        instance_id=f"{category}:{row.example_id}:{row.level}",
        group_id=f"{category}:{row.example_id}",
        messages=generation_messages(row.instruction),
        constraints=tuple(
            Constraint(idx=i, type=kind, text=added[i] if i < len(added) else "")
            for i, kind in enumerate(types)
        ),
        level=row.level,
        category=category,
        split=None,
        meta={
            "evolution_path": evolution,
            "source": row.source,
            "target": row.target,
            "answer": row.answer,
            "example_id": row.example_id,
            "language": language,
        },
    )


def load(data_dir: Path, options: Mapping[str, Any]) -> Iterator[Instance]:
    validate_options(options)
    language_dir, language = resolve_language_dir(data_dir, options)
    wanted = options.get("categories", CATEGORIES)
    for category in CATEGORIES:
        if category in wanted:
            yield from read_category(language_dir, category, language)
