"""Judge-shaped replies. The shape is each benchmark's own business: the first registered benchmark
whose `simulated_judge_reply` knows the request as one of its judge requests writes the reply. The
verdicts are the simulator's: YES with the quality the judged answer carries (`read_quality`), fixed by
a hash of (seed, decision key, judged text), so a replayed request gets the same reply.

A judge model's name may set how it departs from that verdict, for tests of a panel of judges:
`-flip0.2` in the name turns each verdict over with probability 0.2 (drawn by hash of the model name,
the decision key and the judged text: deterministic, and independent between judges of different
names); `-fyes0.1` says YES on one in ten of the constraints the plain verdict says NO to (a judge
too lenient: its false-yes rate against the plain judge is 0.1 and its false-no rate 0); `-fno0.1`
says NO on one in ten of those the plain verdict says YES to (too strict); `-garble0.1` answers one
judge request in ten with text no benchmark parses. The one-sided flaws apply before `-flip`, each drawn
by its own hash, so a name may combine them. Judges without any agree with each other exactly.

A re-ask follow-up (benchmarks.records.REASK_LEAD after the judge's own reply) is answered as the request
it follows. With `echo` > 0 that share of judge requests, drawn per request, gets a reply copied from the
request instead (the way a weak real judge fails): an identical resend draws the same, a follow-up anew."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, cast

from ifsweep import benchmarks
from ifsweep.benchmarks import Benchmark, Message
from ifsweep.benchmarks.records import REASK_LEAD, Role
from ifsweep.simulator.text import decide, echo_reply, message_text, read_quality, unit

__all__ = ["GARBLED_REPLY", "Flaws", "Judges", "judge_flaws"]

GARBLED_REPLY = "(the simulated judge mumbles and gives no verdict)"
_FLAW_RE = re.compile(r"-(flip|garble|fyes|fno)(\d+(?:\.\d+)?)")


class Flaws(NamedTuple):
    """How a simulated judge departs from the plain verdict, each a rate in [0, 1]."""

    flip: float  # either way
    garble: float  # of whole requests, answered with no verdict
    false_yes: float  # YES where the plain verdict is NO
    false_no: float  # NO where the plain verdict is YES


def judge_flaws(model: str) -> Flaws:
    """The flaws a judge model's name asks for; all 0 for a plain name."""
    found = {k: min(1.0, float(v)) for k, v in _FLAW_RE.findall(model)}
    return Flaws(
        found.get("flip", 0.0), found.get("garble", 0.0), found.get("fyes", 0.0), found.get("fno", 0.0)
    )


class Judges:
    """The benchmarks a simulator answers judge requests for, in registry order."""

    def __init__(self, benches: Sequence[Benchmark]) -> None:
        self._benches = tuple(benches)

    @classmethod
    def registered(cls) -> Judges:
        """Every registered benchmark that loads: a broken plugin cannot have sent a request."""
        return cls(benchmarks.load_all().benchmarks)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self._benches)

    def reply(
        self, messages: Sequence[Mapping[str, Any]], seed: int, model: str = "", echo: float = 0.0
    ) -> str | None:
        """A reply in the shape the prompt asks for, or None when no benchmark sent `messages`.
        `model`: the judge model's name, which may ask for flipped or garbled verdicts."""
        # Roles are passed through as sent: a benchmark matches the ones its requests use.
        sent = tuple(Message(cast(Role, m.get("role")), message_text(m)) for m in messages)
        text = self._shaped(_without_follow_ups(sent), seed, model)
        if text is None:
            return None
        garble = judge_flaws(model).garble
        if garble > 0:  # drawn on the whole request: a follow-up draws anew
            asked = b"".join(m.content.encode() + b"\0" for m in sent)
            if unit(b"garble", model.encode(), asked) < garble:
                return GARBLED_REPLY
        if echo <= 0:
            return text
        draw = "\x00".join(f"{m.role}:{m.content}" for m in sent).encode()
        if unit(b"echo", str(seed).encode(), draw) < echo:
            return echo_reply(sent[-1].content, seed)
        return text

    def _shaped(self, chat: tuple[Message, ...], seed: int, model: str) -> str | None:
        flaws = judge_flaws(model)
        name = model.encode()

        def verdict(judged: str, key: str) -> bool:
            v = decide(judged, key, seed, read_quality(judged))
            drawn = (name, key.encode(), judged.encode())
            # Each flaw has its own hash, so a judge's false-yes share does not depend on its flips.
            if not v and flaws.false_yes > 0 and unit(b"fyes", *drawn) < flaws.false_yes:
                v = True
            elif v and flaws.false_no > 0 and unit(b"fno", *drawn) < flaws.false_no:
                v = False
            if flaws.flip > 0 and unit(b"flip", *drawn) < flaws.flip:
                return not v
            return v

        for bench in self._benches:
            text = bench.simulated_judge_reply(chat, verdict)
            if text is not None:
                return text
        return None


def _without_follow_ups(chat: tuple[Message, ...]) -> tuple[Message, ...]:
    """The request a chain of re-ask follow-ups ends in: each (assistant reply, follow-up) pair dropped."""
    while (
        len(chat) >= 3
        and chat[-1].role == "user"
        and chat[-1].content.startswith(REASK_LEAD)
        and chat[-2].role == "assistant"
    ):
        chat = chat[:-2]
    return chat
