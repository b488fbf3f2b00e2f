"""One rule for a run's spend (issue 35): the sweep's per-record scan (runner/store/intents.py
SpendScan.add, what a resumed run's budget and the coordinator's baseline start from) and status's
per-part sums over the shards' digest (runner/watch/tallied.py every_record) give the same figures to
the last bit, on real shards of two writers, read as one part and as several."""

from __future__ import annotations

import time
from itertools import chain
from math import fsum
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ifsweep.runner.store.digest import scan_digest
from ifsweep.runner.store.intents import SPEND_KINDS, SpendScan, exact_terms, run_spend
from ifsweep.runner.store.shards import RunStore, record_key, scan_shards
from ifsweep.runner.watch.tallied import every_record


def _call(n: int, kind: str, cost: Any, **extra: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "v": 2,
        "kind": kind,
        "key": record_key((kind, n)),
        "status": "ok",
        "model": f"m{n % 3}",
        "benchmark": "followbench",
        "instance_id": str(n),
        "cost_usd": cost,
        "ts": 1.0 + n,
    }
    if kind == "judgment":
        rec["judge"] = "j"
    rec.update(extra)
    return rec


def _records(base: int) -> list[dict[str, Any]]:
    """Dollars whose sum depends on the order they are added in (0.1 ten times is not 1.0 added one
    by one), a judgment naming no judge, worst cases, a retried error, an intent resolved and one cut
    off, a cost that is not a number."""
    recs: list[dict[str, Any]] = []
    for n in range(base, base + 12):
        recs.append(_call(n, "generation", 0.1))
        recs.append(_call(n, "judgment", 0.1 + 1e-17 * n, worst_case_usd=0.01 if n % 5 == 0 else 0))
    recs.append(_call(base, "generation", 0.3, status="error"))  # superseded errors were paid too
    recs.append(_call(base + 100, "judgment", 0.7, judge=None))  # charged to no label
    recs.append(_call(base + 101, "generation", "0.5"))  # not a number: 0
    opened = [record_key(("intent", base, i)) for i in range(2)]
    for i, ident in enumerate(opened):
        recs.append({"v": 2, "kind": "intent", "key": ident, "label": "m1", "worst_usd": 0.25 + i, "ts": 1.0})
    recs.append(_call(base + 102, "generation", 0.05, intents=[opened[0]]))  # resolves the first
    return recs


def _per_record(run: Path) -> dict[str, SpendScan]:
    """The sweep's rule: every record through SpendScan.add, in shard order (as the coordinator reads it)."""
    spend = run_spend(run)
    for sl in scan_shards(run, kinds=SPEND_KINDS):
        spend.add(sl.file_no, sl.record())
    return spend.finish()


def _status(run: Path) -> dict[str, SpendScan]:
    parts, _ = scan_digest(run)
    return every_record(run, parts, time.time()).scans


def _figures(scans: dict[str, SpendScan]) -> dict[str, tuple[Any, ...]]:
    return {w: (s.total, dict(sorted(s.by.items())), s.worst_case, s.orphans) for w, s in scans.items()}


def test_the_sweeps_spend_and_status_spend_are_one_rule(tmp_path: Path) -> None:
    run = tmp_path / "run"
    for writer in ("p0of2", "p1of2"):
        with RunStore.open(run, writer_id=writer, fsync=False) as store:
            for rec in _records(0 if writer == "p0of2" else 1000):
                store.append(rec)
    first = _figures(_per_record(run))
    assert _figures(_status(run)) == first  # one digest part per shard, made by this reading
    with RunStore.open(run, writer_id="p0of2", fsync=False) as store:
        for rec in _records(5000):
            store.append(rec)
    # The shard grew past its kept part: status sums two parts of it (and again, from what it kept).
    again = _figures(_per_record(run))
    assert _figures(_status(run)) == again == _figures(_status(run))
    total, by, worst, orphans = again["p0of2"]
    judged = [r["cost_usd"] for b in (0, 5000) for r in _records(b) if r.get("judge") == "j"]
    assert by["j"] == fsum(judged) != sum(judged)  # exactly rounded, whatever the order
    assert orphans == 2 and worst == fsum([0.01] * 6 + [1.25, 1.25])  # the cut-off intents' worst cases
    assert "None" not in by and set(by) == {"m0", "m1", "m2", "j"}  # the judgment naming no judge
    assert total == fsum([*judged, *(v for b in (0, 5000) for v in _charged(b))])


def _charged(base: int) -> list[float]:
    """Dollars of one batch of `_records` not in a judge's label: generations, the judgment naming no
    judge, the intent cut off."""
    gens = [r["cost_usd"] for r in _records(base) if r["kind"] == "generation"]
    return [v if isinstance(v, float) else 0.0 for v in gens] + [0.7, 1.25]


_DOLLAR = st.floats(
    allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300
) | st.sampled_from([0.1, 1e-17, 5e-324, -0.1, 1.0, 2.0**53, 0.0, -0.0])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_DOLLAR, max_size=40), max_size=8))
def test_dollars_held_as_exact_terms_sum_to_the_last_bit_as_every_value_would(
    groups: list[list[float]],
) -> None:
    """What status holds of each part's dollars (their exact terms) sums, with fsum, to what fsum of
    every dollar gives, in any grouping: values that cancel, subnormals, magnitudes 1e300 apart."""
    terms = [exact_terms(g) for g in groups]
    assert fsum(chain.from_iterable(terms)) == fsum(chain.from_iterable(groups))
    assert all(len(t) <= 40 for t in terms)  # a remainder each step, never a loop without end
    for g, t in zip(groups, terms, strict=True):
        assert fsum(t) == fsum(g)
