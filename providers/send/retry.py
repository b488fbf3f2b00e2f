"""Which failures are worth another attempt, and how long to wait before it.

`classify` is a pure function of an exception or an HTTP status (plus response headers): no I/O, no
clock, so it is unit-tested with constructed values. LiteLLM's exceptions are recognised by duck typing
(`status_code`, `litellm_response_headers`, class names) so this module never imports litellm.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import re
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass

import orjson
from multidict import CIMultiDict, CIMultiDictProxy

from ifsweep.providers.records import ErrorKind
from ifsweep.providers.send.context import overflow_in


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential back-off with full jitter: attempt n waits uniform(0, min(max, base * 2**(n-1)))."""

    max_attempts: int = 6
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"RetryPolicy.max_attempts must be >= 1, got {self.max_attempts}")
        if self.base_delay_s < 0 or self.max_delay_s < 0:
            raise ValueError("RetryPolicy delays must be >= 0")

    def rng(self) -> random.Random:
        return random.Random(self.seed)

    def delay_s(self, attempt: int, rng: random.Random) -> float:
        """Wait before the attempt after `attempt` (1-based) failed."""
        ceiling = min(self.max_delay_s, self.base_delay_s * 2.0 ** min(attempt - 1, 60))
        return rng.uniform(0.0, ceiling)


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """`sent`: whether the request may have reached the provider. False only for a failure known to
    come before its bytes were written (connect refused, DNS, TLS handshake, connect timeout): such an
    attempt cannot have been billed."""

    retry: bool
    kind: ErrorKind
    retry_after_s: float | None = None
    sent: bool = True


class HttpStatusError(Exception):
    """A non-2xx answer on the fast path; carries what `classify` needs: the status, the headers and
    the provider's own name for the error (`error.code`, else `error.type`, of its body)."""

    def __init__(
        self, status_code: int, headers: Mapping[str, str], message: str, code: str | None = None
    ) -> None:
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code = status_code
        self.headers = headers
        self.message = message
        self.code = code


# OpenAI's 429s that no wait fixes: the account has no credit, or its spend limit is reached
# (error.code or error.type; openai-python's RateLimitError carries them the same way).
QUOTA_CODES = frozenset({"insufficient_quota", "credit_balance_exhausted", "billing_hard_limit_reached"})


# Anthropic's answer to an account without credit: a 400 `invalid_request_error` whose only mark, under
# the anthropic-version ifsweep pins (2023-06-01), is its message: "Your credit balance is too low to
# access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."
_NO_CREDIT = re.compile(r"(?i)credit balance is too low")


def out_of_quota(decision: RetryDecision) -> bool:
    """Whether an answer says the endpoint's account is out of credit: no wait fixes it, so the endpoint
    sends nothing more this run. The one test of it, for the interactive pool and batch mode alike."""
    return decision.kind == "quota"


def quota_advice(where: str, model: str, detail: str) -> str:
    """What a call of an endpoint out of credit ends with (every route's words)."""
    return (
        f"{where} answered that the account behind {model} has no credit left or is over its spend "
        f"limit: add credit (or raise the limit), then run again; no more calls go to this endpoint in "
        f"this run ({detail})"
    )


def is_quota(code: object) -> bool:
    return isinstance(code, str) and (code in QUOTA_CODES or code.endswith("_spend_limit_exceeded"))


