"""State that processes of one account share: what `EndpointLimiter` and `Budget` ask of it.

Without a coordinator each process keeps its own limits and budget (`limits.RequestPacer`,
`limits.TokenBucket`, `budget.Budget`'s scopes) and nothing here is used. With one, the arithmetic that
must hold across processes moves beneath those classes into a shared backend: the per-endpoint RPM and
TPM allowances (`SharedRates`) and the budget ledger (`SharedLedger`). The only backend is Redis
(`providers/coord/redis_state.py`); this module names what any backend must do, so the limiter and the
budget never import one. Design: docs/design/coordination.md.
"""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

Window = Literal["requests", "tokens"]
# The endpoint key the provider pool groups calls by: (provider, api_base, key variable, model).
EndpointKey = tuple[str, str | None, str | None, str]
ENV_VAR = "IFSWEEP_COORDINATOR"
# A process's reservations outlive it by at most this long (kill -9, a lost machine); it renews its
# lease several times within it while it runs.
DEFAULT_LEASE_S = 20.0
_SCHEMES = ("redis", "rediss", "unix")


class CoordinatorError(ValueError):
    """A coordinator that cannot be used: a bad URL, a missing client library, a server that never
    answered at start, or one that refuses our credentials. The message says which and how to fix it."""


@dataclass(frozen=True, slots=True)
class CoordinatorSettings:
    """`[run] coordinator`: where the shared state lives, and how long a dead process's holds last."""

    url: str  # for the client: our own options (lease_s) removed
    lease_s: float = DEFAULT_LEASE_S

    @property
    def display(self) -> str:
        """The URL without its password, for messages and summaries."""
        parts = urllib.parse.urlsplit(self.url)
        if parts.password is None:
            return self.url
        host = parts.netloc.rsplit("@", 1)[1]
        user = f"{parts.username}:" if parts.username else ":"
        return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}***@{host}"))


def parse_coordinator(text: str) -> CoordinatorSettings:
    """`redis://[user:password@]host:port/db`, `rediss://...` (TLS) or `unix:///path/redis.sock?db=0`,
    optionally with `?lease_s=N`. Raises ValueError naming what is wrong."""
    parts = urllib.parse.urlsplit(text.strip())
    if parts.scheme not in _SCHEMES:
        raise ValueError(f"{text!r}: expected a redis:// URL, e.g. 'redis://127.0.0.1:6379/0'")
    try:
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError as e:
        raise ValueError(f"{text!r}: {e}") from None
    if parts.scheme != "unix" and not parts.hostname:
        raise ValueError(f"{text!r}: no host, e.g. 'redis://127.0.0.1:6379/0'")
    if parts.scheme != "unix" and parts.path.strip("/") and not parts.path.strip("/").isdigit():
        raise ValueError(f"{text!r}: the path must be a database number, e.g. '/0'")
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    lease_s = DEFAULT_LEASE_S
    kept = []
    for name, value in query:
        if name == "lease_s":
            lease_s = _lease(text, value)
        elif name == "db" and parts.scheme == "unix" and value.isdigit():
            kept.append((name, value))
        else:
            raise ValueError(
                f"{text!r}: unknown option {name!r}; allowed: lease_s"
                + (", db" if parts.scheme == "unix" else "")
            )
    base = text.strip().split("?", 1)[0]  # not urlunsplit: it turns unix:///path into unix:/path
    url = f"{base}?{urllib.parse.urlencode(kept)}" if kept else base
    return CoordinatorSettings(url=url, lease_s=lease_s)


def _lease(text: str, value: str) -> float:
    try:
        lease = float(value)
    except ValueError:
        lease = math.nan
    if not math.isfinite(lease) or not 1.0 <= lease <= 3600.0:
        raise ValueError(f"{text!r}: lease_s must be a number of seconds in [1, 3600], got {value!r}")
    return lease


@dataclass(frozen=True, slots=True)
class RateGrant:
    """A booked slot: send after `wait_s`; `tokens` were taken from the shared TPM allowance.

    `rpm` and `tpm` are the limits the slot was booked under (configured here, or learned by any
    process); `learned` names the windows whose limit came from another process's headers."""

    wait_s: float
    tokens: int
    rpm: int | None
    tpm: int | None
    learned: tuple[Window, ...] = ()
    # Where the shared token bucket stood right after this booking (backend-specific), for `sync`.
    booked: tuple[float, float] = (0.0, 0.0)


class SharedRates(Protocol):
    """One endpoint's request and token allowances, shared by every process that calls it."""

    async def take(
        self,
        tokens: int,
        *,
        rpm: int | None,
        tpm: int | None,
        fallback: tuple[int | None, int | None],
        tpm_burst_s: float,
    ) -> RateGrant:
        """Book the earliest slot for one call of `tokens` under the configured `rpm` / `tpm` (None:
        not configured; then a limit learned by any process applies, else this process's `fallback`
        learned limits), with `tpm_burst_s` seconds of token burst (limits.TokenBucket's rule). Waits
        (without booking) while the backend is unreachable."""
        ...

    def refund(self, tokens: int, tpm: int) -> None:
        """Give back tokens a call reserved and did not use (sent in the background, best effort)."""
        ...

    def pause(self, seconds: float) -> None:
        """Hold every process's calls to this endpoint for `seconds` (a provider's Retry-After)."""
        ...

    def learn(self, window: Window, limit: int) -> None:
        """A limit the provider announced, for processes that have none configured."""
        ...

    def sync(self, remaining: int, per_minute: int, capacity: float, booked: tuple[float, float]) -> None:
        """The provider answered the call booked at `booked` (RateGrant.booked) saying `remaining`
        tokens are left: correct the shared token bucket (`capacity` at `per_minute`) so that it never
        holds more than the provider does (sent in the background)."""
        ...


@dataclass(frozen=True, slots=True)
class LedgerVerdict:
    """The answer to a reservation: granted, or refused by `scope`. `others_hold`: reservations are
    outstanding in that scope (in any process), so waiting for them to settle may let it fit."""

    granted: bool
    scope: str = ""
    others_hold: bool = False


class SharedLedger(Protocol):
    """The budget's spend and outstanding reservations, summed over every process of one sweep."""

    async def reserve(
        self, token: int, caps: Sequence[tuple[str, float | None]], amount_usd: float
    ) -> LedgerVerdict:
        """Hold `amount_usd` in every scope of `caps` ((scope, cap or None)) if it fits under every cap
        with what all processes spent and hold; `token` names the reservation (unique per process)."""
        ...

    def settle(self, tokens: Sequence[int], scopes: Sequence[str], actual_usd: float) -> None:
        """Release the reservations `tokens` (one call's) and add `actual_usd`, never more than they
        held, to this process's spend in `scopes`. Applied locally at once; sent in the background
        (never lost, never counted twice)."""
        ...

    async def changed(self) -> None:
        """Return when reservations may have been released anywhere (a settle, an expired lease)."""
        ...

    def spent(self, scope: str) -> float | None:
        """What every process of the sweep spent in `scope`, as last seen; None before any answer."""
        ...


class RateCoordinator(Protocol):
    """What the provider pool asks of a coordinator: one SharedRates per endpoint key."""

    def rates(self, endpoint: EndpointKey) -> SharedRates: ...


__all__ = [
    "DEFAULT_LEASE_S",
    "ENV_VAR",
    "CoordinatorError",
    "CoordinatorSettings",
    "EndpointKey",
    "LedgerVerdict",
    "RateCoordinator",
    "RateGrant",
    "SharedLedger",
    "SharedRates",
    "Window",
    "parse_coordinator",
]
