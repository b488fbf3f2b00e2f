"""What the shards say was spent, calls cut off by a kill included (docs/design/shards.md, "Intents").

Under a budget cap, before each send (a call's first attempt, and each retry that holds another worst
case: providers/pool.py) the pool asks `StoreIntents.intend` for an `intent` record. It is appended to
the shards and handed to the kernel before the send goes out (write-through, like every record; in
grouped mode the intent is written at once), so a kill -9 cannot lose it. The call's result record
lists the intents it resolves in `intents`. A run that finds an intent no result resolves charges its
worst case: the provider may well have finished and billed the call after its client was gone. Without
a cap nothing is written and nothing waits.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import chain
from math import fsum, isfinite
from pathlib import Path
from typing import Any

from ifsweep.runner.store.keys import KEY_SCHEMA
from ifsweep.runner.store.locks import writer_running
from ifsweep.runner.store.shards import SHARDS_DIR, RunStore, shard_files

__all__ = [
    "INTENT",
    "SPEND_KINDS",
    "SpendScan",
    "StoreIntents",
    "WriterSpend",
    "exact_terms",
    "record_spend",
    "run_spend",
    "spend_label",
    "spend_number",
]

INTENT = "intent"
# The records a run's spend is read from: the calls, and the intents of calls that never came back.
SPEND_KINDS = ("generation", "judgment", INTENT)


@dataclass(eq=False, slots=True)
class StoreIntents:
    """The pool's IntentLog (providers/budget.py) over the run's shards."""

    store: RunStore

    async def intend(self, label: str, worst_usd: float, key: str | None) -> str:
        ident = secrets.token_hex(16)
        record = {
            "v": KEY_SCHEMA,
            "kind": INTENT,
            "key": ident,
            "label": label,
            "worst_usd": worst_usd,
            "call": key,
            "ts": time.time(),
        }
        self.store.append_now(record)
        return ident


def spend_label(kind: object, model: object, judge: object) -> str | None:
    """The label a call record of `kind` is charged to: its judge for a judgment, else its model."""
    label = judge if kind == "judgment" else model
    return None if label is None else str(label)


def spend_number(v: object) -> float:
    """A stored dollar field as spend counts it: a number, else (missing, null, not a number) 0."""
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0.0


def exact_terms(values: Iterable[float]) -> list[float]:
    """A few floats (usually one or two) whose exact sum is the exact sum of `values`: summed with
    math.fsum beside other such terms they give the exactly rounded total of every value, so a reader
    holds a part's dollars as these, not as one float object per record (status at full size held
    468k calls' three dollar fields that way: 45-60 MB). Each term is fsum of the values less the terms
    before it; the remainder shrinks below the last term's half ulp at each step, so it ends."""
    values = list(values)
    terms: list[float] = []
    while True:
        rest = fsum(chain(values, (-t for t in terms)))
        if rest == 0.0:
            return terms
        terms.append(rest)
        if not isfinite(rest):  # an infinite value: fsum's own answer, there is no remainder to take
            return terms


def record_spend(rec: Mapping[str, Any]) -> tuple[str | None, float]:
    """(label, dollars) a stored call record was charged to: its judge for a judgment, else its model."""
    return spend_label(rec.get("kind"), rec.get("model"), rec.get("judge")), spend_number(rec.get("cost_usd"))


