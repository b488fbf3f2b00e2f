"""Reading the judge's reply: `criterion<TAB>score` lines joined by blank lines, one per checklist item.

Two parsers. `paper_values` ignores scored lines copied from the prompt (the template's examples end in
`criterion<TAB>0|1` lines of their own; benchmarks/_echo.py), maps each other scored line to its
checklist item (by its text, or by position when the reply has exactly one scored line per item and no
line's text points elsewhere), keeps zeros, and gives up (None) rather than guess. `reference_parse`
does what code/evalaute.py of CFBench does, including its last-resort fallback, which keeps only the 1s.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

from ifsweep.benchmarks._echo import NO_PROMPT, PromptText, is_echo
from ifsweep.benchmarks.records import Instance

__all__ = ["ReferenceParse", "paper_values", "reference_parse", "reference_values"]

ParsingStatus = Literal["1", "0", "-1"]

_NUMBERED = re.compile(r"^\s*(?:[-*•]+|\(?\d+[.、)）]|[（(]\d+[)）])\s*")
_UNTABBED = re.compile(r"^(?P<text>.*\S)(?:\s+|\s*[:：]\s*)\**(?P<score>[01])(?:\.0+)?\**$")
_SCORE = re.compile(r"^([01])(?:\.0+)?$")


@dataclass(frozen=True, slots=True)
class ReferenceParse:
    """What the reference stores for a reply: `judge_score` (as numbers) and `judge_parsing`:
    "1" strict parse, "0" fallback kept some 1s, "-1" nothing usable (scored as a single 0)."""

    scores: tuple[float, ...]
    parsing: ParsingStatus


def _key(text: str) -> str:
    """Criterion text with width, case, whitespace, punctuation and control characters folded away."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in folded if unicodedata.category(ch)[0] not in "PZC")


def _keys(text: str) -> set[str]:
    keys = {_key(text), _key(_NUMBERED.sub("", text, count=1))}
    keys.discard("")
    return keys


@dataclass(frozen=True, slots=True)
class _Scored:
    keys: frozenset[str]  # every key the line's text could stand for (whole block, last line, unnumbered)
    value: bool


def _score_token(token: str) -> bool | Literal["bad"] | None:
    token = token.strip().strip("*").strip()
    match = _SCORE.match(token)
    if match:
        return match.group(1) == "1"
    try:
        float(token)
    except ValueError:
        return None  # not a score at all: the tab belongs to ordinary text
    return "bad"  # a number other than 0 or 1: the judge broke the scale


def _scored_lines(reply: str, item_keys: set[str], prompt: PromptText) -> list[_Scored] | None:
    """Every scored line not copied from the prompt, with the text lines just above it (a criterion may
    span lines); None when a line carries a score outside {0, 1}."""
    out: list[_Scored] = []
    pending: list[str] = []
    for raw in reply.splitlines():
        line = raw.rstrip()
        if not line.strip():
            pending = []
            continue
        text: str | None = None
        value: bool | None = None
        if "\t" in line:
            head, _, tail = line.rpartition("\t")
            token = _score_token(tail)
            if token == "bad":
                return None
            if token is not None:
                text, value = head, token
        if text is None:
            match = _UNTABBED.match(line)
            # Without a tab the score is only trusted when the text is one of the items word for word.
            if match and _keys(match.group("text")) & item_keys:
                text, value = match.group("text"), match.group("score") == "1"
        if text is None or value is None:
            pending.append(line)
            continue
        if is_echo(line, prompt):
            pending = []
            continue
        keys = _keys(text) | _keys("\n".join([*pending, text]))
        out.append(_Scored(frozenset(keys), value))
        pending = []
    return out


def paper_values(instance: Instance, reply: str, prompt: PromptText = NO_PROMPT) -> tuple[bool, ...] | None:
    """One value per checklist item in order, or None when the reply cannot be mapped to every item."""
    item_keys = [_key(c.text) for c in instance.constraints]
    lines = _scored_lines(reply, set(item_keys), prompt)
    if lines is None or not item_keys:
        return None
    matches = [[i for i, key in enumerate(item_keys) if key in line.keys] for line in lines]
    by_text: dict[int, bool] = {}
    for line, candidates in zip(lines, matches, strict=True):
        free = [i for i in candidates if i not in by_text]
        if candidates and not free:
            return None  # the same item scored twice: no way to know which line is meant
        if free:
            by_text[free[0]] = line.value
    if len(by_text) == len(item_keys):
        return tuple(by_text[i] for i in range(len(item_keys)))
    # By position only when the count is exact and no line's own text names a different item.
    if len(lines) == len(item_keys) and all(
        not candidates or pos in candidates for pos, candidates in enumerate(matches)
    ):
        return tuple(line.value for line in lines)
    return None


def _strict(criteria: list[str], reply: str) -> tuple[float, ...] | None:
    parts = reply.split("\n\n")
    if len(parts) != len(criteria):
        return None
    scores = []
    for part, criterion in zip(parts, criteria, strict=True):
        fields = part.split("\t")
        if len(fields) != 2 or fields[0] != criterion:
            return None
        try:
            score = float(fields[1])
        except ValueError:
            return None
        if score not in (0, 1):
            return None
        scores.append(score)
    return tuple(scores) or None


def _fallback(reply: str) -> tuple[float, ...]:
    kept = []
    for line in reply.split("\n"):
        fields = line.split("\t")
        if len(fields) != 2:
            continue
        try:
            score = float(fields[1])
        except ValueError:
            continue  # the reference would stop with an uncaught ValueError here
        # The reference's test `float(score) and ...` is false for 0, so zeros are dropped.
        if score and score in (0, 1):
            kept.append(score)
    return tuple(kept)


def reference_parse(instance: Instance, reply: str) -> ReferenceParse:
    """The reference's `_get_judge_scores`, then (for a reply it cannot read strictly) its
    `_get_judge_scores_guaranteed`; the reference re-asks the judge up to 10 times in between."""
    strict = _strict([c.text for c in instance.constraints], reply)
    if strict is not None:
        return ReferenceParse(strict, "1")
    kept = _fallback(reply)
    if kept:
        return ReferenceParse(kept, "0")
    return ReferenceParse((0.0,), "-1")


def reference_values(instance: Instance, reply: str) -> tuple[bool, ...]:
    """Per-item values that give the reference's item metrics: a fallback parse, which no longer knows
    which item a score was for, counts as all satisfied when it kept a 1 and all failed otherwise."""
    parsed = reference_parse(instance, reply)
    n = len(instance.constraints)
    if parsed.parsing == "1":
        return tuple(score == 1 for score in parsed.scores)
    return (parsed.parsing == "0",) * n
