"""Judge-shaped replies. The shape is each benchmark's own business: the first registered benchmark
whose `simulated_judge_reply` knows the request as one of its judge requests writes the reply. The
verdicts are the simulator's: YES with the quality the judged answer carries (`read_quality`), fixed by
a hash of (seed, decision key, judged text), so the judge model's name does not matter and a replayed
request gets the same reply.

A re-ask follow-up (benchmarks.records.REASK_LEAD after the judge's own reply) is answered as the request
it follows. With `echo` > 0 that share of judge requests, drawn per request, gets a reply copied from the
request instead (the way a weak real judge fails): an identical resend draws the same, a follow-up anew."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from ifsweep import benchmarks
from ifsweep.benchmarks import Benchmark, Message
from ifsweep.benchmarks.records import REASK_LEAD, Role
from ifsweep.simulator.text import decide, echo_reply, message_text, read_quality, unit

__all__ = ["Judges"]


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

    def reply(self, messages: Sequence[Mapping[str, Any]], seed: int, echo: float = 0.0) -> str | None:
        """A reply in the shape the prompt asks for, or None when no benchmark sent `messages`."""
        # Roles are passed through as sent: a benchmark matches the ones its requests use.
        sent = tuple(Message(cast(Role, m.get("role")), message_text(m)) for m in messages)
        chat = _without_follow_ups(sent)
        text = self._shaped(chat, seed)
        if text is None or echo <= 0:
            return text
        draw = "\x00".join(f"{m.role}:{m.content}" for m in sent).encode()
        if unit(b"echo", str(seed).encode(), draw) < echo:
            return echo_reply(sent[-1].content, seed)
        return text

    def _shaped(self, chat: tuple[Message, ...], seed: int) -> str | None:
        def verdict(judged: str, key: str) -> bool:
            return decide(judged, key, seed, read_quality(judged))

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
