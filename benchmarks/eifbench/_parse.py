"""Deciding 是 / 否 from an EIFBench judge reply (`分析：…\\n答案：是/否`). String inspection only."""

from __future__ import annotations

import re

from ifsweep.benchmarks.records import ScoringMode, TurnOutcome

# The verdict line, tolerant of markdown bold ("**答案**：是"), spaces and a half-width colon.
_VERDICT = re.compile(r"答案[\s*]*[：:][\s*]*(是|否)")
_REFERENCE_VERDICT = re.compile(r"答案：是|答案：否")


def decide_paper(reply: str) -> bool | None:
    """The last `答案：是` / `答案：否` decides (a judge may quote the format before answering); a reply
    without one is unclear (None)."""
    found: list[str] = _VERDICT.findall(reply)
    if not found:
        return None
    return found[-1] == "是"


def decide_reference(reply: str) -> bool:
    """6_evaluation.py's rule: exactly one exact `答案：是` / `答案：否` decides; otherwise the reply counts
    as 是 only when the character 是 occurs in it and 否 does not. It never leaves a point undecided."""
    found: list[str] = _REFERENCE_VERDICT.findall(reply)
    if len(found) == 1:
        return "是" in found[0]
    return "是" in reply and "否" not in reply


def parse_turn(reply: str, mode: ScoringMode) -> TurnOutcome:
    if mode == "paper":
        verdict = decide_paper(reply)
        return TurnOutcome(values=None if verdict is None else (verdict,))
    return TurnOutcome(values=(decide_reference(reply),))
