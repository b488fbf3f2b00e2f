"""The simulator's own account of what it was asked and what it charged: the independent ledger that
the chaos harness (perf/chaos.py) checks a sweep's promises against.

Like a real provider, the simulator charges a chat request once it admits it with an answer to give,
before its latency runs out: a client killed mid-call is still billed. A batch request is charged when
its batch is worked out and the request answered. Bodies are named by the sha256 of their canonical
JSON (sorted keys) without routing hints (`prompt_cache_key`: where the provider caches the prompt, not
what it answers), so a chat call and a batch line of the same request share the name, and so do two
runs whose hints differ.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

import orjson

Via = Literal["chat", "batch"]
Outcome = Literal["pending", "answered", "unanswered"]

# Billed, but the answer never reaches its client whole: a retry of such a call is paid twice by nature,
# not by a fault of the client's (Bill.delivered is False).
UNDELIVERED_FAULTS = frozenset({"malformed", "cut_body", "reset", "hang"})


_HINTS = ("prompt_cache_key",)


def body_digest(body: Mapping[str, Any]) -> str:
    """The ledger's name of a request body: what the provider answers, routing hints left out."""
    content = {k: v for k, v in body.items() if k not in _HINTS}
    return hashlib.sha256(orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()


@dataclass(frozen=True, slots=True)
class Bill:
    """One request the simulator charged: its body, served model name, tokens, and when (monotonic)."""

    body: str
    model: str
    via: Via
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    at: float
    delivered: bool = True  # the client was sent the whole answer (see UNDELIVERED_FAULTS)


@dataclass(slots=True)
class Submission:
    """One request line of a created batch: answered (and billed) once its batch is worked out,
    unanswered when the batch failed, expired before it, was cancelled, or the line got an error."""

    body: str
    custom_id: str
    batch_id: str
    at: float
    outcome: Outcome = "pending"


class Ledger:
    """Mutated only on the simulator's event loop; `snapshot()` is what GET /sim/ledger serves."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str, float]] = []  # (body, model, arrived) of every chat request
        self.bills: list[Bill] = []
        self.submissions: list[Submission] = []

    def receive(self, body: str, model: str) -> None:
        self.received.append((body, model, time.monotonic()))

    def bill(
        self,
        body: str,
        model: str,
        via: Via,
        tokens: tuple[int, int, int],
        *,
        delivered: bool = True,
    ) -> None:
        """Charge one request: `tokens` are its (prompt, cached, completion) tokens."""
        prompt, cached, completion = tokens
        self.bills.append(Bill(body, model, via, prompt, cached, completion, time.monotonic(), delivered))

    def submit(self, body: str, custom_id: str, batch_id: str) -> Submission:
        sub = Submission(body, custom_id, batch_id, time.monotonic())
        self.submissions.append(sub)
        return sub

    def reset(self) -> None:
        self.received.clear()
        self.bills.clear()
        self.submissions.clear()

    def snapshot(self) -> dict[str, Any]:
        return {
            "now": time.monotonic(),
            "received": [{"body": b, "model": m, "at": at} for b, m, at in self.received],
            "bills": [asdict(b) for b in self.bills],
            "submissions": [asdict(s) for s in self.submissions],
        }


__all__ = ["UNDELIVERED_FAULTS", "Bill", "Ledger", "Submission", "body_digest"]
