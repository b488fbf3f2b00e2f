"""Dollar caps: reserve the worst case before a call, settle to the actual cost after.

All mutation happens without an await in between, so on one event loop every reserve/settle is atomic
and concurrent calls can never jointly overshoot a cap. With a shared ledger (a coordinator's, see
providers/coord/interfaces.py) the caps are checked there instead, against what every process of the sweep
spent and holds; this process's own figures are still kept here.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ifsweep.providers.coord.interfaces import SharedLedger
from ifsweep.providers.records import BudgetExhausted

SWEEP_SCOPE = "sweep"
# Float sums drift; without slack a reservation that exactly fills a cap could be refused.
_EPS = 1e-12


@dataclass(slots=True)
class _Scope:
    cap_usd: float | None
    spent_usd: float = 0.0
    reserved_usd: float = 0.0
    held: int = 0  # reservations outstanding: float sums of holds need not return to exactly 0.0

    def fits(self, amount: float) -> bool:
        return self.cap_usd is None or self.spent_usd + self.reserved_usd + amount <= self.cap_usd + _EPS


@dataclass(frozen=True, slots=True)
class Reservation:
    """Dollars held for one call. `settle` never records more than `amount_usd`: a call that may cost
    more (a retry after an attempt that may have been billed) must `grow` its reservation first."""

    labels: tuple[str, ...]
    amount_usd: float
    tokens: tuple[int, ...] = ()  # names its holds in a shared ledger (one per grow)
    parts: int = 1  # holds it is made of (each counts in the scopes' `held`)


class IntentLog(Protocol):
    """Where a capped call says, durably, that it is about to be sent (runner/store/intents.py): a
    process killed with the call in flight leaves the intent, and the next run charges its worst case."""

    async def intend(self, label: str, worst_usd: float, key: str | None) -> str:
        """Record the intent and return its id once it is committed (the send waits for that)."""
        ...


class Budget:
    """The sweep cap plus optional per-label caps (one label per configured model)."""

    def __init__(
        self, max_usd: float | None, *, spent_usd: float = 0.0, shared: SharedLedger | None = None
    ) -> None:
        _check_cap(SWEEP_SCOPE, max_usd, spent_usd)
        self._sweep = _Scope(max_usd, spent_usd)
        self._labels: dict[str, _Scope] = {}
        self._exhausted = False
        self._settled: asyncio.Event | None = None  # set (and replaced) on every settle
        self._shared = shared
        self._tokens = itertools.count(1)
        self._retrying: asyncio.Lock | None = None  # shared ledger: one refused reservation asks again
        # Of what this process spent: the worst case of calls whose bill is unknown (cancelled in
        # flight), and that of calls recorded only by an intent (killed runs, runner/store/intents.py).
        self.worst_case_usd = 0.0

    def add_scope(self, label: str, max_usd: float | None, *, spent_usd: float = 0.0) -> None:
        """Cap one label (None = track only). `spent_usd` is what earlier runs already spent (resume)."""
        _check_cap(label, max_usd, spent_usd)
        scope = self._labels.get(label)
        if scope is None:
            self._labels[label] = _Scope(max_usd, spent_usd)
        else:
            scope.cap_usd = max_usd
            scope.spent_usd = max(scope.spent_usd, spent_usd)

    @property
    def spent_usd(self) -> float:
        """Spent in the sweep so far; with a shared ledger, by every process (as last seen)."""
        shared = self._shared.spent(SWEEP_SCOPE) if self._shared is not None else None
        return self._sweep.spent_usd if shared is None else shared

    @property
    def reserved_usd(self) -> float:
        return self._sweep.reserved_usd

    @property
    def max_usd(self) -> float | None:
        return self._sweep.cap_usd

    @property
    def exhausted(self) -> bool:
        """True once any reservation was refused."""
        return self._exhausted

    def spent_by(self, label: str) -> float:
        shared = self._shared.spent(label) if self._shared is not None else None
        if shared is not None:
            return shared
        scope = self._labels.get(label)
        return scope.spent_usd if scope else 0.0

    def has_cap(self, label: str) -> bool:
        scope = self._labels.get(label)
        return self._sweep.cap_usd is not None or (scope is not None and scope.cap_usd is not None)

    def reserve(self, labels: Sequence[str], amount_usd: float) -> Reservation:
        """Hold `amount_usd` against the sweep and every label, or raise BudgetExhausted holding nothing."""
        blocked = self._blocked(labels, amount_usd)
        if blocked is not None:
            self._exhausted = True
            raise blocked
        return self._hold(labels, amount_usd)

    async def reserve_when_settled(self, labels: Sequence[str], amount_usd: float) -> Reservation:
        """Like `reserve`, but a refusal caused partly by other calls' worst-case holds waits for them to
        settle (they usually cost far less than their worst case) and tries again. Raises BudgetExhausted
        only when the call cannot fit even with nothing else in flight, so a sweep stopped by its cap has
        spent close to the cap rather than a cap minus every in-flight call's worst case."""
        if self._shared is not None:
            return await self._reserve_shared(self._shared, labels, amount_usd)
        while True:
            blocked = self._blocked(labels, amount_usd)
            if blocked is None:
                return self._hold(labels, amount_usd)
            if self._scope(blocked.scope).held == 0:
                self._exhausted = True
                raise blocked
            if self._settled is None:
                self._settled = asyncio.Event()
            await self._settled.wait()

    async def _reserve_shared(
        self, shared: SharedLedger, labels: Sequence[str], amount_usd: float, *, wait: bool = True
    ) -> Reservation:
        """`reserve_when_settled` against the shared ledger: the same rule, over every process
        (`wait=False`: `reserve`'s, refused at once)."""
        if amount_usd < 0:
            raise ValueError(f"reservation must be >= 0, got {amount_usd}")
        scopes = [self._labels.setdefault(label, _Scope(None)) for label in labels]
        caps = [(SWEEP_SCOPE, self._sweep.cap_usd), *zip(labels, (s.cap_usd for s in scopes), strict=True)]
        token = next(self._tokens)
        verdict = await shared.reserve(token, caps, amount_usd)
        if not verdict.granted and not wait:
            self._exhausted = True
            cap = dict(caps)[verdict.scope]
            raise BudgetExhausted(verdict.scope, cap if cap is not None else 0.0, amount_usd)
        if not verdict.granted:
            # Refused calls queue here, so a process asks the ledger again once per change, not once
            # per waiting call. Asked afresh once in front: much may have changed while queued.
            self._retrying = self._retrying or asyncio.Lock()
            async with self._retrying:
                await self._retry_shared(shared, token, caps, amount_usd)
        return self._hold(labels, amount_usd, (token,))

    async def grow(self, reservation: Reservation, extra_usd: float) -> Reservation:
        """`reservation` holding `extra_usd` more, or raise BudgetExhausted with `reservation` still held
        as it was. It never waits for other calls to settle: two calls each holding a share and each
        waiting for the other's would wait forever."""
        if self._shared is None:
            more = self.reserve(reservation.labels, extra_usd)
        else:
            more = await self._reserve_shared(self._shared, reservation.labels, extra_usd, wait=False)
        return Reservation(
            reservation.labels,
            reservation.amount_usd + more.amount_usd,
            reservation.tokens + more.tokens,
            reservation.parts + more.parts,
        )

    async def _retry_shared(
        self, shared: SharedLedger, token: int, caps: Sequence[tuple[str, float | None]], amount_usd: float
    ) -> None:
        while not (verdict := await shared.reserve(token, caps, amount_usd)).granted:
            if not verdict.others_hold:
                self._exhausted = True
                cap = dict(caps)[verdict.scope]
                raise BudgetExhausted(verdict.scope, cap if cap is not None else 0.0, amount_usd)
            await shared.changed()

    def _scope(self, name: str) -> _Scope:
        return self._sweep if name == SWEEP_SCOPE else self._labels[name]

    def _blocked(self, labels: Sequence[str], amount_usd: float) -> BudgetExhausted | None:
        if amount_usd < 0:
            raise ValueError(f"reservation must be >= 0, got {amount_usd}")
        if not self._sweep.fits(amount_usd):
            assert self._sweep.cap_usd is not None
            return BudgetExhausted(SWEEP_SCOPE, self._sweep.cap_usd, amount_usd)
        for label in labels:
            scope = self._labels.setdefault(label, _Scope(None))
            if not scope.fits(amount_usd):
                assert scope.cap_usd is not None
                return BudgetExhausted(label, scope.cap_usd, amount_usd)
        return None

    def _hold(self, labels: Sequence[str], amount_usd: float, tokens: tuple[int, ...] = ()) -> Reservation:
        for scope in (self._sweep, *(self._labels[label] for label in labels)):
            scope.reserved_usd += amount_usd
            scope.held += 1
        return Reservation(tuple(labels), amount_usd, tokens)

    def settle(self, reservation: Reservation, actual_usd: float, *, worst_case_usd: float = 0.0) -> float:
        """Release the hold and record what the call cost (0.0 when nothing was billed), never more than
        it held: returns the part of `actual_usd` above the hold (a provider's usage above our estimate
        of the prompt), which is not recorded. `worst_case_usd`: of `actual_usd`, the worst case charged
        for attempts whose bill is unknown (cancelled in flight, cut off), counted apart as well."""
        if actual_usd < 0:
            raise ValueError(f"a call cannot cost {actual_usd} < 0")
        charged = min(actual_usd, reservation.amount_usd)
        for scope in (self._sweep, *(self._labels[label] for label in reservation.labels)):
            scope.held -= reservation.parts
            scope.reserved_usd = max(0.0, scope.reserved_usd - reservation.amount_usd) if scope.held else 0.0
            scope.spent_usd += charged
        self.worst_case_usd += min(worst_case_usd, charged)
        if self._shared is not None:
            self._shared.settle(reservation.tokens, (SWEEP_SCOPE, *reservation.labels), charged)
        self._wake()
        return actual_usd - charged

    def charge(self, labels: Sequence[str], usd: float, *, worst_case_usd: float = 0.0) -> None:
        """Record `usd` the provider billed without a hold of ours to settle: all of it, past a cap too
        (a batch found open at start was committed by an earlier run; a cap can refuse it nothing, and
        a spend that left it out would let the next calls pass the cap). `worst_case_usd` as in settle."""
        if usd < 0:
            raise ValueError(f"a call cannot cost {usd} < 0")
        for scope in (self._sweep, *(self._labels.setdefault(label, _Scope(None)) for label in labels)):
            scope.spent_usd += usd
        self.worst_case_usd += min(worst_case_usd, usd)
        if self._shared is not None:
            self._shared.settle((), (SWEEP_SCOPE, *labels), usd)  # no hold: the ledger takes it whole
        self._wake()

    def _wake(self) -> None:
        if self._settled is not None:
            self._settled.set()
            self._settled = None


def _check_cap(name: str, max_usd: float | None, spent_usd: float) -> None:
    if max_usd is not None and max_usd < 0:
        raise ValueError(f"budget cap for {name} must be >= 0, got {max_usd}")
    if spent_usd < 0:
        raise ValueError(f"spent_usd for {name} must be >= 0, got {spent_usd}")
