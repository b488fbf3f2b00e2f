"""Settings of the built-in simulator: latency, rate limits, and how often each fault happens."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields


@dataclass(frozen=True, slots=True)
class FaultRates:
    """Probability per request of each fault, each in [0, 1].

    One seeded draw per request picks at most one fault (see docs/design/simulator.md): when the rates sum
    to at most 1 each fault happens at exactly its rate; above 1 they share the draw in proportion.
    """

    server_error: float = 0.0  # 500, 502 or 503
    rate_limit: float = 0.0  # spurious 429 with Retry-After
    rate_limit_no_header: float = 0.0  # 429 with no Retry-After and no x-ratelimit-* headers
    malformed: float = 0.0  # 200 whose body is not JSON
    cut_body: float = 0.0  # 200 whose body stops mid-way, then the connection closes
    reset: float = 0.0  # connection closed without an answer
    hang: float = 0.0  # no answer until the client gives up (or hang_s passes)
    trickle: float = 0.0  # complete answer sent a few bytes at a time over 2-5 s
    wrong_content_type: float = 0.0  # 200, valid JSON, content-type text/html
    missing_usage: float = 0.0
    null_content: float = 0.0  # message.content = null
    empty: float = 0.0  # message.content = ""
    length: float = 0.0  # finish_reason "length", text cut short
    content_filter: float = 0.0  # finish_reason "content_filter", content null
    refusal: float = 0.0  # "I can't help with that." with message.refusal set
    context_length: float = 0.0  # 400 context_length_exceeded, whatever the prompt's length
    # OpenAI's 429 insufficient_quota (no credit left; no wait fixes it); Anthropic's route answers its
    # 400 "credit balance is too low" instead.
    quota: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise TypeError(f"FaultRates.{f.name}: expected a number, got {value!r}")
            if not (0.0 <= float(value) <= 1.0) or math.isnan(value):
                raise ValueError(f"FaultRates.{f.name}: rate must be in [0, 1], got {value!r}")

    def nonzero(self) -> tuple[tuple[str, float], ...]:
        """(name, rate) of every fault with a positive rate, in declaration order."""
        return tuple(
            (f.name, float(getattr(self, f.name))) for f in fields(self) if getattr(self, f.name) > 0
        )


FAULT_NAMES: tuple[str, ...] = tuple(f.name for f in fields(FaultRates))
# The providers' documented rules the simulator enforces unless waived by name (SimConfig.lenient):
# "empty_content": Anthropic's 400 for a message with empty content (but a final assistant one) or an
# empty or whitespace-only text block; "auth": a key header on every /v1 route (Authorization: Bearer
# on OpenAI's, x-api-key on Anthropic's); "api_version": Anthropic's anthropic-version header, and the
# parameters its version removed; "reasoning_params": OpenAI reasoning models refuse max_tokens and
# sampling parameters (docs/design/simulator.md).
LENIENT_RULES = ("empty_content", "auth", "api_version", "reasoning_params")
CONTEXT_STYLES = ("openai", "llamacpp")


@dataclass(frozen=True, slots=True)
class BatchSettings:
    """How the simulated Batch API behaves (simulator/batch.py). Fault rates are per batch, drawn when
    the batch is created from the server's seed."""

    delay_s: float = 0.0  # from create until the batch is over (request_counts grow linearly meanwhile)
    fail_rate: float = 0.0  # the batch fails validation: status "failed", no output at all
    expire_rate: float = 0.0  # the batch expires: status "expired", only `expire_done_share` answered
    expire_done_share: float = 0.5
    # How long an ended batch's results stay readable (None: for ever). After it, OpenAI's output and
    # error files are gone (404; batch files expire after 30 days by default) and a Message Batch is
    # archived (`archived_at` set, its results 404).
    results_kept_s: float | None = None
    # How long an OpenAI batch stays `cancelling` after a cancel (OpenAI: up to 10 minutes) before it is
    # `cancelled` with the requests done by the cancel in its output file.
    cancel_s: float = 0.0
    # OpenAI's enqueued-token limit per model (None: none): a batch whose prompt tokens, with those of
    # the model's batches still open, exceed it fails with `token_limit_exceeded`.
    enqueued_token_limit: int | None = None
    # The most bytes a Message Batch's create body may hold (Anthropic: 256 MB; more is a 413
    # request_too_large): lower, a test meets the limit without 256 MB of requests.
    anthropic_max_bytes: int = 256_000_000
    # The account has no credit: OpenAI's POST /v1/batches answers 429 insufficient_quota (uploads still
    # work), as a batch create of an account out of credit may.
    no_credit: bool = False

    def __post_init__(self) -> None:
        if not (self.delay_s >= 0 and math.isfinite(self.delay_s)):
            raise ValueError(f"BatchSettings.delay_s: must be >= 0, got {self.delay_s!r}")
        for name in ("results_kept_s", "cancel_s"):
            value = getattr(self, name)
            if value is not None and not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"BatchSettings.{name}: must be >= 0, got {value!r}")
        if self.anthropic_max_bytes < 1:
            raise ValueError(
                f"BatchSettings.anthropic_max_bytes: must be >= 1, got {self.anthropic_max_bytes!r}"
            )
        if self.enqueued_token_limit is not None and self.enqueued_token_limit < 1:
            raise ValueError(
                f"BatchSettings.enqueued_token_limit: must be >= 1, got {self.enqueued_token_limit!r}"
            )
        for name in ("fail_rate", "expire_rate", "expire_done_share"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"BatchSettings.{name}: must be in [0, 1], got {value!r}")


