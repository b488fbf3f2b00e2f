"""Shrinking a failing seed: drop parts while the failure persists, whole classes first (every fault,
every kill, ...), then one part at a time, within a budget of runs."""

from __future__ import annotations

from collections.abc import Callable

from _chaos.scenario import Scenario


def invariants(violations: list[str]) -> set[str]:
    """The invariants a run broke (the name before the colon of each violation)."""
    return {v.split(":", 1)[0] for v in violations}


def shrink(s: Scenario, violations: list[str], run: Callable[[Scenario], list[str]], budget: int) -> Scenario:
    """The smallest scenario found that still breaks one of the invariants `s` broke."""
    broken = invariants(violations)
    runs = 0

    def still_fails(t: Scenario) -> bool:
        nonlocal runs
        runs += 1
        return bool(invariants(run(t)) & broken)

    for group in _groups(s):
        if runs >= budget:
            return s
        if group and still_fails(s.without(group)):
            s = s.without(group)
    for part in s.components():
        if runs >= budget:
            break
        if part not in s.dropped and still_fails(s.without([part])):
            s = s.without([part])
    return s


def _groups(s: Scenario) -> list[list[str]]:
    parts = s.components()
    prefixes = ("fault:", "kill:", "edit:", "probe:", "cap:", "batch:", "option:", "model:", "bench:")
    return [[p for p in parts if p.startswith(prefix)] for prefix in prefixes]
