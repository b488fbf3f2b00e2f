"""Reading the simulator's ledger (GET /sim/ledger, simulator/ledger.py) and what it says: dollars
billed per endpoint, bodies billed twice, batch lines submitted again."""

from __future__ import annotations

import json
import urllib.request
from collections import Counter
from dataclasses import dataclass
from typing import Any

from _chaos.sweepfile import PRICES


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
    with urllib.request.urlopen(f"{root}/v1/batches", timeout=30) as r:
        batches = json.loads(r.read())["data"]
    with urllib.request.urlopen(f"{root}/sim/ledger", timeout=30) as r:
        data = json.loads(r.read())
    failed = sum(1 for b in batches if b["status"] in ("failed", "expired"))
    return Ledger(data["received"], data["bills"], data["submissions"], data["now"], failed)


def bill_usd(bill: dict[str, Any], roles: dict[str, str]) -> float:
    """What one billed request costs at the sweep's prices (cached tokens at the input price, as the
    config gives no cached price; the Batch API at half)."""
    inp, out = PRICES[roles.get(bill["model"], "model")]
    usd = (bill["prompt_tokens"] * inp + bill["completion_tokens"] * out) / 1e6
    return usd / 2 if bill["via"] == "batch" else usd


def billed_by_model(ledger: Ledger, roles: dict[str, str]) -> Counter[str]:
    """Dollars billed per served model name."""
    out: Counter[str] = Counter()
    for b in ledger.bills:
        out[b["model"]] += bill_usd(b, roles)
    return out


def extra_bills(ledger: Ledger) -> int:
    """Bills beyond the first of each request body: calls answered and paid more than once."""
    return sum(n - 1 for n in Counter(b["body"] for b in ledger.bills).values() if n > 1)


def bills_near(ledger: Ledger, at: float, window_s: float) -> int:
    """Bills made in the `window_s` before `at`: the calls a kill at `at` may leave without a stored
    result (in flight at the provider, or answered but still in the group-commit buffer)."""
    return sum(1 for b in ledger.bills if at - window_s <= b["at"] <= at)


def resubmitted(ledger: Ledger) -> list[str]:
    """Batch lines submitted again while an earlier submission of the same body was answered or still
    open: each is a request submitted (and paid for, once its batch ends) twice."""
    seen: dict[str, list[str]] = {}
    out: list[str] = []
    for sub in sorted(ledger.submissions, key=lambda s: s["at"]):
        earlier = seen.setdefault(sub["body"], [])
        if any(outcome in ("answered", "pending") for outcome in earlier):
            out.append(f"{sub['custom_id']} (batch {sub['batch_id']}, before: {', '.join(earlier)})")
        earlier.append(sub["outcome"])
    return out