@dataclass(frozen=True, slots=True)
class SimConfig:
    """How the simulator behaves. Can be swapped while it runs (Simulator.set_config)."""

    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    rpm: int | None = None
    tpm: int | None = None
    # Token buckets: capacity = limit * burst_s / 60, refilled at limit / 60 per second.
    burst_s: float = 2.0
    send_retry_after: bool = True  # Retry-After and retry-after-ms on limit 429s
    send_ratelimit_headers: bool = True  # x-ratelimit-* on every response when a limit is set
    # Prompts longer than this many tokens are refused with a 400, as a server with that context
    # would; served as /props n_ctx (llama.cpp) and max_model_len in /v1/models (vLLM). None: no limit.
    context_window: int | None = None
    context_style: str = "openai"  # the 400's shape: "openai" (OpenAI / vLLM) or "llamacpp"
    faults: FaultRates = field(default_factory=FaultRates)
    seed: int = 0
    hang_s: float = 3600.0
    # Serve prompt prefixes of 1,024+ tokens from a cache filled by completed requests (simulator/prefix.py)
    # and report them in usage.prompt_tokens_details.cached_tokens, as OpenAI does.
    prefix_cache: bool = True
    batch: BatchSettings = field(default_factory=BatchSettings)
    # Share of judge requests answered with text copied from the request (simulator/judges.py): how a
    # weak judge fails, for testing echo-proof parsing and re-asks.
    judge_echo: float = 0.0
    # Rules of LENIENT_RULES waived: strict by default, as the providers are; a test that needs
    # leniency asks for it by name.
    lenient: frozenset[str] = frozenset()

    @property
    def server_id(self) -> str:
        """What names this simulator in a sweep's result keys (an endpoint's `server_id`): its answers
        depend on its seed and echo rate, never on the port it listens on."""
        echo = f",judge_echo={self.judge_echo:g}" if self.judge_echo else ""
        return f"ifsweep-simulator(seed={self.seed}{echo})"

    def __post_init__(self) -> None:
        unknown = set(self.lenient) - set(LENIENT_RULES)
        if unknown:
            raise ValueError(
                f"SimConfig.lenient: unknown rule(s) {', '.join(sorted(unknown))}; "
                f"known: {', '.join(LENIENT_RULES)}"
            )
        if self.latency_ms < 0 or self.jitter_ms < 0:
            raise ValueError(
                f"SimConfig: latency_ms and jitter_ms must be >= 0, got {self.latency_ms}, {self.jitter_ms}"
            )
        for name in ("rpm", "tpm"):
            limit = getattr(self, name)
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
                raise ValueError(f"SimConfig.{name}: expected a positive int or None, got {limit!r}")
        if not self.burst_s > 0:
            raise ValueError(f"SimConfig.burst_s: must be > 0, got {self.burst_s!r}")
        if self.context_window is not None and (
            isinstance(self.context_window, bool)
            or not isinstance(self.context_window, int)
            or self.context_window <= 0
        ):
            raise ValueError(
                f"SimConfig.context_window: expected a positive int or None, got {self.context_window!r}"
            )
        if self.context_style not in CONTEXT_STYLES:
            raise ValueError(
                f"SimConfig.context_style: expected one of {', '.join(CONTEXT_STYLES)}, "
                f"got {self.context_style!r}"
            )
        if not 0.0 <= self.judge_echo <= 1.0:
            raise ValueError(f"SimConfig.judge_echo: rate must be in [0, 1], got {self.judge_echo!r}")
        if self.hang_s < 0:
            raise ValueError(f"SimConfig.hang_s: must be >= 0, got {self.hang_s!r}")
        if not isinstance(self.faults, FaultRates):
            raise TypeError(f"SimConfig.faults: expected FaultRates, got {type(self.faults).__name__}")
