"""Reading the simulator's ledger (GET /sim/ledger, simulator/ledger.py) and what it says: dollars
billed per endpoint, bodies billed twice, batch lines submitted again."""

from __future__ import annotations

import itertools
import json
import urllib.request
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from _chaos.sweepfile import PRICES
from ifsweep.simulator.server import CLIENT_HEADERS


@dataclass(frozen=True, slots=True)
class Ledger:
    received: list[dict[str, Any]]
    bills: list[dict[str, Any]]
    submissions: list[dict[str, Any]]
    now: float
    batch_faults: int = 0  # batches that failed or expired

    def bodies(self) -> set[str]:
        """Every request body received, by chat or in a batch."""
        return {r["body"] for r in self.received} | {s["body"] for s in self.submissions}

    def since(self, at: float) -> Ledger:
        """Only what happened from monotonic time `at` on (the simulator's clock)."""
        return Ledger(
            [r for r in self.received if r["at"] >= at],
            [b for b in self.bills if b["at"] >= at],
            [s for s in self.submissions if s["at"] >= at],
            self.now,
            self.batch_faults,
        )


def fetch(base_url: str) -> Ledger:
    """The ledger of the simulator at `base_url` (…/v1), after every batch whose time has come was worked
    out: listing the batches works them out, as a provider finishes them whether anyone polls or not."""
    root = base_url.removesuffix("/v1")
    # OpenAI's batch routes want a key, as the simulator's do (simulator/server.py).
    listing = urllib.request.Request(f"{root}/v1/batches", headers=CLIENT_HEADERS)
    with urllib.request.urlopen(listing, timeout=30) as r:
        batches = json.loads(r.read())["data"]
    with urllib.request.urlopen(f"{root}/sim/ledger", timeout=30) as r:
        data = json.loads(r.read())
    failed = sum(1 for b in batches if b["status"] in ("failed", "expired"))
    return Ledger(data["received"], data["bills"], data["submissions"], data["now"], failed)


def bill_usd(bill: dict[str, Any], roles: dict[str, str]) -> float:
    """What one billed request costs at the sweep's prices (cached tokens at the input price, as the
    config gives no cached price; the Batch API at half)."""
    inp, out = PRICES[roles.get(bill["model"], "model")]
    usd = float(bill["prompt_tokens"] * inp + bill["completion_tokens"] * out) / 1e6
    return usd / 2 if bill["via"] == "batch" else usd


def billed_by_model(ledger: Ledger, roles: dict[str, str]) -> defaultdict[str, float]:
    """Dollars billed per served model name."""
    out: defaultdict[str, float] = defaultdict(float)
    for b in ledger.bills:
        out[b["model"]] += bill_usd(b, roles)
    return out


# A request already on the wire when the kill lands reaches the simulator just after it.
_ON_THE_WIRE_S = 0.1


def rebilled(
    ledger: Ledger, kills: list[float], window_s: float, stops: Sequence[tuple[float, float]] = ()
) -> tuple[int, list[str]]:
    """Bills beyond the first of each request body: (how many a kill excuses, the others described).

    A body billed again is excused only when its previous bill came in the `window_s` before a kill
    and the new one after it: a call the kill left without a stored result (in flight at the
    provider, or answered but still in the group-commit buffer). A bill whose answer never reached
    its client whole (a malformed, cut, reset or hung answer) is no answer: paying again after it is
    the fault's doing, and the spend must count it (I2), not I3. `stops` are the (start, end) of rounds
    that hit a full disk: what they were sent could not all be written, and a resume redoes it."""
    by_body: dict[str, list[dict[str, Any]]] = {}
    for b in sorted(ledger.bills, key=lambda b: b["at"]):
        by_body.setdefault(b["body"], []).append(b)
    excused, unexcused = 0, []
    for bills in by_body.values():
        for first, again in itertools.pairwise(bills):
            if not first.get("delivered", True):
                continue  # its answer never reached the client whole: a retry pays again by nature
            killed = any(t - window_s <= first["at"] <= t + _ON_THE_WIRE_S < again["at"] for t in kills)
            if killed or any(a <= first["at"] <= b < again["at"] for a, b in stops):
                excused += 1
            else:
                gap = again["at"] - first["at"]
                kill = max((t for t in kills if t < again["at"]), default=None)
                when = f"; the last kill before it {kill - first['at']:+.2f}s after the first" if kill else ""
                unexcused.append(
                    f"{first['model']} body {first['body'][:12]} billed again after {gap:.2f}s{when}"
                )
    return excused, unexcused


def resubmitted(ledger: Ledger, kills: list[float]) -> list[str]:
    """Batch lines submitted again while an earlier submission of the same body was answered or still
    open: each is a request submitted (and paid for, once its batch ends) twice."""
    seen: dict[str, list[dict[str, Any]]] = {}
    out: list[str] = []
    for sub in sorted(ledger.submissions, key=lambda s: s["at"]):
        earlier = seen.setdefault(sub["body"], [])
        live = [e for e in earlier if e["outcome"] in ("answered", "pending")]
        if live:
            last = live[-1]
            between = sum(1 for t in kills if last["at"] < t < sub["at"])
            out.append(
                f"{sub['custom_id']} in {sub['batch_id']}, {sub['at'] - last['at']:.2f}s after it went in "
                f"{last['batch_id']} (that one {last['outcome']}; {between} kill(s) between)"
            )
        earlier.append(sub)
    return out
