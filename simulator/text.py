"""What the simulator says: deterministic filler answers, and the verdicts of a simulated judge (whose
reply shapes come from the benchmarks: simulator/judges.py).

Everything here is a pure function of the request (model, messages, max_tokens) and the seed, so a test
can predict any answer and a resumed run sees the same text it would have seen the first time.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

QUALITY_MIN = 0.35
QUALITY_MAX = 0.95
ANSWER_MIN_TOKENS = 30
ANSWER_MAX_TOKENS = 300
REFUSAL_TEXT = "I can't help with that."

_QUALITY_RE = re.compile(r"\(sim-quality (\d+(?:\.\d+)?)\)")

# Our own sentences: answers only need to read like prose and have a predictable length. {t} is a word
# taken from the prompt, so that different prompts read differently.
_SENTENCES = (
    "The request about {t} is handled step by step below.",
    "First, it helps to state the goal of {t} in a single line.",
    "A short example makes the idea of {t} concrete.",
    "Each constraint in the instruction is addressed in the order given.",
    "The tone stays neutral and the wording stays plain.",
    "Where a number was asked for, the answer gives exactly that number.",
    "Some readers will want more detail on {t}, so a brief note follows.",
    "The main risk is to drift away from the question, which this answer avoids.",
    "In practice, {t} works best when the steps are small and checked often.",
    "A summary at the end repeats the key point in one sentence.",
    "The format follows the layout that the instruction describes.",
    "Nothing here depends on facts that cannot be checked.",
    "Two options are worth comparing before choosing one.",
    "The second option is simpler, but the first one scales better.",
    "It is worth noting the limits of this approach to {t}.",
    "Each paragraph covers one idea and stays on topic.",
    "This keeps the answer short while still being useful.",
    "A list would also work, but prose reads better here.",
    "The last step is to review the result against the original request.",
    "With that, the answer about {t} is complete.",
)
_OPENERS = ("Here is a response.", "Sure.", "Below is an answer.", "Certainly, here it is.", "Good question.")
_WORD_RE = re.compile(r"[A-Za-z]{4,}")


def _topic(messages: Sequence[Mapping[str, Any]]) -> str:
    """The longest plain word near the start of the last message, as a cheap stand-in for its subject."""
    text = message_text(messages[-1])[:300] if messages else ""
    words = _WORD_RE.findall(text)
    return max(words, key=len).lower() if words else "this task"


@dataclass(frozen=True, slots=True)
class Reply:
    text: str
    finish_reason: str  # "stop" or "length"


def count_tokens(text: str) -> int:
    """A cheap stand-in for a tokenizer, never zero: four ASCII characters per token, and a token for
    every other character (a CJK character is one or two cl100k tokens; Chinese prompts must weigh
    what they do against the prefix cache's 1,024-token threshold)."""
    if text.isascii():
        return len(text) // 4 + 1
    wide = sum(1 for ch in text if ord(ch) > 127)
    return (len(text) - wide) // 4 + wide + 1


def message_text(message: Mapping[str, Any]) -> str:
    """The text of one chat message; list-of-parts content contributes its text parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def prompt_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    return sum(count_tokens(message_text(m)) for m in messages)


def _digest(*parts: bytes) -> int:
    h = hashlib.blake2b(digest_size=8)
    for part in parts:
        h.update(part)
        h.update(b"\x00")
    return int.from_bytes(h.digest(), "big")


def unit(*parts: bytes) -> float:
    """A hash mapped to [0, 1)."""
    return _digest(*parts) / 2.0**64


_unit = unit


def model_quality(model: str) -> float:
    """Each simulated model's fixed quality in [0.35, 0.95], from its name alone."""
    q = QUALITY_MIN + (QUALITY_MAX - QUALITY_MIN) * unit(b"quality", model.encode())
    return round(q, 2)


def read_quality(text: str) -> float:
    """The `(sim-quality X)` a simulated answer carries (the last one), or 0.5 when there is none."""
    found = _QUALITY_RE.findall(text)
    if not found:
        return 0.5
    return min(1.0, max(0.0, float(found[-1])))


def decide(judged: str, key: str, seed: int, quality: float) -> bool:
    """One judge decision: YES with probability `quality`, fixed by (judged text, decision key, seed)."""
    return unit(b"decide", str(seed).encode(), key.encode(), judged.encode()) < quality


def echo_reply(prompt: str, seed: int) -> str:
    """What an echoing judge says: part of its last message copied back (the whole of it, its last line,
    its last three lines, or one line), picked by a hash of the message, so a resend picks the same."""
    lines = [line for line in prompt.splitlines() if line.strip()] or [prompt]
    pick = _digest(b"echo-form", str(seed).encode(), prompt.encode())
    form = pick % 4
    if form == 0:
        return prompt
    if form == 1:
        return lines[-1]
    if form == 2:
        return "\n".join(lines[-3:])
    return lines[(pick >> 2) % len(lines)]


def cut_to_tokens(text: str, max_tokens: int) -> Reply:
    """`text` unchanged when it fits in max_tokens, else cut at a word boundary with finish_reason length."""
    if count_tokens(text) <= max_tokens:
        return Reply(text, "stop")
    if text.isascii():
        limit = max(0, 4 * max_tokens - 1)  # largest length whose count_tokens is max_tokens
    else:  # the longest prefix that fits (count_tokens grows with the length)
        lo, hi = 0, len(text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if count_tokens(text[:mid]) <= max_tokens else (lo, mid - 1)
        limit = lo
    cut = text[:limit]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return Reply(cut, "length")


def filler_answer(model: str, messages: Sequence[Mapping[str, Any]], seed: int) -> str:
    """Plausible prose of 30-300 tokens after a `(sim-quality q)` line; depends on model and prompt."""
    rng = random.Random(_digest(b"answer", str(seed).encode(), model.encode(), orjson.dumps(messages)))
    topic = _topic(messages)
    quality_line = f"(sim-quality {model_quality(model):.2f})"
    # Characters left for prose so that the whole answer lands on the drawn token count.
    budget = 4 * (rng.randint(ANSWER_MIN_TOKENS, ANSWER_MAX_TOKENS) - 1) - len(quality_line) - 1
    parts = [rng.choice(_OPENERS)]
    used = len(parts[0])
    floor = 4 * ANSWER_MIN_TOKENS - len(quality_line)
    in_paragraph = 1
    previous = -1
    while True:
        pick = rng.randrange(len(_SENTENCES) - 1)
        pick = pick + 1 if pick >= previous >= 0 else pick  # never the same sentence twice in a row
        previous = pick
        sentence = _SENTENCES[pick].format(t=topic)
        if used + len(sentence) + 2 > budget and used >= floor:
            break
        sep = "\n\n" if in_paragraph >= rng.randint(3, 5) else " "
        in_paragraph = 1 if sep != " " else in_paragraph + 1
        parts.append(sep + sentence)
        used += len(sentence) + len(sep)
    # The marker comes first so that an answer cut at max_tokens still carries it.
    return quality_line + "\n" + "".join(parts)


class JudgeReplies(Protocol):
    """What answers judge requests (simulator/judges.py's `Judges`, which builds on this module)."""

    def reply(
        self, messages: Sequence[Mapping[str, Any]], seed: int, model: str = "", echo: float = 0.0
    ) -> str | None: ...


def answer(
    model: str,
    messages: Sequence[Mapping[str, Any]],
    max_tokens: int | None,
    seed: int,
    judges: JudgeReplies,
    judge_echo: float = 0.0,
) -> Reply:
    """The simulator's reply to a chat request: a judge-shaped reply when a registered benchmark knows
    the prompt as its judge request (copied from the prompt at the `judge_echo` rate), else a filler
    answer; cut at max_tokens either way."""
    text = judges.reply(messages, seed, model, judge_echo)
    if text is None:
        text = filler_answer(model, messages, seed)
    return cut_to_tokens(text, max_tokens) if max_tokens is not None else Reply(text, "stop")