def error_code(raw: bytes) -> str | None:
    """`error.code` (else `error.type`) of an OpenAI-shaped error body; None when it has neither."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None
    for name in ("code", "type"):
        if isinstance(error.get(name), str):
            return str(error[name])
    return None


class MalformedResponse(Exception):
    """A 2xx body that is not a chat completion (not JSON, no choices, cut short)."""


_MISSING_KEY = re.compile(r"(?i)missing credentials|api[_ ]key (?:is )?(?:not set|missing|required)")
_TIMEOUT_NAMES = frozenset({"Timeout", "APITimeoutError", "TimeoutError", "ServerTimeoutError"})
_CONNECTION_NAMES = frozenset({"APIConnectionError"})
_MALFORMED_NAMES = frozenset({"JSONDecodeError", "APIResponseValidationError", "ClientPayloadError"})
# How far down __cause__ / __context__ to look: litellm wraps openai's error, which wraps httpx's, which
# wraps aiohttp's; the real fault is 3-5 links down.
_MAX_CHAIN = 8


def classify(error_or_status: int | BaseException, headers: Mapping[str, str] | None = None) -> RetryDecision:
    """Decide whether a failed attempt is retried, what kind of failure it is, and any server-given wait."""
    if isinstance(error_or_status, int):
        return _classify_status(error_or_status, headers or {})
    if getattr(error_or_status, "status_code", None) == 429 and any(
        is_quota(c) for c in _codes(error_or_status)
    ):
        return RetryDecision(False, "quota")
    if _status_of(error_or_status) == 400 and _NO_CREDIT.search(str(error_or_status)):
        return RetryDecision(False, "quota")  # Anthropic's: no wait fixes it either
    err = error_or_status
    # Order matters: LiteLLM's Timeout and APIConnectionError also carry a status_code (408 / 500), and
    # LiteLLM reports a body that is not JSON or a dropped connection as a 500 InternalServerError whose
    # cause chain holds the real fault; a genuine 5xx has an HTTP status error there instead.
    link: BaseException | None = err
    for _ in range(_MAX_CHAIN):
        if link is None:
            break
        transport = _transport_kind(link)
        if transport is not None:
            return RetryDecision(True, transport, sent=not never_sent(err))
        link = link.__cause__ or link.__context__
    if _MISSING_KEY.search(str(err)):
        # litellm reports a missing key as a 500 before sending anything: a config fault, not the server's.
        return RetryDecision(False, "auth")
    status = _status_of(err)
    if isinstance(status, int):
        if 400 <= status < 500 and status not in (401, 403, 404, 408, 429) and overflow_in(str(err)):
            return RetryDecision(False, "context_length")  # the same prompt would overflow again
        return _classify_status(status, _headers_of(err) if headers is None else headers)
    if isinstance(err, (OSError, *_aiohttp_errors("ClientError"))):
        return RetryDecision(True, "connection", sent=not never_sent(err))
    return RetryDecision(False, "other")


# Raised only while a connection is being made, before any byte of a request is written. httpx's own
# ConnectError is not among them: LiteLLM's aiohttp transport raises it for a reset after the request
# was sent too; the transport's error beneath it (aiohttp's or httpcore's) says which it was.
_CONNECTING_NAMES = frozenset({("httpcore", "ConnectError"), ("httpcore", "ConnectTimeout")})


def never_sent(err: BaseException) -> bool:
    """Whether `err`, or an error down its cause chain, says the connection was never made: refused,
    a name that does not resolve, a TLS handshake or a connect that failed (aiohttp's
    ClientConnectorError covers the last three, its ConnectionTimeoutError a connect's timeout)."""
    connecting: tuple[type[BaseException], ...] = (
        ConnectionRefusedError,
        socket.gaierror,
        *_aiohttp_errors("ClientConnectorError", "ConnectionTimeoutError"),
    )
    link: BaseException | None = err
    for _ in range(_MAX_CHAIN):
        if link is None:
            return False
        where = (type(link).__module__.partition(".")[0], type(link).__name__)
        if isinstance(link, connecting) or where in _CONNECTING_NAMES:
            return True
        link = link.__cause__ or link.__context__
    return False


def _codes(err: BaseException) -> list[object]:
    """The provider's names for an error: ours (HttpStatusError.code), openai's (`code`, `type`, and
    `body`'s), LiteLLM's (which wraps openai's as __cause__ or keeps its `body`)."""
    out: list[object] = []
    link: BaseException | None = err
    for _ in range(_MAX_CHAIN):
        if link is None:
            break
        out += [getattr(link, "code", None), getattr(link, "type", None)]
        body = getattr(link, "body", None)
        inner = body.get("error", body) if isinstance(body, dict) else None
        if isinstance(inner, dict):
            out += [inner.get("code"), inner.get("type")]
        link = link.__cause__ or link.__context__
    return out


def _status_of(err: BaseException) -> object:
    status = getattr(err, "status_code", None)
    return status if isinstance(status, int) else getattr(err, "status", None)  # aiohttp.ClientResponseError


def _aiohttp_errors(*names: str) -> tuple[type[BaseException], ...]:
    """aiohttp's exception classes, when aiohttp is loaded: if it is not, none of its errors can exist
    (aiohttp costs about 0.15 s to import, which a run that sends nothing need not pay). A name an
    older aiohttp lacks is left out."""
    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is None:
        return ()
    return tuple(found for n in names if (found := getattr(aiohttp, n, None)) is not None)


def _transport_kind(err: BaseException) -> ErrorKind | None:
    """timeout / malformed / connection when `err` itself is that kind of failure, else None."""
    names = {cls.__name__ for cls in type(err).__mro__}
    if names & _TIMEOUT_NAMES or isinstance(err, TimeoutError | asyncio.TimeoutError):
        return "timeout"
    malformed: tuple[type[BaseException], ...] = (
        MalformedResponse,
        orjson.JSONDecodeError,
        *_aiohttp_errors("ClientPayloadError"),
    )
    if isinstance(err, malformed) or names & _MALFORMED_NAMES:
        return "malformed"
    connection: tuple[type[BaseException], ...] = (ConnectionError, *_aiohttp_errors("ClientConnectionError"))
    if names & _CONNECTION_NAMES or isinstance(err, connection):
        return "connection"
    return None


def _headers_of(err: BaseException) -> Mapping[str, str]:
    for attr in ("headers", "litellm_response_headers"):
        value = getattr(err, attr, None)
        if isinstance(value, Mapping) and value:
            return value
    response = getattr(err, "response", None)
    value = getattr(response, "headers", None)
    return value if isinstance(value, Mapping) else {}


def _classify_status(status: int, headers: Mapping[str, str]) -> RetryDecision:
    if status == 429:
        return RetryDecision(True, "rate_limit", retry_after_s(headers, rate_limited=True))
    if status >= 500:
        return RetryDecision(True, "server", retry_after_s(headers))
    if status == 408:
        return RetryDecision(True, "timeout", retry_after_s(headers))
    if status in (401, 403):
        return RetryDecision(False, "auth")
    if status == 404:
        return RetryDecision(False, "not_found")
    if 400 <= status < 500:
        return RetryDecision(False, "bad_request")
    return RetryDecision(False, "other")


def header(headers: Mapping[str, str], name: str) -> str | None:
    """Get a header by its lowercase name: aiohttp's CIMultiDict ignores case itself, LiteLLM's dicts
    are lowercase already, and any other mapping is searched without case."""
    value = headers.get(name)
    if value is not None or isinstance(headers, CIMultiDictProxy | CIMultiDict):
        return value
    for key, candidate in headers.items():
        if key.lower() == name:
            return candidate
    return None


def retry_after_s(headers: Mapping[str, str], *, rate_limited: bool = False) -> float | None:
    """The wait a server asked for: retry-after-ms, Retry-After (seconds or HTTP date), or on a 429 the
    x-ratelimit-reset-* of the exhausted window."""
    ms = header(headers, "retry-after-ms")
    if ms is not None:
        seconds = _float(ms)
        if seconds is not None:
            return max(0.0, seconds / 1000.0)
    value = header(headers, "retry-after")
    if value is not None:
        seconds = _float(value)
        if seconds is None:
            seconds = _http_date_delay(value)
        if seconds is not None:
            return max(0.0, seconds)
    if not rate_limited:
        return None
    resets: list[float] = []
    exhausted: list[float] = []
    for window in ("requests", "tokens"):
        reset = header(headers, f"x-ratelimit-reset-{window}")
        seconds = parse_duration(reset) if reset is not None else None
        if seconds is None:
            continue
        resets.append(seconds)
        if header(headers, f"x-ratelimit-remaining-{window}") == "0":
            exhausted.append(seconds)
    if exhausted:
        return max(exhausted)
    return max(resets) if resets else None


def _float(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None


def _http_date_delay(text: str) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return when.timestamp() - time.time()


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_duration(text: str) -> float | None:
    """OpenAI-style reset durations ("1s", "6m0s", "20ms", "1h2m3.5s") or a bare number of seconds."""
    text = text.strip()
    plain = _float(text)
    if plain is not None:
        return plain
    total = 0.0
    pos = 0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            return None
        value, unit = float(match.group(1)), match.group(2)
        total += value * {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}[unit]
        pos = match.end()
    return total if pos == len(text) and pos > 0 else None
