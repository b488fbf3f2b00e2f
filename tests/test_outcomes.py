"""runner/watch/outcomes.py on records as the store holds them: each pair in error counted once, with the
reason that explains it; spend per (model, benchmark) with the judge's part."""

from __future__ import annotations

from typing import Any

from ifsweep.runner.watch.outcomes import ErrorTally, SpendTally, errors_message


def gen(key: str, inst: str, error: str | None = None, cost: float = 0.0) -> dict[str, Any]:
    return {
        "kind": "generation",
        "key": key,
        "model": "m",
        "benchmark": "b",
        "instance_id": inst,
        "status": "error" if error else "ok",
        "error_kind": error,
        "cost_usd": cost,
    }


def judgment(key: str, inst: str, error: str | None = None, cost: float = 0.0) -> dict[str, Any]:
    return gen(key, inst, error, cost) | {"kind": "judgment", "judge": "j"}


def verdict(key: str, inst: str, gen_key: str, error: bool) -> dict[str, Any]:
    rows = [{"status": "error" if error else "ok"}]
    return {"kind": "verdict", "key": key, "model": "m", "benchmark": "b", "instance_id": inst,
            "gen_key": gen_key, "status": "error" if error else "ok", "rows": rows}  # fmt: skip


def test_each_pair_in_error_once_with_its_reason() -> None:
    t = ErrorTally()
    for rec in (
        gen("a1", "1", "context_length"),
        verdict("v1", "1", "a1", error=True),
        # A panel: two verdicts of one pair, both in error from their judges' calls.
        gen("a2", "2"),
        judgment("j2", "2", "timeout"),
        verdict("v2x", "2", "a2", error=True),
        verdict("v2y", "2", "a2", error=True),
        # An error, then the retry that succeeded: not in error any more.
        gen("a3", "3", "server"),
        verdict("v3", "3", "a3", error=True),
        gen("a3", "3"),
        verdict("v3", "3", "a3", error=False),
        # A later stale error never replaces a success.
        gen("a4", "4"),
        verdict("v4", "4", "a4", error=False),
        verdict("v4", "4", "a4", error=True),
    ):
        t.add(rec)
    assert t.by_kind() == {"context_length": 1, "judge:timeout": 1}
    assert t.by_kind(lambda pair, _judge: pair[2] == "2") == {"judge:timeout": 1}
    assert errors_message(2, t.by_kind()) == (
        "2 pairs ended in error (context_length: 1, judge:timeout: 1); run again to retry them"
    )


def test_spend_per_group_with_the_judges_part() -> None:
    s = SpendTally()
    for rec in (gen("a", "1", cost=0.25), gen("a", "1", cost=0.5), judgment("j", "1", cost=0.125)):
        s.add(rec)
    s.add(verdict("v", "1", "a", error=False))  # verdicts cost nothing
    assert s.fields(("m", "b")) == {
        "spent_usd": 0.875,
        "judge_usd": 0.125,
        "input_tokens": 0,
        "cached_tokens": 0,
        "cache_saved_usd": 0.0,
    }
    s.add(
        judgment("k", "1", cost=0.0) | {"input_tokens": 3000, "cached_tokens": 2048, "cache_saved_usd": 0.01}
    )
    assert s.fields(("m", "b"))["input_tokens"] == 3000
    assert s.fields(("m", "b"))["cached_tokens"] == 2048
    assert s.fields(("m", "b"))["cache_saved_usd"] == 0.01
    assert s.fields(("other", "b"))["spent_usd"] == 0.0
