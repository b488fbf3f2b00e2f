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
    "quota",  # 429 that no wait fixes: the account is out of credit or over its spend limit (never retried)
    "server",  # 5xx after every retry
    "timeout",  # per-call deadline passed
    "connection",  # reset, refused, DNS
    "malformed",  # body not JSON / not the chat-completions shape
    "auth",  # 401 / 403, or the api_key_env variable is not set
    "not_found",  # 404: unknown model or wrong api_base
    "context_length",  # the prompt is longer than the model's context window (never retried)
    "bad_request",  # other 4xx
    "results_gone",  # a batch ended but its results can no longer be read (expired, archived, deleted)
    "cancelled",  # its batch was cancelled by someone other than this run (a new run sends it again)
    "other",
]


BATCH_DISCOUNT = 0.5  # a Batch API's price when the price table gives none
BATCH_KIND = "batch"  # the record kind of batch mode's journal (providers/batch/endpoint.py)


@dataclass(frozen=True, slots=True)
class Price:
    """Dollars per million tokens. Cached input (a prefix the provider served from its cache) and
    cache writes (Anthropic's cache_creation tokens) have their own prices where the provider has them;
    None charges them at the input price."""

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None
    # What the provider's Batch API charges; None: half the interactive price (OpenAI, Anthropic, Gemini).
    batch_input_per_mtok: float | None = None
    batch_output_per_mtok: float | None = None

    def cost(
        self, input_tokens: int, output_tokens: int, cached_tokens: int = 0, cache_write_tokens: int = 0
    ) -> float:
        """What a call costs; `input_tokens` counts every prompt token, the cached and written ones too."""
        cached = min(cached_tokens, input_tokens)
        written = min(cache_write_tokens, input_tokens - cached)
        plain = input_tokens - cached - written
        cached_price = _or(self.cached_input_per_mtok, self.input_per_mtok)
        write_price = _or(self.cache_write_per_mtok, self.input_per_mtok)
        return (
            plain * self.input_per_mtok
            + cached * cached_price
            + written * write_price
            + output_tokens * self.output_per_mtok
        ) / 1e6

    def worst_case(self, input_tokens: int, output_tokens: int) -> float:
        """The most a call can cost: every prompt token at the dearer of input and cache-write prices."""
        per_in = max(self.input_per_mtok, self.cache_write_per_mtok or 0.0)
        return (input_tokens * per_in + output_tokens * self.output_per_mtok) / 1e6

    def for_batch(self) -> Price:
        """What a call through the provider's Batch API costs: the batch prices, else half (OpenAI's,
        Anthropic's and Gemini's discount). Cache reads and writes inside a batch get the input's
        discount (Anthropic: they stack)."""
        inp, out = self.batch_input_per_mtok, self.batch_output_per_mtok
        batch_in = inp if inp is not None else self.input_per_mtok * BATCH_DISCOUNT
        ratio = batch_in / self.input_per_mtok if self.input_per_mtok > 0 else BATCH_DISCOUNT
        return Price(
            input_per_mtok=batch_in,
            output_per_mtok=out if out is not None else self.output_per_mtok * BATCH_DISCOUNT,
            cached_input_per_mtok=_scaled(self.cached_input_per_mtok, ratio),
            cache_write_per_mtok=_scaled(self.cache_write_per_mtok, ratio),
        )


def _scaled(value: float | None, ratio: float) -> float | None:
    return None if value is None else value * ratio


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


@dataclass(frozen=True, slots=True)
class BatchPolicy:
    """`batch = true` on a model or the judge: its calls go through the provider's Batch API
    (providers/batch/endpoint.py). A batch is submitted when `max_requests` are waiting or the oldest waited
    `max_age_s`; it is polled after `poll_s`, the interval doubling up to `poll_max_s`; a request whose
    batch failed or expired joins up to `max_retries` later batches."""

    max_requests: int = 1000
    max_age_s: float = 30.0
    poll_s: float = 10.0
    poll_max_s: float = 300.0
    max_retries: int = 2


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
    # Warm a shared prompt prefix with one call before sending the calls that share it
    # (providers/send/prefix.py); None: on where the provider caches prefixes.
    cache_dispatch: bool | None = None
    batch: BatchPolicy | None = None  # send through the provider's Batch API
    # Names the server in result keys in place of api_base: a server whose answers do not depend on
    # where it listens (the built-in simulator, restarted on another port), runner/store/keys.py.
    server_id: str | None = None
    # An OpenAI reasoning model: sent max_completion_tokens and no sampling parameters
    # (providers/send/params.py); None: as LiteLLM's model map says.
    reasoning: bool | None = None


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
    # Of input_tokens: served from the provider's prefix cache, and written to it (Anthropic bills writes).
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    cache_saved_usd: float = 0.0  # cost at the plain input price minus cost_usd (negative: writes cost more)
    # Of cost_usd, the worst case charged for attempts whose bill is unknown (a timeout, a reset, a
    # malformed answer): the provider may have run them. The rest was reported (or estimated) usage.
    worst_case_usd: float = 0.0
    # The ids of the intents recorded before its sends (only under a cap: runner/store/intents.py).
    intents: tuple[str, ...] = ()


class BudgetExhausted(Exception):
    """The worst-case cost of the next call, or of the next attempt of a call whose last attempt may
    have been billed, does not fit under a cap; that call or attempt was not sent."""

    def __init__(self, scope: str, cap_usd: float, needed_usd: float):
        super().__init__(
            f"budget for {scope} (${cap_usd:.4f}) cannot cover the next call (${needed_usd:.6f})"
        )
        self.scope = scope
        self.cap_usd = cap_usd
        self.needed_usd = needed_usd


class UnknownPrice(ValueError):
    """A budget is set but a model has no known price: refuse to start rather than overspend."""
