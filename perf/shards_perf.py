"""Shard performance: append throughput vs raw writes, resume index build, compaction.

    python perf/shards_perf.py [--records 1000000] [--appends 200000] [--verdicts 200000]

Prints one line per figure and the ratios; run it twice, the machine is shared.
"""

from __future__ import annotations

import argparse
import binascii
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from ifsweep.runner.store.compact import compact, load_verdict_rows
from ifsweep.runner.store.shards import RunStore, encode_line, record_key


def gen_record(i: int) -> dict[str, Any]:
    # About the size of a short generation record (the text dominates real ones).
    return {
        "v": 1,
        "kind": "generation",
        "key": record_key(i),
        "status": "ok",
        "model": "m",
        "text": "t" * 40,
    }


def _append_buffered(run: Path, records: list[dict[str, Any]]) -> float:
    t = time.perf_counter()
    with RunStore.open(run, flush_records=1000, fsync=True, write_through=False) as s:
        for r in records:
            s.append(r)
    return time.perf_counter() - t


def _append_write_through(run: Path, records: list[dict[str, Any]]) -> float:
    """The sweep's mode: each record to the kernel at once, fsync every flush_ms by the flusher."""

    async def go() -> float:
        with RunStore.open(run, flush_ms=200, fsync=True) as s:
            t = time.perf_counter()
            async with anyio.create_task_group() as tg:
                tg.start_soon(s.flusher)
                for i, r in enumerate(records):
                    s.append(r)
                    if i % 64 == 63:
                        await anyio.lowlevel.checkpoint()  # a sweep appends between awaits, like this
                tg.cancel_scope.cancel()
            s.flush()
            return time.perf_counter() - t

    return anyio.run(go)


def append_throughput(root: Path, n: int) -> None:
    records = [gen_record(i) for i in range(n)]
    buffered_s = _append_buffered(root / "append-buffered", records)
    through_s = _append_write_through(root / "append-through", records)

    # The floor: the same bytes, pre-encoded, written in the same 1000-record batches, fsync per batch.
    lines = [encode_line(r) for r in records]
    path = root / "raw.jsonl"
    t = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for i in range(0, n, 1000):
        os.write(fd, b"".join(lines[i : i + 1000]))
        os.fsync(fd)
    os.close(fd)
    raw_s = time.perf_counter() - t
    size = path.stat().st_size
    print(f"append  {n} records ({size / n:.0f} B each)")
    print(f"  write-through, fsync every 200 ms: {through_s:.2f} s = {n / through_s:,.0f} records/s")
    print(f"  buffered, write+fsync every 1000:  {buffered_s:.2f} s = {n / buffered_s:,.0f} records/s")
    print(f"  raw write+fsync of the same bytes: {raw_s:.2f} s = {n / raw_s:,.0f} records/s")
    print(
        f"  ratio to raw time: write-through {through_s / raw_s:.1f}x, buffered {buffered_s / raw_s:.1f}x "
        "(encoding + checksum + index; write-through adds a syscall per record)"
    )


def index_build(root: Path, n: int) -> None:
    run = root / "index"
    with RunStore.open(run, flush_records=10_000, fsync=False) as s:
        for i in range(n):
            s.append(gen_record(i))
    size = sum(p.stat().st_size for p in (run / "shards").glob("*.jsonl"))
    t = time.perf_counter()
    s = RunStore.open(run)
    open_s = time.perf_counter() - t
    s.close()
    tracemalloc.start()  # a second open, traced (tracing slows it down: the first one is the timing)
    s = RunStore.open(run)
    held, open_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    index_bytes = s._index.nbytes()
    # The baseline: the dict[bytes, int] this index replaced, holding the same keys and packed values.
    keys = [binascii.unhexlify(record_key(i)) for i in range(n)]
    dict_bytes = sys.getsizeof(dict.fromkeys(keys, 1 << 80)) + n * (sys.getsizeof(keys[0]) + 36)
    del keys
    t = time.perf_counter()
    for i in range(0, n, max(1, n // 10_000)):
        assert s.get(record_key(i)) is not None
    get_us = (time.perf_counter() - t) / min(n, 10_000) * 1e6
    s.close()
    print(f"resume  {n:,} records, {size / 2**20:.0f} MiB of shards")
    print(f"  RunStore.open (index build): {open_s:.2f} s = {n / open_s:,.0f} records/s (target: 1M < 3 s)")
    print(
        f"  index memory: {index_bytes / 2**20:.0f} MiB = {index_bytes / n:.0f} B per key "
        f"(all the open held: {held / n:.0f} B per key, peak while opening {open_peak / 2**20:.0f} MiB); "
        f"a dict[bytes, int]: {dict_bytes / n:.0f} B per key = {dict_bytes / index_bytes:.1f}x"
    )
    print(f"  get() from disk: {get_us:.1f} us each")


def compaction(root: Path, n_verdicts: int, rows_per: int = 5) -> None:
    run = root / "compact"
    with RunStore.open(run, flush_records=10_000, fsync=False) as s:
        for i in range(n_verdicts):
            s.append(
                {
                    "v": 1,
                    "kind": "verdict",
                    "key": record_key(("v", i)),
                    "status": "ok",
                    "model": f"m{i % 20}",
                    "judge": "j",
                    "benchmark": "followbench",
                    "instance_id": f"i{i // 20}",
                    "group_id": f"g{i // 100}",
                    "level": i % 5 + 1,
                    "category": "content",
                    "split": None,
                    "gen_key": record_key(("g", i)),
                    "scoring": "paper",
                    "rows": [
                        {
                            "constraint_idx": c,
                            "instruction_idx": None,
                            "constraint_type": "format",
                            "priority": None,
                            "satisfied": (i + c) % 3 != 0,
                            "source": "judge",
                            "status": "ok",
                        }
                        for c in range(rows_per)
                    ],
                    "ts": 1.0,
                }
            )
    t = time.perf_counter()
    streamed = load_verdict_rows(run)
    stream_s = time.perf_counter() - t
    t = time.perf_counter()
    result = compact(run)
    compact_s = time.perf_counter() - t
    t = time.perf_counter()
    from_parquet = load_verdict_rows(run)
    parquet_s = time.perf_counter() - t
    assert streamed.height == from_parquet.height == result.verdict_rows == n_verdicts * rows_per
    print(f"compact {n_verdicts:,} verdicts = {result.verdict_rows:,} verdict rows")
    print(
        f"  compact(): {compact_s:.2f} s; load_verdict_rows from shards {stream_s:.2f} s,"
        f" from Parquet {parquet_s:.3f} s"
    )
    print(f"  ratio shards/Parquet read: {stream_s / max(parquet_s, 1e-9):.0f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--appends", type=int, default=200_000)
    ap.add_argument("--verdicts", type=int, default=200_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="shards_perf_") as d:
        root = Path(d)
        append_throughput(root, args.appends)
        index_build(root, args.records)
        compaction(root, args.verdicts)


if __name__ == "__main__":
    main()
