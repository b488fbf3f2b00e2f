"""Dollar caps: reserve the worst case before a call, settle to the actual cost after.

All mutation happens without an await in between, so on one event loop every reserve/settle is atomic
and concurrent calls can never jointly overshoot a cap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from providers.records import BudgetExhausted

SWEEP_SCOPE = "sweep"
# Float sums drift; without slack a reservation that exactly fills a cap could be refused.
_EPS = 1e-12


@dataclass(slots=True)
class _Scope:
    cap_usd: float | None
    spent_usd: float = 0.0
    reserved_usd: float = 0.0

    def fits(self, amount: float) -> bool:
        return self.cap_usd is None or self.spent_usd + self.reserved_usd + amount <= self.cap_usd + _EPS


@dataclass(frozen=True, slots=True)
class Reservation:
    labels: tuple[str, ...]
    amount_usd: float


class Budget:
    """The sweep cap plus optional per-label caps (one label per configured model)."""

    def __init__(self, max_usd: float | None, *, spent_usd: float = 0.0) -> None:
        _check_cap(SWEEP_SCOPE, max_usd, spent_usd)
        self._sweep = _Scope(max_usd, spent_usd)
        self._labels: dict[str, _Scope] = {}
        self._exhausted = False

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
        return self._sweep.spent_usd

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
        scope = self._labels.get(label)
        return scope.spent_usd if scope else 0.0

    def has_cap(self, label: str) -> bool:
        scope = self._labels.get(label)
        return self._sweep.cap_usd is not None or (scope is not None and scope.cap_usd is not None)

    def reserve(self, labels: Sequence[str], amount_usd: float) -> Reservation:
        """Hold `amount_usd` against the sweep and every label, or raise BudgetExhausted holding nothing."""
        if amount_usd < 0:
            raise ValueError(f"reservation must be >= 0, got {amount_usd}")
        scopes = [(SWEEP_SCOPE, self._sweep)]
        for label in labels:
            scopes.append((label, self._labels.setdefault(label, _Scope(None))))
        for name, scope in scopes:
            if not scope.fits(amount_usd):
                self._exhausted = True
                assert scope.cap_usd is not None
                raise BudgetExhausted(name, scope.cap_usd, amount_usd)
        for _, scope in scopes:
            scope.reserved_usd += amount_usd
        return Reservation(tuple(labels), amount_usd)

    def settle(self, reservation: Reservation, actual_usd: float) -> None:
        """Release the hold and record what the call really cost (0.0 when nothing was billed)."""
        for scope in (self._sweep, *(self._labels[label] for label in reservation.labels)):
            scope.reserved_usd = max(0.0, scope.reserved_usd - reservation.amount_usd)
            scope.spent_usd += actual_usd


def _check_cap(name: str, max_usd: float | None, spent_usd: float) -> None:
    if max_usd is not None and max_usd < 0:
        raise ValueError(f"budget cap for {name} must be >= 0, got {max_usd}")
    if spent_usd < 0:
        raise ValueError(f"spent_usd for {name} must be >= 0, got {spent_usd}")
