"""Deciding 是 / 否 from an EIFBench judge reply (`分析：…\\n答案：是/否`). String inspection only.

The template's own format line is `答案：是/否`, so a judge that copies it holds a `答案：是`. Paper mode
drops lines copied from the prompt (benchmarks/_echo.py) and never reads a verdict followed by a choice
mark (`是/否`, `是或否`)."""

from __future__ import annotations

import re

from ifsweep.benchmarks._echo import NO_PROMPT, PromptText, own_lines
from ifsweep.benchmarks.records import ScoringMode, TurnOutcome

# The verdict, tolerant of markdown bold ("**答案**：是"), spaces and a half-width colon; not one that
# offers a choice ("答案：是/否", "答案：是或否").
_VERDICT = re.compile(r"答案[\s*]*[：:][\s*]*(是|否)(?![\s*]*(?:[/／|、]|或|还是))")
_REFERENCE_VERDICT = re.compile(r"答案：是|答案：否")


def decide_paper(reply: str, prompt: PromptText = NO_PROMPT) -> bool | None:
    """The `答案：是` / `答案：否` of the lines not copied from the prompt decides when every one there
    says the same; a reply without one, or with both, is unclear (None)."""
    found = {v for line in own_lines(reply, prompt) for v in _VERDICT.findall(line)}
    if len(found) != 1:
        return None
    return found == {"是"}


def decide_reference(reply: str) -> bool:
    """6_evaluation.py's rule: exactly one exact `答案：是` / `答案：否` decides; otherwise the reply counts
    as 是 only when the character 是 occurs in it and 否 does not. It never leaves a point undecided."""
    found: list[str] = _REFERENCE_VERDICT.findall(reply)
    if len(found) == 1:
        return "是" in found[0]
    return "是" in reply and "否" not in reply


def parse_turn(reply: str, mode: ScoringMode, prompt: PromptText = NO_PROMPT) -> TurnOutcome:
    if mode == "paper":
        verdict = decide_paper(reply, prompt)
        return TurnOutcome(values=None if verdict is None else (verdict,))
    return TurnOutcome(values=(decide_reference(reply),))
