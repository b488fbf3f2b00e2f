"""Judge-shaped replies. The shape is each benchmark's own business: the first registered benchmark
whose `simulated_judge_reply` knows the request as one of its judge requests writes the reply. The
verdicts are the simulator's: YES with the quality the judged answer carries (`read_quality`), fixed by
a hash of (seed, decision key, judged text), so the judge model's name does not matter and a replayed
request gets the same reply."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from ifsweep import benchmarks
from ifsweep.benchmarks import Benchmark, Message
from ifsweep.benchmarks.records import Role
from ifsweep.simulator.text import decide, message_text, read_quality

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

    def reply(self, messages: Sequence[Mapping[str, Any]], seed: int) -> str | None:
        """A reply in the shape the prompt asks for, or None when no benchmark sent `messages`."""
        # Roles are passed through as sent: a benchmark matches the ones its requests use.
        chat = tuple(Message(cast(Role, m.get("role")), message_text(m)) for m in messages)

        def verdict(judged: str, key: str) -> bool:
            return decide(judged, key, seed, read_quality(judged))

        for bench in self._benches:
            text = bench.simulated_judge_reply(chat, verdict)
            if text is not None:
                return text
        return None
