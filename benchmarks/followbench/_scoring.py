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

from ifsweep.benchmarks.followbench._rules import SOURCE_RULES_EN, format_rule_en, matches_template
from ifsweep.benchmarks.followbench._rules_zh import SOURCE_RULES_ZH, format_rule_zh

Route = Literal["template", "rule", "format_rule", "judge"]

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
