"""FollowBench's rule gold for the judge audit (issue 33, items 1 and 7): per-constraint gold from each
cumulative check, whose conjunction is the rule's verdict, and the counts on the pinned data (research
note judge-audit.md, section 1a: English 35 instances / 105 constraints per constraint, of them format
10 / 30, and 115 whole-answer instances; Chinese 30 / 90 and 100)."""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path

import pytest

from ifsweep import benchmarks
from ifsweep.benchmarks.followbench._benchmark import instance_route
from ifsweep.benchmarks.followbench._rules import CUMULATIVE_EN
from ifsweep.benchmarks.followbench._scoring import rule_gold, rule_verdict
from ifsweep.benchmarks.records import Instance

PINNED = Path(__file__).resolve().parents[1] / ".." / "shared" / "benchmarks" / "FollowBench"


def pinned(language: str) -> tuple[Instance, ...]:
    if not PINNED.is_dir():
        pytest.skip(f"the pinned FollowBench data is not at {PINNED}")
    return _loaded(language)


@functools.cache
def _loaded(language: str) -> tuple[Instance, ...]:
    """Each language's pinned instances, loaded once for this module's tests (they only read them; a
    load of the English release diffs every level's 5,000-token prompts)."""
    return tuple(benchmarks.get("followbench").load(PINNED, {"language": language}))


def gold_of(inst: Instance, response: str) -> tuple[str, tuple[bool, ...]] | None:
    return rule_gold(
        instance_route(inst),
        response=response,
        target=str(inst.meta["target"]),
        source=str(inst.meta["source"]),
        example_id=int(inst.meta["example_id"]),
        level=int(inst.level or 0),
        language=str(inst.meta["language"]),
    )


@pytest.mark.parametrize(
    ("language", "per_constraint", "constraints", "format_", "whole"),
    [("en", 35, 105, (10, 30), 115), ("zh", 30, 90, (5, 15), 100)],
)
def test_rule_gold_counts_on_the_pinned_data(
    language: str, per_constraint: int, constraints: int, format_: tuple[int, int], whole: int
) -> None:
    kinds: Counter[str] = Counter()
    units: Counter[str] = Counter()
    for inst in pinned(language):
        found = gold_of(inst, "")
        if found is None:
            continue
        kind, values = found
        key = f"{kind}:{inst.category}" if inst.category == "format" else kind
        kinds[key] += 1
        units[key] += len(values)
        assert len(values) == (inst.level if kind == "per_constraint" else 1)
    print(language, dict(kinds), dict(units))
    assert kinds["per_constraint"] + kinds["per_constraint:format"] == per_constraint
    assert units["per_constraint"] + units["per_constraint:format"] == constraints
    assert (kinds["per_constraint:format"], units["per_constraint:format"]) == format_
    assert kinds["whole_answer"] == whole


ANSWERS = (
    "",
    "we saw the bus in town today",
    "Those are suggestions",
    "1. First point here.\n\n2. Second point.\n\n3. Third point.\n\nThose are suggestions",
    "**1. Innovation:** We build things that matter every single day for all.",
)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_per_constraint_gold_is_each_check_and_its_conjunction_the_rule(language: str) -> None:
    seen = 0
    for inst in pinned(language):
        for answer in (*ANSWERS, str(inst.meta["target"])):
            found = gold_of(inst, answer)
            if found is None:
                continue
            passed = rule_verdict(
                instance_route(inst),
                response=answer,
                target=str(inst.meta["target"]),
                source=str(inst.meta["source"]),
                example_id=int(inst.meta["example_id"]),
                level=int(inst.level or 0),
                language=language,
            )
            assert all(found[1]) == passed, (inst.instance_id, answer)
            seen += 1
            source = str(inst.meta["source"])
            if language == "en" and source in CUMULATIVE_EN:
                assert found[1] == tuple(c(answer) for c in CUMULATIVE_EN[source][: inst.level or 0])
    assert seen > 500


def test_gigaword_checks_name_the_constraint_that_failed() -> None:
    """gigaword's five levels: 8 words, no punctuation, lowercase, no 'bus', the word 'in'."""
    checks = CUMULATIVE_EN["gigaword"]
    assert tuple(c("we saw the bus in town today ok") for c in checks) == (True, True, True, False, True)
    assert tuple(c("We saw a car in town today, ok") for c in checks) == (True, False, False, True, True)