@dataclass(slots=True)
class SpendScan:
    """The spend of one writer's records (or a whole run's), read in shard order: every call record's
    cost (superseded errors too: they were paid for), plus the worst case of every intent that no
    result resolves. An intent and its result come from one writer, in that order, so only the
    intents of calls in flight at a time are ever held here.

    The one rule of a run's spend: the sweep feeds it record by record (`add`), `ifsweep status` a
    digest part's dollars per label at a time (`add_costs`, runner/watch/tallied.py); `finish` sums each
    label's dollars with math.fsum, exactly rounded whatever the order or grouping they came in, so
    both readers get the same figures to the last bit (tests/test_spend_rule.py)."""

    total: float = 0.0
    by: dict[str, float] = field(default_factory=dict)
    worst_case: float = 0.0  # of `total`: worst cases charged for calls whose bill is unknown
    orphans: int = 0  # intents without a result (calls cut off by a kill)
    _open: dict[str, tuple[str | None, float]] = field(default_factory=dict)
    # Dollars not summed yet, per label (None: a record naming none), and the worst cases among them.
    _costs: dict[str | None, list[Iterable[float]]] = field(default_factory=dict)
    _worst: list[Iterable[float]] = field(default_factory=lambda: [[]])

    def add(self, rec: Mapping[str, Any]) -> None:
        if rec.get("kind") == INTENT:
            self._open[str(rec["key"])] = (rec.get("label"), spend_number(rec.get("worst_usd")))
            return
        for ident in rec.get("intents") or ():
            self._open.pop(ident, None)
        label, cost = record_spend(rec)
        self._dollars(label).append(cost)
        self._first(self._worst).append(spend_number(rec.get("worst_case_usd")))

    def add_costs(self, label: str | None, costs: Iterable[float], worst_cases: Iterable[float]) -> None:
        """Many call records of one label at once: their costs and worst-case parts (as `add` reads
        them from each record), held as their exact terms."""
        self._costs.setdefault(label, [[]]).append(exact_terms(costs))
        self._worst.append(exact_terms(worst_cases))

    def open_intent(self, ident: str, label: str | None, worst: float) -> None:
        self._open[ident] = (label, worst)

    def finish(self, *, charge_open: bool = True) -> SpendScan:
        """Charge the intents left open (call it once every record was added). `charge_open=False`:
        they are calls still in flight of a live process, which holds them itself."""
        for label, worst in self._open.values() if charge_open else ():
            self.charge_open(label, worst)
        self._open.clear()
        every = [c for chunks in self._costs.values() for c in chunks]
        self.total += fsum(chain.from_iterable(every))
        for label, chunks in self._costs.items():
            if label is not None:
                self.by[label] = self.by.get(label, 0.0) + fsum(chain.from_iterable(chunks))
        self.worst_case += fsum(chain.from_iterable(self._worst))
        self._costs, self._worst = {}, [[]]
        return self

    def charge_open(self, label: str | None, worst: float) -> None:
        """Charge one intent no result resolved at its worst case (what `finish` does for each); summed
        by the next `finish`."""
        self._dollars(label).append(worst)
        self._first(self._worst).append(worst)
        self.orphans += 1

    def _dollars(self, label: str | None) -> list[float]:
        return self._first(self._costs.setdefault(label, [[]]))

    @staticmethod
    def _first(chunks: list[Iterable[float]]) -> list[float]:
        first = chunks[0]
        assert isinstance(first, list)  # the chunk `add` appends to, one value at a time
        return first


@dataclass(slots=True)
class WriterSpend:
    """A SpendScan per writer of a run directory, fed in shard order (`writers[file_no]` names the
    writer of shard file `file_no`). One function for every reader of a run's spend: the baseline each
    writer starts from under a coordinator (runner/engine/coordinator.py) and `ifsweep status`, so the
    spend status shows is the spend a resumed run starts from, intents cut off by a kill included."""

    writers: list[str]
    shards_dir: Path | None = None  # where the writers' locks say which of them still run
    scans: dict[str, SpendScan] = field(default_factory=dict)

    def add(self, file_no: int, rec: Mapping[str, Any]) -> None:
        writer = self.writers[file_no]
        scan = self.scans.get(writer)
        if scan is None:
            scan = self.scans[writer] = SpendScan()
        scan.add(rec)

    def finish(self, own: str | None = None) -> dict[str, SpendScan]:
        """Each writer's scan, its open intents charged (call it once every record was added), except
        those of a writer whose process still runs (its lock is held), other than `own` (the caller's
        writer, whose open intents are its dead predecessor's): they are calls in flight, which that
        process holds and settles itself; counted now, at their worst case, a live partition's calls
        would be charged twice over by the shared ledger, merged by maximum."""
        for writer, scan in self.scans.items():
            live = writer != own and self.shards_dir is not None and writer_running(self.shards_dir, writer)
            scan.finish(charge_open=not live)
        return self.scans


def run_spend(run_dir: Path) -> WriterSpend:
    """An empty WriterSpend over a run directory's writers, in shard file order."""
    return WriterSpend([writer for writer, _, _ in shard_files(run_dir)], Path(run_dir) / SHARDS_DIR)
