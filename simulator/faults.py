"""Choosing a fault per request (seeded), and the answers of the faults that only change the JSON body."""

from __future__ import annotations

import random
from typing import Any

from ifsweep.simulator.config import FaultRates
from ifsweep.simulator.text import REFUSAL_TEXT, count_tokens, cut_to_tokens


class FaultPicker:
    """One `random.Random(seed)` per server; one draw per request picks at most one fault.

    Rates are laid end to end on [0, 1): with a sum of at most 1 each fault gets exactly its rate, above
    1 they are scaled down in proportion so that every configured fault stays reachable.
    """

    def __init__(self, faults: FaultRates, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.set_rates(faults)

    def set_rates(self, faults: FaultRates) -> None:
        pairs = faults.nonzero()
        total = sum(rate for _, rate in pairs)
        scale = 1.0 / total if total > 1.0 else 1.0
        bounds: list[tuple[str, float]] = []
        upper = 0.0
        for name, rate in pairs:
            upper += rate * scale
            bounds.append((name, upper))
        if bounds and total >= 1.0:
            bounds[-1] = (bounds[-1][0], 1.0)  # no float gap above the last bound
        self._bounds = tuple(bounds)

    def pick(self) -> str | None:
        # Always draw, so the n-th request meets the same number whatever the rates were.
        u = self.rng.random()
        for name, upper in self._bounds:
            if u < upper:
                return name
        return None

    def server_status(self) -> int:
        return self.rng.choice((500, 502, 503))


# Faults answered before the model runs: nothing is billed for them. Every other request is billed in
# full, a malformed, cut, hung or reset answer too: its client cannot know it was not (issue 21).
NEVER_RAN = frozenset({"server_error", "rate_limit", "rate_limit_no_header", "context_length", "quota"})
QUOTA_MESSAGE = "You have no credit left on this account (simulated): add credit to continue."
# The faults that live inside a well-formed answer's body (the rest break the HTTP exchange itself).
CONTENT_FAULTS = frozenset({"missing_usage", "null_content", "empty", "length", "content_filter", "refusal"})


def apply_content_fault(fault: str | None, message: dict[str, Any], choice: dict[str, Any]) -> None:
    """Change a well-formed completion in place for the faults that live inside the JSON body."""
    if fault == "null_content":
        message["content"] = None
    elif fault == "empty":
        message["content"] = ""
        choice["finish_reason"] = "stop"
    elif fault == "length":
        text = message["content"] or ""
        message["content"] = cut_to_tokens(text, max(1, count_tokens(text) // 3)).text
        choice["finish_reason"] = "length"
    elif fault == "content_filter":
        message["content"] = None
        choice["finish_reason"] = "content_filter"
    elif fault == "refusal":
        message["content"] = REFUSAL_TEXT
        message["refusal"] = REFUSAL_TEXT
        choice["finish_reason"] = "stop"


def error_body(message: str, kind: str, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error shape."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
