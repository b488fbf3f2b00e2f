"""Which FollowBench instances a rule decides and which a judge decides, and the rule verdicts.

The reference (gpt4_based_evaluation.py, rule_based_evaluation.py, pinned commit 6278f4c) routes by the
row's source: the 13 sources in RULE_SOURCES are checked by rule, as are format examples 22 and 30 in
English and format example 22 alone in Chinese (code_zh excludes only 22 from the judge and checks only 22
by rule, so its example 30 is judged); the example category is checked entirely by answer-template match;
every other instance goes to the judge. Both scoring modes route alike.
A rule decides the instance as a whole, so its one pass/fail is written to every one of the L
constraints: all() and mean() over them both equal the reference's single 0/1, which it adds to the
HSR and the SSR sums alike.
"""

from __future__ import annotations

from typing import Literal

from ifsweep.benchmarks.followbench._rules import (
    CUMULATIVE_EN,
    SOURCE_RULES_EN,
    format_checks_en,
    format_rule_en,
    matches_template,
)
from ifsweep.benchmarks.followbench._rules_zh import (
    CUMULATIVE_ZH,
    SOURCE_RULES_ZH,
    format_checks_zh,
    format_rule_zh,
)
from ifsweep.benchmarks.records import Instance

Route = Literal["template", "rule", "format_rule", "judge"]
GoldKind = Literal["per_constraint", "whole_answer"]

RULE_SOURCES = frozenset(SOURCE_RULES_EN)
FORMAT_RULE_IDS = {"en": frozenset({22, 30}), "zh": frozenset({22})}


def route(category: str, source: str, example_id: int, language: str) -> Route:
    """The same in both scoring modes. (An earlier code_zh also kept Chinese example 30 from the judge,
    so it went unscored; the pinned commit judges it.)"""
    if category == "example":
        return "template"
    if source in RULE_SOURCES:
        return "rule"
    if category == "format" and example_id in FORMAT_RULE_IDS[language]:
        return "format_rule"
    return "judge"


def rule_verdict(
    route_kind: Route, *, response: str, target: str, source: str, example_id: int, level: int, language: str
) -> bool:
    if route_kind == "template":
        return matches_template(response, target)
    if route_kind == "rule":
        rules = SOURCE_RULES_ZH if language == "zh" else SOURCE_RULES_EN
        return rules[source](response, target, level)
    if route_kind == "format_rule":
        check = format_rule_zh if language == "zh" else format_rule_en
        return check(example_id, response, level)
    raise ValueError(f"route {route_kind!r} is not decided by a rule")


def rule_gold(
    route_kind: Route, *, response: str, target: str, source: str, example_id: int, level: int, language: str
) -> tuple[GoldKind, tuple[bool, ...]] | None:
    """What the rule says of a rule-decided instance, for auditing a judge on it (docs/benchmarks/
    followbench.md, "Rule gold"): the five summarisation sources and the format rules are a conjunction
    of one check per level, so check k is constraint k's own gold ("per_constraint", L values); every
    other rule compares the whole answer with a target, one pass/fail that names no constraint
    ("whole_answer", one value). None for the template and judge routes. The conjunction of the
    per-constraint values is `rule_verdict`'s."""
    if route_kind == "rule":
        cumulative = (CUMULATIVE_ZH if language == "zh" else CUMULATIVE_EN).get(source)
        if cumulative is None:
            return "whole_answer", (
                rule_verdict(
                    route_kind,
                    response=response,
                    target=target,
                    source=source,
                    example_id=example_id,
                    level=level,
                    language=language,
                ),
            )
        return "per_constraint", tuple(check(response) for check in cumulative[:level])
    if route_kind == "format_rule":
        checks = format_checks_zh if language == "zh" else format_checks_en
        return "per_constraint", checks(example_id, response, level)
    return None


def instance_rule_gold(instance: Instance, response: str) -> tuple[GoldKind, tuple[bool, ...]] | None:
    """`rule_gold` of a loaded instance (BenchmarkBase.rule_gold calls it: the judge audit's rule gold)."""
    meta = instance.meta
    language, source, example_id = (
        str(meta.get("language", "en")),
        str(meta.get("source", "")),
        meta.get("example_id"),
    )
    if not isinstance(example_id, int) or instance.level is None:
        return None
    return rule_gold(
        route(instance.category or "", source, example_id, language),
        response=response,
        target=str(meta.get("target", "")),
        source=source,
        example_id=example_id,
        level=instance.level,
        language=language,
    )
