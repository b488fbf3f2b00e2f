"""classify and the back-off policy, with constructed errors and responses (no network)."""

from __future__ import annotations

import email.utils
import time

import aiohttp
import orjson
import pytest

from ifsweep.providers.send.retry import (
    HttpStatusError,
    MalformedResponse,
    RetryDecision,
    RetryPolicy,
    classify,
    parse_duration,
    retry_after_s,
)


@pytest.mark.parametrize(
    ("status", "retry", "kind"),
    [
        (429, True, "rate_limit"),
        (500, True, "server"),
        (502, True, "server"),
        (503, True, "server"),
        (529, True, "server"),
        (408, True, "timeout"),
        (400, False, "bad_request"),
        (422, False, "bad_request"),
        (401, False, "auth"),
        (403, False, "auth"),
        (404, False, "not_found"),
    ],
)
def test_status_codes(status: int, retry: bool, kind: str) -> None:
    decision = classify(status)
    assert (decision.retry, decision.kind) == (retry, kind)
    assert classify(HttpStatusError(status, {}, "x")) == decision


def test_retry_after_seconds_ms_and_date() -> None:
    assert classify(429, {"Retry-After": "7"}) == RetryDecision(True, "rate_limit", 7.0)
    # retry-after-ms is more precise and wins
    assert classify(429, {"retry-after": "1", "retry-after-ms": "250"}).retry_after_s == 0.25
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    wait = classify(429, {"retry-after": date}).retry_after_s
    assert wait is not None and 25 < wait <= 31
    assert classify(503, {"retry-after": "2"}).retry_after_s == 2.0
    assert classify(429, {}).retry_after_s is None
    assert classify(429, {"retry-after": "soon"}).retry_after_s is None


def test_ratelimit_reset_headers_on_429() -> None:
    headers = {
        "x-ratelimit-remaining-requests": "10",
        "x-ratelimit-reset-requests": "1s",
        "x-ratelimit-remaining-tokens": "0",
        "x-ratelimit-reset-tokens": "6m0s",
    }
    # the exhausted window (tokens) decides, not the longest or the first
    assert retry_after_s(headers, rate_limited=True) == 360.0
    assert retry_after_s({**headers, "x-ratelimit-remaining-tokens": "5"}, rate_limited=True) == 360.0
    assert retry_after_s(headers) is None  # reset headers come on every answer: only a 429 obeys them


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1.0), ("20ms", 0.02), ("6m0s", 360.0), ("1h2m3.5s", 3723.5), ("0.5", 0.5), ("2", 2.0)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "abc", "1x", "s1", "1s garbage"])
def test_parse_duration_rejects(text: str) -> None:
    assert parse_duration(text) is None


def test_exceptions() -> None:
    assert classify(TimeoutError()) == RetryDecision(True, "timeout")
    assert classify(aiohttp.ServerDisconnectedError()) == RetryDecision(True, "connection")
    assert classify(ConnectionResetError()) == RetryDecision(True, "connection")
    assert classify(aiohttp.ClientPayloadError("cut")) == RetryDecision(True, "malformed")
    assert classify(MalformedResponse("no choices")) == RetryDecision(True, "malformed")
    try:
        orjson.loads(b"{")
    except orjson.JSONDecodeError as exc:
        assert classify(exc) == RetryDecision(True, "malformed")
    assert classify(ValueError("bug")) == RetryDecision(False, "other")


def test_litellm_shaped_exceptions_by_duck_typing() -> None:
    class RateLimitError(Exception):
        status_code = 429
        litellm_response_headers = {"retry-after": "3"}  # noqa: RUF012

    class APIConnectionError(Exception):
        status_code = 500

    class Timeout(Exception):
        status_code = 408

    class NotFoundError(Exception):
        status_code = 404

    assert classify(RateLimitError()) == RetryDecision(True, "rate_limit", 3.0)
    assert classify(APIConnectionError()) == RetryDecision(True, "connection")
    assert classify(Timeout()) == RetryDecision(True, "timeout")
    assert classify(NotFoundError()) == RetryDecision(False, "not_found")


def test_full_jitter_is_capped_and_seeded() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=4.0, seed=7)
    rng = policy.rng()
    delays = [policy.delay_s(n, rng) for n in range(1, 40)]
    assert all(0.0 <= d <= 4.0 for d in delays)
    assert all(d <= 0.5 * 2 ** (n - 1) for n, d in zip(range(1, 5), delays, strict=False))
    assert max(delays) > 2.0  # late attempts reach near the cap
    rng2 = policy.rng()
    assert delays == [policy.delay_s(n, rng2) for n in range(1, 40)]


def test_policy_validates() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
