"""Counters the simulator keeps so tests can see what the client really sent."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ifsweep.simulator.ledger import Ledger

_LOG_SIZE = 100_000  # the most recent answered requests kept in `log`


@dataclass(frozen=True, slots=True)
class Served:
    """One answered chat request: when it arrived and was answered (time.monotonic), its prompt tokens
    and how many of them the prefix cache served, and the prompt_cache_key it carried. Anthropic's
    endpoints (simulator/anthropic.py) also say what was written to the cache, the output tokens and
    whether it came in a Message Batch: what the simulated provider bills."""

    model: str
    arrived: float
    answered: float
    prompt_tokens: int
    cached_tokens: int
    prompt_cache_key: str | None
    cache_write_tokens: int = 0
    output_tokens: int = 0
    batch: bool = False


class SimStats:
    """Mutated only on the simulator's event loop; other threads may read the counts after the fact."""

    def __init__(self) -> None:
        self.requests = 0  # chat-completion requests received, whatever happened to them
        self.by_model: Counter[str] = Counter()
        self.status_counts: Counter[int] = Counter()  # HTTP status of every answer that was started
        # sha256 of the canonical request body (model + messages + params): a count above 1 is a resend.
        self.bodies: Counter[str] = Counter()
        self.faults: Counter[str] = Counter()  # injected faults by name, limit 429s as "limit"
        self.in_flight = 0
        self.max_in_flight = 0
        # The Batch API (simulator/batch.py): batches created, and requests by custom_id over every batch
        # created (a count above 1 is a request submitted twice).
        self.batches_created = 0
        self.batch_requests: Counter[str] = Counter()
        # Per model, requests inside their simulated latency at once (the most seen): how many calls a
        # client really kept open for one model.
        self.waiting_by_model: Counter[str] = Counter()
        self.max_waiting_by_model: Counter[str] = Counter()
        # Prompt tokens of answered requests, and those of them read from the prefix cache.
        self.prompt_tokens: Counter[str] = Counter()
        self.cached_tokens: Counter[str] = Counter()
        self.log: deque[Served] = deque(maxlen=_LOG_SIZE)
        # What was received, billed and submitted in batches, per request body (simulator/ledger.py).
        self.ledger = Ledger()

    def billed_tokens(self, model: str) -> tuple[int, int]:
        """(prompt, completion) tokens the ledger billed for `model`."""
        bills = [b for b in self.ledger.bills if b.model == model]
        return sum(b.prompt_tokens for b in bills), sum(b.completion_tokens for b in bills)

    def billed_usd(self, input_per_mtok: float, output_per_mtok: float) -> float:
        """The ledger's bill over every model at one price (prefix-cache reads at the full input price)."""
        bills = self.ledger.bills
        tokens_in = sum(b.prompt_tokens for b in bills)
        tokens_out = sum(b.completion_tokens for b in bills)
        return (tokens_in * input_per_mtok + tokens_out * output_per_mtok) / 1e6

    def reset(self) -> None:
        """Forget every count; requests still being served keep counting in in_flight."""
        self.requests = 0
        self.by_model = Counter()
        self.status_counts = Counter()
        self.bodies = Counter()
        self.faults = Counter()
        self.batches_created = 0
        self.batch_requests = Counter()
        self.max_in_flight = self.in_flight
        self.max_waiting_by_model = Counter(self.waiting_by_model)
        self.prompt_tokens = Counter()
        self.cached_tokens = Counter()
        self.log.clear()
        self.ledger.reset()

    def served(self, record: Served) -> None:
        self.prompt_tokens[record.model] += record.prompt_tokens
        self.cached_tokens[record.model] += record.cached_tokens
        self.log.append(record)

    @contextmanager
    def serving(self) -> Iterator[None]:
        """Counts one request (chat or Anthropic messages) and holds it in flight while it is answered."""
        self.requests += 1
        self.in_flight += 1
        if self.in_flight > self.max_in_flight:
            self.max_in_flight = self.in_flight
        try:
            yield
        finally:
            self.in_flight -= 1

    def enter_model(self, model: str) -> None:
        n = self.waiting_by_model[model] = self.waiting_by_model[model] + 1
        if n > self.max_waiting_by_model[model]:
            self.max_waiting_by_model[model] = n

    def leave_model(self, model: str) -> None:
        self.waiting_by_model[model] -= 1
