"""Compaction equals streaming, newest-per-key reading, status table, partitions (runner/store/compact.py,
runner/watch/status.py, runner/engine/partition.py)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from sweeps import verdict_record

from ifsweep.runner.engine.partition import Partition, in_partition, parse_partition
from ifsweep.runner.store.compact import (
    CALL_COLUMNS,
    VERDICT_COLUMNS,
    compact,
    load_call_records,
    load_verdict_rows,
)
from ifsweep.runner.store.shards import RunStore, record_key
from ifsweep.runner.watch.status import status_table


def call(
    kind: str, i: int, model: str, status: str = "ok", cost: float = 0.01, **extra: Any
) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "v": 1,
        "kind": kind,
        "key": record_key({kind: i, "m": model}),
        "status": status,
        "model": model,
        "benchmark": "fb",
        "instance_id": f"i{i}",
        "text": None if status == "error" else f"text {i}",
        "finish_reason": "stop",
        "input_tokens": 10,
        "output_tokens": 5,
        "cost_usd": cost,
        "latency_s": 0.5,
        "attempts": 1,
        "rate_limited": 0,
        "error_kind": "server" if status == "error" else None,
        "error_message": None,
        "path": "fast",
        "ts": 1.0 + i,
    }
    if kind == "judgment":
        rec |= {"judge": "j", "task_idx": 0, "turn_idx": 0, "ask": 0, "parse": "ok"}
    return rec | extra


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """Two partition writers and a later main writer that retries errors, into one run dir."""
    rng = random.Random(7)
    with RunStore.open(tmp_path, writer_id="p0of2") as a, RunStore.open(tmp_path, writer_id="p1of2") as b:
        for i in range(40):
            store = a if in_partition(record_key(i), 0, 2) else b
            for model in ("m1", "m2"):
                failed = i % 10 == 3
                store.append(
                    call("generation", i, model, "error" if failed else "ok", cost=0.0 if failed else 0.01)
                )
                store.append(call("judgment", i, model))
                values = [rng.choice([True, False, None]) for _ in range(1 + i % 3)]
                store.append(verdict_record(i, model, values, "error" if failed else "ok"))
    with RunStore.open(tmp_path) as main:
        for i in (3, 13):  # retried successfully; 23 and 33 stay errors
            main.append(call("generation", i, "m1"))
            main.append(verdict_record(i, "m1", [True]))
    return tmp_path


def test_compaction_equals_streaming_and_is_used_only_while_current(run: Path) -> None:
    streamed_rows = load_verdict_rows(run)
    streamed_calls = load_call_records(run)
    assert dict(streamed_rows.schema) == VERDICT_COLUMNS
    assert dict(streamed_calls.schema) == CALL_COLUMNS
    result = compact(run)
    assert (result.generations, result.judgments, result.verdicts) == (80, 80, 80)
    assert result.verdict_rows == streamed_rows.height and not result.damaged
    assert (run / "compact" / "state.json").exists()
    for name in ("generations", "judgments", "verdicts"):
        assert (run / "compact" / f"{name}.parquet").exists()

    def by(df: pl.DataFrame, cols: list[str]) -> pl.DataFrame:
        return df.sort(cols)

    vcols = ["model", "instance_id", "constraint_idx"]
    assert_frame_equal(by(load_verdict_rows(run), vcols), by(streamed_rows, vcols))
    assert_frame_equal(by(load_call_records(run), ["key"]), by(streamed_calls, ["key"]))

    # Newest per key: the retried verdict of i3 replaced its error verdict (one row, satisfied).
    i3 = streamed_rows.filter((pl.col("model") == "m1") & (pl.col("instance_id") == "i3"))
    assert i3.select("satisfied", "status", "run").rows() == [(True, "ok", run.name)]
    assert streamed_calls.filter(pl.col("kind") == "generation").height == 80  # 2 retries deduped

    # A new record after compaction: readers must not serve the stale Parquet.
    with RunStore.open(run) as main:
        main.append(verdict_record(23, "m1", [False]))
    i23 = load_verdict_rows(run).filter((pl.col("model") == "m1") & (pl.col("instance_id") == "i23"))
    assert i23.select("satisfied", "status").rows() == [(False, "ok")]


def test_empty_run_gives_empty_typed_frames(tmp_path: Path) -> None:
    assert load_verdict_rows(tmp_path).schema == pl.Schema(VERDICT_COLUMNS)
    assert load_call_records(tmp_path).height == 0
    result = compact(tmp_path)
    assert result.verdict_rows == 0 and pl.read_parquet(tmp_path / "compact" / "verdicts.parquet").height == 0


def test_status_table(run: Path) -> None:
    (run / "summary.json").write_bytes(
        orjson.dumps(
            {
                "by_model": [
                    {"model": "m1", "benchmark": "fb", "planned": 40},
                    {"model": "m3", "benchmark": "fb", "planned": 5},
                ]
            }
        )
    )
    rows = {(r["model"], r["benchmark"]): r for r in status_table(run)}
    assert list(rows) == [("m1", "fb"), ("m2", "fb"), ("m3", "fb")]
    m1, m2, m3 = rows[("m1", "fb")], rows[("m2", "fb")], rows[("m3", "fb")]
    assert (m1["planned"], m1["done"], m1["errors"]) == (40, 38, 2)  # i23, i33 still errors
    assert (m2["planned"], m2["done"], m2["errors"]) == (None, 36, 4)
    assert m3 == {
        "model": "m3",
        "benchmark": "fb",
        "planned": 5,
        "done": 0,
        "errors": 0,
        "spent_usd": 0.0,
        "judge_usd": 0.0,
        "input_tokens": 0,
        "cached_tokens": 0,
        "cache_saved_usd": 0.0,
    }
    # Every call paid for counts, superseded ones too: m1 has 36 + 2 retried ok generations + 40 judgments.
    assert m1["spent_usd"] == pytest.approx(0.01 * (36 + 2 + 40))
    assert m2["spent_usd"] == pytest.approx(0.01 * (36 + 40))


def test_partitions_split_keys_disjointly_and_completely() -> None:
    keys = [record_key(i) for i in range(3000)]
    for n in (1, 2, 3, 7):
        owners = [[i for i in range(n) if in_partition(k, i, n)] for k in keys]
        assert all(len(o) == 1 for o in owners)
        sizes = [sum(1 for o in owners if o[0] == i) for i in range(n)]
        assert min(sizes) > len(keys) / n * 0.85  # roughly even
    p = parse_partition("2/3")
    assert p == Partition(2, 3) == (2, 3) and p.writer_id == "p2of3"
    assert [p.owns(k) for k in keys[:50]] == [in_partition(k, 2, 3) for k in keys[:50]]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("3/3", "0-based, so it must be in 0..2"),
        ("1/0", "at least 1"),
        ("a/b", "expected 'i/n'"),
        ("1", "'i/n'"),
    ],
)
def test_parse_partition_errors(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_partition(spec)
    with pytest.raises(ValueError, match="0 <= index < count"):
        in_partition("k", 2, 2)


def test_compaction_in_small_batches_writes_the_same_rows(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A run too large to hold is compacted a batch of lines at a time, each batch a Parquet part: with
    # batches of 7 lines (many parts per kind) the files hold exactly what the shards give.
    from ifsweep.runner.store import compact as compacting

    streamed_rows = load_verdict_rows(run)
    streamed_calls = load_call_records(run)
    batches = list(compacting.latest_batches(run, ("generation", "judgment", "verdict"), [], size=7))
    assert len(batches) > 3 * (80 // 7) and all(0 < len(lines) <= 7 for _, lines in batches)
    monkeypatch.setattr(compacting, "_BATCH_LINES", 7)
    result = compact(run)
    assert (result.generations, result.judgments, result.verdicts) == (80, 80, 80)
    assert result.verdict_rows == streamed_rows.height
    assert not list((run / "compact").glob(".parts*"))  # the parts are gone
    vcols = ["model", "instance_id", "constraint_idx"]
    assert_frame_equal(load_verdict_rows(run).sort(vcols), streamed_rows.sort(vcols))
    assert_frame_equal(load_call_records(run).sort("key"), streamed_calls.sort("key"))


def test_a_compacted_run_is_scanned_not_read(run: Path) -> None:
    # Reports and ifsweep.scores stream a compacted run: its verdicts are a scan of the Parquet file,
    # read in batches by the metrics' streaming passes, never a frame of every row first.
    from ifsweep.runner.store.compact import scan_verdict_rows

    assert "SCAN" not in scan_verdict_rows(run).explain().upper()  # not compacted: the shards' frame
    compact(run)
    plan = scan_verdict_rows(run).explain()
    assert "Parquet SCAN" in plan and "verdicts.parquet" in plan
    vcols = ["model", "instance_id", "constraint_idx"]
    assert_frame_equal(scan_verdict_rows(run).collect().sort(vcols), load_verdict_rows(run).sort(vcols))
