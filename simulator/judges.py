"""Judge-shaped replies. The shape is each benchmark's own business: the first registered benchmark
whose `simulated_judge_reply` knows the request as one of its judge requests writes the reply. The
verdicts are the simulator's: YES with the quality the judged answer carries (`read_quality`), fixed by
a hash of (seed, decision key, judged text), so a replayed request gets the same reply.

A judge model's name may set how it departs from that verdict, for tests of a panel of judges:
`-flip0.2` in the name turns each verdict over with probability 0.2 (drawn by hash of the model name,
the decision key and the judged text: deterministic, and independent between judges of different
names); `-garble0.1` answers one judge request in ten with text no benchmark parses. Judges without
either agree with each other exactly."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

from ifsweep import benchmarks
from ifsweep.benchmarks import Benchmark, Message
from ifsweep.benchmarks.records import Role
from ifsweep.simulator.text import decide, message_text, read_quality, unit

__all__ = ["GARBLED_REPLY", "Judges", "judge_flaws"]

GARBLED_REPLY = "(the simulated judge mumbles and gives no verdict)"
_FLAW_RE = re.compile(r"-(flip|garble)(\d+(?:\.\d+)?)")


def judge_flaws(model: str) -> tuple[float, float]:
    """(flip rate, garble rate) a judge model's name asks for; (0, 0) for a plain name."""
    found = {k: min(1.0, float(v)) for k, v in _FLAW_RE.findall(model)}
    return found.get("flip", 0.0), found.get("garble", 0.0)


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

    def reply(self, messages: Sequence[Mapping[str, Any]], seed: int, model: str = "") -> str | None:
        """A reply in the shape the prompt asks for, or None when no benchmark sent `messages`.
        `model`: the judge model's name, which may ask for flipped or garbled verdicts."""
        # Roles are passed through as sent: a benchmark matches the ones its requests use.
        chat = tuple(Message(cast(Role, m.get("role")), message_text(m)) for m in messages)
        flip, garble = judge_flaws(model)
        name = model.encode()

        def verdict(judged: str, key: str) -> bool:
            v = decide(judged, key, seed, read_quality(judged))
            if flip > 0 and unit(b"flip", name, key.encode(), judged.encode()) < flip:
                return not v
            return v

        for bench in self._benches:
            text = bench.simulated_judge_reply(chat, verdict)
            if text is not None:
                if garble > 0:
                    asked = b"".join(message_text(m).encode() + b"\0" for m in messages)
                    if unit(b"garble", name, asked) < garble:
                        return GARBLED_REPLY
                return text
        return None
