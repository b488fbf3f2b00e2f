"""Budget: reservations against the sweep cap and per-label caps."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ifsweep.providers.budget import Budget
from ifsweep.providers.records import BudgetExhausted


def test_reserve_settle_and_refuse() -> None:
    budget = Budget(1.0)
    first = budget.reserve(["a"], 0.6)
    assert budget.reserved_usd == pytest.approx(0.6)
    with pytest.raises(BudgetExhausted) as info:
        budget.reserve(["a"], 0.5)
    assert info.value.scope == "sweep" and info.value.cap_usd == 1.0
    assert budget.exhausted
    budget.settle(first, 0.1)  # the call cost less than its worst case
    assert budget.spent_usd == pytest.approx(0.1)
    assert budget.spent_by("a") == pytest.approx(0.1)
    assert budget.reserved_usd == 0.0
    second = budget.reserve(["a"], 0.5)  # now fits
    budget.settle(second, 0.5)
    assert budget.spent_usd == pytest.approx(0.6)


def test_label_cap_and_resume() -> None:
    budget = Budget(None)
    budget.add_scope("m1", 0.10, spent_usd=0.08)
    assert budget.has_cap("m1") and not budget.has_cap("m2")
    with pytest.raises(BudgetExhausted) as info:
        budget.reserve(["m1"], 0.05)
    assert info.value.scope == "m1"
    assert budget.reserved_usd == 0.0  # a refused reservation holds nothing anywhere
    res = budget.reserve(["m2"], 100.0)  # uncapped label, uncapped sweep
    budget.settle(res, 3.0)
    assert budget.spent_by("m2") == 3.0 and budget.spent_usd == 3.0


def test_exact_fit_is_allowed() -> None:
    budget = Budget(0.3)
    for _ in range(3):
        budget.settle(budget.reserve([], 0.1), 0.1)
    assert budget.spent_usd == pytest.approx(0.3)
    with pytest.raises(BudgetExhausted):
        budget.reserve([], 1e-6)


def test_bad_caps() -> None:
    with pytest.raises(ValueError, match="sweep"):
        Budget(-1.0)
    with pytest.raises(ValueError, match="m1"):
        Budget(1.0).add_scope("m1", 1.0, spent_usd=-2)


@given(
    cap=st.floats(0.0, 10.0),
    ops=st.lists(st.tuples(st.floats(0.0, 3.0), st.floats(0.0, 1.0), st.booleans()), max_size=60),
)
def test_spent_never_exceeds_cap_when_calls_cost_at_most_their_reservation(
    cap: float, ops: list[tuple[float, float, bool]]
) -> None:
    budget = Budget(cap)
    held = []
    for amount, share, settle_now in ops:
        try:
            held.append((budget.reserve(["x"], amount), amount * share))
        except BudgetExhausted as exc:
            assert exc.needed_usd == amount
        if settle_now and held:
            res, actual = held.pop(0)
            budget.settle(res, actual)
        assert budget.spent_usd + budget.reserved_usd <= cap + 1e-9
    for res, actual in held:
        budget.settle(res, actual)
    assert budget.spent_usd <= cap + 1e-9
    assert budget.spent_usd == pytest.approx(budget.spent_by("x"))
    assert budget.reserved_usd == pytest.approx(0.0, abs=1e-9)


def test_a_call_never_settles_more_than_it_holds() -> None:
    """Issue 21 item 1's rule: settle records at most the hold; a call that may cost more grows its
    hold first (or is refused, still holding what it held)."""
    budget = Budget(1.0)
    held = budget.reserve(["a"], 0.4)
    assert budget.settle(held, 0.7) == pytest.approx(0.3)  # the excess is returned, not recorded
    assert budget.spent_usd == pytest.approx(0.4)

    async def grow() -> None:
        first = budget.reserve(["a"], 0.2)
        grown = await budget.grow(first, 0.2)
        assert grown.amount_usd == pytest.approx(0.4) and grown.parts == 2
        assert budget.reserved_usd == pytest.approx(0.4)
        with pytest.raises(BudgetExhausted):
            await budget.grow(grown, 0.3)  # 0.4 spent + 0.4 held + 0.3 > 1.0: refused at once
        assert budget.reserved_usd == pytest.approx(0.4)  # still held as it was
        budget.settle(grown, 0.4, worst_case_usd=0.2)
        assert budget.reserved_usd == 0.0 and budget.spent_usd == pytest.approx(0.8)
        assert budget.worst_case_usd == pytest.approx(0.2)

    anyio.run(grow)
