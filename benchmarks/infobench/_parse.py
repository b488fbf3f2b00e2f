"""Deciding YES / NO from an InFoBench judge reply, in the paper's sense and as the reference code does.

Both are plain string inspection: a reply is data, never evaluated. Paper mode first drops the lines
the judge copied from its prompt (benchmarks/_echo.py): SYS_MSG's rule lines begin "- YES: Select 'YES'"
and "- NO: Opt for 'NO'", which the first-word rule would otherwise read as verdicts.
"""

from __future__ import annotations

import re

from ifsweep.benchmarks._echo import NO_PROMPT, PromptText, own_lines
from ifsweep.benchmarks.records import ScoringMode, TurnOutcome

# Markup a judge puts before its verdict ("**YES**", "> No.", "- Yes", quotes); stripped before looking
# at the first word.
_LEADING_MARKUP = " \t\r\n*_#`>\"'“‘-[(:"
_FIRST_WORD = re.compile(r"(yes|no)\b", re.IGNORECASE)
# The system message asks for YES or NO in capitals; lower-case "no" inside an explanation ("there is
# no second sentence") is prose, not a verdict.
_VERDICT_WORD = re.compile(r"\b(YES|NO)\b")


def decide_paper(reply: str, prompt: PromptText = NO_PROMPT) -> bool | None:
    """A clear verdict from the lines not copied from the prompt: they start with the word yes/no (any
    case, after markup), or else name exactly one of the capitalised words YES / NO. Anything else is
    unclear (None)."""
    reply = "\n".join(own_lines(reply, prompt))
    head = reply.lstrip(_LEADING_MARKUP)
    first = _FIRST_WORD.match(head)
    if first is not None:
        return first.group(1).lower() == "yes"
    words = set(_VERDICT_WORD.findall(reply))
    if words == {"YES"}:
        return True
    if words == {"NO"}:
        return False
    return None


def decide_reference(reply: str) -> bool | None:
    """evaluation.py's rule, quirks included: a reply whose lower-cased text starts with "yes" / "no"
    decides (so "Not quite", "None" and "NOTE: YES" count as NO); otherwise the substrings "YES" / "NO"
    decide when exactly one occurs (so "Answer: YES (see NOTE)" is unclear). None when neither decides."""
    low = reply.lower()
    if low.startswith("yes"):
        return True
    if low.startswith("no"):
        return False
    has_yes, has_no = "YES" in reply, "NO" in reply
    if has_yes != has_no:
        return has_yes
    return None


def parse_turn(reply: str, mode: ScoringMode, prompt: PromptText = NO_PROMPT) -> TurnOutcome:
    if mode == "paper":
        verdict = decide_paper(reply, prompt)
        # Unclear: no value, so the runner asks again and then records the question as unparsed; the
        # conversation still goes on to the next question.
        return TurnOutcome(values=None if verdict is None else (verdict,))
    verdict = decide_reference(reply)
    if verdict is None:
        # The reference stores None for this question, counts it as not satisfied in its true/false
        # ratio, and asks none of the remaining questions (they are absent from its `eval` list).
        return TurnOutcome(values=(False,), stop=True)
    return TurnOutcome(values=(verdict,))
