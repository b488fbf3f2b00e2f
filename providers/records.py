"""Records that cross the providers boundary: what an endpoint is, and what a call produced."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

# ok: a usable answer; empty / truncated / refused: real answers that are judged and counted;
# error: no answer (never judged, never scored, retried on resume).
CallStatus = Literal["ok", "empty", "truncated", "refused", "error"]

# Why a call ended in error. The runner and the report group by these.
ErrorKind = Literal[
    "rate_limit",  # 429 after every retry
    "server",  # 5xx after every retry
    "timeout",  # per-call deadline passed
    "connection",  # reset, refused, DNS
    "malformed",  # body not JSON / not the chat-completions shape
    "auth",  # 401 / 403, or the api_key_env variable is not set
    "not_found",  # 404: unknown model or wrong api_base
    "context_length",  # the prompt is longer than the model's context window (never retried)
    "bad_request",  # other 4xx
    "other",
]


@dataclass(frozen=True, slots=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


@dataclass(frozen=True, slots=True)
class EndpointSpec:
    """One configured model (or judge). `label` is the config id used in results."""

    label: str
    model: str  # any LiteLLM model string, e.g. "openai/gpt-4o-mini"
    api_base: str | None = None
    api_key_env: str | None = None  # the NAME of the environment variable, never the key
    rpm: int | None = None
    tpm: int | None = None
    max_concurrency: int | None = None
    max_usd: float | None = None
    context_window: int | None = None  # tokens; overrides what the server or LiteLLM's map says (plan)
    params: Mapping[str, Any] = field(default_factory=dict)  # temperature, max_tokens, ...
    price: Price | None = None  # overrides LiteLLM's price map
    force_litellm: bool = False  # send through litellm.acompletion even when the fast path could
    timeout_s: float = 120.0  # per-call deadline, retries included


@dataclass(frozen=True, slots=True)
class Completion:
    """What one logical call produced, after retries. Both send paths produce exactly this."""

    status: CallStatus
    text: str | None
    finish_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    attempts: int = 1
    rate_limited: int = 0  # how many attempts were answered 429
    error_kind: ErrorKind | None = None
    error_message: str | None = None  # scrubbed of keys and Authorization headers
    path: Literal["fast", "litellm"] = "fast"
    usage_estimated: bool = False  # the provider sent no usage: tokens and cost are our estimate


class BudgetExhausted(Exception):
    """The worst-case cost of the next call does not fit under a cap; nothing was sent."""

    def __init__(self, scope: str, cap_usd: float, needed_usd: float):
        super().__init__(
            f"budget for {scope} (${cap_usd:.4f}) cannot cover the next call (${needed_usd:.6f})"
        )
        self.scope = scope
        self.cap_usd = cap_usd
        self.needed_usd = needed_usd


class UnknownPrice(ValueError):
    """A budget is set but a model has no known price: refuse to start rather than overspend."""
