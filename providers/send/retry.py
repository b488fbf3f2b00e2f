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
    retry: bool
    kind: ErrorKind
    retry_after_s: float | None = None


class HttpStatusError(Exception):
    """A non-2xx answer on the fast path; carries what `classify` needs."""

    def __init__(self, status_code: int, headers: Mapping[str, str], message: str) -> None:
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code = status_code
        self.headers = headers
        self.message = message


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
            return RetryDecision(True, transport)
        link = link.__cause__ or link.__context__
    if _MISSING_KEY.search(str(err)):
        # litellm reports a missing key as a 500 before sending anything: a config fault, not the server's.
        return RetryDecision(False, "auth")
    status = getattr(err, "status_code", None)
    if not isinstance(status, int):
        status = getattr(err, "status", None)  # aiohttp.ClientResponseError
    if isinstance(status, int):
        if 400 <= status < 500 and status not in (401, 403, 404, 408, 429) and overflow_in(str(err)):
            return RetryDecision(False, "context_length")  # the same prompt would overflow again
        return _classify_status(status, _headers_of(err) if headers is None else headers)
    if isinstance(err, (OSError, *_aiohttp_errors("ClientError"))):
        return RetryDecision(True, "connection")
    return RetryDecision(False, "other")


def _aiohttp_errors(*names: str) -> tuple[type[BaseException], ...]:
    """aiohttp's exception classes, when aiohttp is loaded: if it is not, none of its errors can exist
    (aiohttp costs about 0.15 s to import, which a run that sends nothing need not pay)."""
    aiohttp = sys.modules.get("aiohttp")
    return tuple(getattr(aiohttp, n) for n in names) if aiohttp is not None else ()


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
