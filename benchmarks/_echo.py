"""Telling a judge's own answer from text it copied out of the prompt.

A weak judge often repeats its prompt: the format rule ("...only output a Python LIST with 1 element
('YES' or 'NO')..."), a template's example verdicts, the `答案：是/否` line, the re-ask's quoted rule.
Those lines hold the very words a parser looks for, so every paper-mode parser first drops the reply
lines that the prompt already holds (`own_lines`) and decides only from what is left.

Copies are looked for only in what the benchmark itself wrote into the prompt (`template_prompt`): its
template texts and the re-ask's follow-up, never the instance's data or the answer under judgment. An
answer may well hold the verdict line ("答案：是", a line "YES"); the judge's honest verdict is then the
same line, and must not be dropped as a copy of the answer (issue 21.6: only verdicts that differed
from the answer's line survived).

A reply line is an echo when, with its whitespace collapsed, it is a whole line of the prompt, or a piece
of the prompt long enough not to be a verdict by chance (`MIN_ECHO_WEIGHT`; CJK characters weigh 2).
Short answers ("YES", "['NO']", "答案：否") are never echoes unless a prompt line is exactly that text.
Inside a line the judge wrote itself, such pieces of the prompt are cut out too (`without_copies`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ifsweep.benchmarks.records import JudgeTask, reask_message

__all__ = [
    "MIN_ECHO_WEIGHT",
    "NO_PROMPT",
    "PromptText",
    "is_echo",
    "own_lines",
    "template_prompt",
    "without_copies",
]

MIN_ECHO_WEIGHT = 16
# A template's field ("{response}", "{level}"): what the instance's data or the answer fills in.
_FIELD = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")
# Markup a judge wraps a copied line in (a quote block, a bullet, bold, code); also stripped for the test.
_WRAP = " >*-#`\"'“”‘’"


def _norm(line: str) -> str:
    return " ".join(line.split())


def _weight(text: str) -> int:
    return sum(2 if ord(ch) >= 0x2E80 else 1 for ch in text)


@dataclass(frozen=True, slots=True)
class PromptText:
    """Every text the judge was sent, folded for echo tests: its lines, and all of it."""

    lines: frozenset[str]
    text: str

    @classmethod
    def of(cls, texts: Iterable[str]) -> PromptText:
        lines = [_norm(line) for text in texts for line in text.splitlines()]
        kept = [line for line in lines if line]
        return cls(frozenset(kept), "\n".join(kept))

    def with_(self, other: PromptText) -> PromptText:
        return PromptText(self.lines | other.lines, f"{self.text}\n{other.text}")


NO_PROMPT = PromptText(frozenset(), "")  # for reading a reply on its own (tests, imports of bare replies)


def template_prompt(task: JudgeTask, templates: Sequence[str]) -> PromptText:
    """What the benchmark itself wrote into `task`'s prompt: its `templates` (every text its judge
    prompts are made of, system message included), each cut at its `{fields}`, and each turn's re-ask
    follow-up (runner/engine/pipeline.py sends it when a reply is unparsed; its rule is template text)."""
    follow_ups = PromptText.of(reask_message(turn).content for turn in task.turns)
    return _template_text(tuple(templates)).with_(follow_ups)


@functools.lru_cache(maxsize=64)
def _template_text(templates: tuple[str, ...]) -> PromptText:
    return PromptText.of(piece for template in templates for piece in _FIELD.split(template))


def is_echo(line: str, prompt: PromptText) -> bool:
    for candidate in {_norm(line), _norm(line).strip(_WRAP)}:
        if not candidate:
            continue
        if candidate in prompt.lines:
            return True
        if _weight(candidate) >= MIN_ECHO_WEIGHT and candidate in prompt.text:
            return True
    return False


def own_lines(reply: str, prompt: PromptText) -> list[str]:
    """The reply's own text, line by line (whitespace collapsed), in order: lines copied from the prompt
    are dropped, and so are copied pieces inside a line ("Based on the rules, YES: Select 'YES' if the
    generated text..." keeps "Based on the rules,"), so a verdict word the judge quoted is never read."""
    out = []
    for line in reply.splitlines():
        if not line.strip() or is_echo(line, prompt):
            continue
        own = without_copies(_norm(line), prompt.text) if prompt.text else line.strip()
        if own.strip(_WRAP):
            out.append(own)
    return out


def without_copies(line: str, text: str) -> str:
    """`line` less every piece of `text` in it that weighs MIN_ECHO_WEIGHT or more (longest first from
    the left); what is left is joined with single spaces."""
    kept: list[str] = []
    i, n = 0, len(line)
    while i < n:
        j, weight = i, 0
        while j < n and weight < MIN_ECHO_WEIGHT:
            weight += _weight(line[j])
            j += 1
        if weight >= MIN_ECHO_WEIGHT and line[i:j] in text:
            while j < n and line[i : j + 1] in text:
                j += 1
            kept.append(" ")
            i = j
        else:
            kept.append(line[i])
            i += 1
    return _norm("".join(kept))
