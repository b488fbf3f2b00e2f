"""Shard format, damage detection, reopen, rotation, group commit, precedence (runner/store/shards.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ifsweep.runner.store.shards import (
    DiskFullError,
    RunStore,
    WriterBusyError,
    encode_line,
    parse_line,
    record_key,
    scan_shards,
    shard_files,
)


def gen(i: int, status: str = "ok", text: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "v": 1,
        "kind": "generation",
        "key": record_key({"i": i}),
        "status": status,
        "model": "m",
        "benchmark": "b",
        "instance_id": f"i{i}",
        "text": f"answer {i} " * 5 if text is None else text,
        "cost_usd": 0.001,
        **extra,
    }


def only_file(run: Path) -> Path:
    files = shard_files(run)
    assert len(files) == 1
    return files[0][2]


def test_record_key_is_canonical_and_short() -> None:
    assert record_key({"a": 1, "b": [1, 2]}) == record_key({"b": [1, 2], "a": 1})
    assert record_key({"a": 1}) != record_key({"a": 2})
    assert len(record_key("x")) == 32
    assert all(c in "0123456789abcdef" for c in record_key("x"))


def test_line_roundtrip_and_header_fields() -> None:
    rec = gen(1, status="error", text='quotes " and \\ and\nnewline and "status":"ok"')
    line = encode_line(rec)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    head = parse_line(line[:-1])
    assert head == (bytes.fromhex(rec["key"]), "generation", True)
    obj = orjson.loads(line)  # still a plain JSON object
    assert obj.pop("_c") == line[7:15].decode()
    assert obj == rec


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200), pos=st.integers(min_value=0), byte=st.integers(min_value=0, max_value=255))
def test_any_single_byte_change_is_detected(text: str, pos: int, byte: int) -> None:
    line = bytearray(encode_line(gen(3, text=text))[:-1])
    pos %= len(line)
    if line[pos] == byte or byte == 10:
        return
    line[pos] = byte
    assert isinstance(parse_line(bytes(line)), str)


def test_bad_records_are_refused_with_clear_errors() -> None:
    with pytest.raises(ValueError, match="record key"):
        encode_line({"kind": "generation", "key": "not-hex"})
    with pytest.raises(ValueError, match="'kind'"):
        encode_line({"kind": 'a"b', "key": record_key(1)})
    with pytest.raises(ValueError, match="'status'"):
        encode_line({"kind": "generation", "key": record_key(1), "status": "bad status"})
    # A key is lowercase hex of an even length from 16 to 64: each edge refused, with the same words.
    for key in ("ab" * 7 + "a", "a" * 17, "A" * 32, "ab" * 33, "g" * 32, "ab" * 8 + "\n"):
        with pytest.raises(ValueError, match="record key must be lowercase hex"):
            encode_line({"kind": "generation", "key": key})
    for key in ("ab" * 8, "0" * 64, record_key(1)):
        assert encode_line({"kind": "generation", "key": key}).endswith(b"\n")


def test_append_get_done_and_reopen(tmp_path: Path) -> None:
    with RunStore.open(tmp_path, write_through=False) as s:
        for i in range(10):
            s.append(gen(i, status="error" if i == 3 else "ok"))
        # Readable before any flush: straight from the buffer.
        assert s.get(gen(5)["key"]) == gen(5)
        assert not (tmp_path / "shards" / "main-00001.jsonl").stat().st_size
        assert s.done(gen(4)["key"]) and not s.done(gen(3)["key"]) and not s.done(gen(99)["key"])
        assert s.get(gen(99)["key"]) is None
    with RunStore.open(tmp_path, retry_errors=False) as s:
        assert s.index_size == 10 and s.damaged == []
        assert s.get(gen(7)["key"]) == gen(7)
        assert s.done(gen(3)["key"])  # errors count as done when they are not retried
        assert [r["instance_id"] for r in s.iter_records()] == [f"i{i}" for i in range(10)]


def test_newest_wins_but_an_error_never_shadows_a_success(tmp_path: Path) -> None:
    k_fixed, k_failed = gen(1)["key"], gen(2)["key"]
    with RunStore.open(tmp_path) as s:
        s.append(gen(1, status="error", text="e1"))
        s.append(gen(1, text="fixed"))
        s.append(gen(2, text="good"))
        s.append(gen(2, status="error", text="late error"))
        assert s.get(k_fixed)["text"] == "fixed"  # type: ignore[index]
        assert s.get(k_failed)["text"] == "good"  # type: ignore[index]
    with RunStore.open(tmp_path) as s:
        assert s.get(k_fixed)["text"] == "fixed"  # type: ignore[index]
        assert s.get(k_failed)["text"] == "good"  # type: ignore[index]
        assert s.done(k_fixed) and s.done(k_failed)


def test_damaged_lines_are_reported_skipped_and_the_torn_tail_truncated(tmp_path: Path) -> None:
    with RunStore.open(tmp_path) as s:
        for i in range(8):
            s.append(gen(i))
    path = only_file(tmp_path)
    lines = path.read_bytes().split(b"\n")[:-1]
    flipped = bytearray(lines[1])
    flipped[40] ^= 0x20
    lines[1] = bytes(flipped)
    lines[2] = b"\x00" * len(lines[2])
    lines[4] = b"this is not json at all"
    good_size = sum(len(x) + 1 for x in lines[:7])
    torn = lines[7][: len(lines[7]) // 2]
    path.write_bytes(b"\n".join(lines[:7]) + b"\n" + torn)
    with RunStore.open(tmp_path) as s:
        reasons = [(d.line_no, d.reason.split(":")[0]) for d in s.damaged]
        assert reasons[:4] == [
            (2, "checksum mismatch"),
            (3, "line of zero bytes"),
            (5, "not a shard line"),
            (8, "torn tail"),
        ]
        assert reasons[4][0] == 8 and reasons[4][1].startswith(
            f"truncated {len(torn)} bytes"
        )  # reported, then cut
        assert s.index_size == 4
        for bad in (1, 2, 4, 7):
            assert s.get(gen(bad)["key"]) is None
        assert s.get(gen(6)["key"]) == gen(6)
        assert path.stat().st_size == good_size
        s.append(gen(7))  # the record whose line was torn is simply written again
    with RunStore.open(tmp_path) as s:
        assert sorted(d.line_no for d in s.damaged) == [2, 3, 5]
        assert s.get(gen(7)["key"]) == gen(7)
        assert path.read_bytes().endswith(b"\n")


def test_readers_never_modify_files(tmp_path: Path) -> None:
    with RunStore.open(tmp_path) as s:
        s.append(gen(0))
    path = only_file(tmp_path)
    path.write_bytes(path.read_bytes() + b'{"_c":"00')
    size = path.stat().st_size
    damaged: list[Any] = []
    assert [sl.record()["instance_id"] for sl in scan_shards(tmp_path, damaged)] == ["i0"]
    assert len(damaged) == 1 and damaged[0].reason.startswith("torn tail")
    assert path.stat().st_size == size


def test_rotation_by_size(tmp_path: Path) -> None:
    with RunStore.open(tmp_path, rotate_bytes=4096, flush_records=7) as s:
        for i in range(100):
            s.append(gen(i))
    files = shard_files(tmp_path)
    assert [seq for _, seq, _ in files] == list(range(1, len(files) + 1)) and len(files) > 3
    assert all(p.stat().st_size <= 4096 for _, _, p in files)
    assert all(p.name == f"main-{seq:05d}.jsonl" for _, seq, p in files)
    with RunStore.open(tmp_path, rotate_bytes=4096) as s:
        assert s.index_size == 100 and not s.damaged
        assert s.get(gen(0)["key"]) == gen(0) and s.get(gen(99)["key"]) == gen(99)
        s.append(gen(100))
    assert sum(1 for _ in scan_shards(tmp_path)) == 101


def test_one_live_writer_per_id_and_readers_merge_writers(tmp_path: Path) -> None:
    a = RunStore.open(tmp_path, writer_id="p0of2")
    with pytest.raises(WriterBusyError, match="p0of2"):
        RunStore.open(tmp_path, writer_id="p0of2")
    b = RunStore.open(tmp_path, writer_id="p1of2")
    a.append(gen(1))
    b.append(gen(2))
    a.close()
    b.close()
    with RunStore.open(tmp_path) as s:
        assert s.index_size == 2
        assert {p.name for _, _, p in shard_files(tmp_path)} == {
            "p0of2-00001.jsonl",
            "p1of2-00001.jsonl",
            "main-00001.jsonl",
        }
    with pytest.raises(ValueError, match="writer_id"):
        RunStore.open(tmp_path, writer_id="a/b")


def test_flush_records_without_a_flusher_commits_synchronously(tmp_path: Path) -> None:
    with RunStore.open(tmp_path, flush_records=3, write_through=False) as s:
        path = only_file(tmp_path)
        s.append(gen(0))
        s.append(gen(1))
        assert path.stat().st_size == 0
        s.append(gen(2))
        assert path.read_bytes().count(b"\n") == 3


def lines_in(path: Path) -> int:
    return path.read_bytes().count(b"\n")


async def wait_for_lines(path: Path, n: int) -> None:
    # Watching a file from outside the writer: nothing to wait on but the file itself.
    for _ in range(5000):
        if lines_in(path) >= n:
            return
        await anyio.sleep(0.002)
    raise AssertionError(f"{path} never reached {n} lines")


def test_group_commit_makes_records_visible_within_flush_ms(tmp_path: Path) -> None:
    flush_ms = 100.0
    delays: list[float] = []

    async def main() -> None:
        with RunStore.open(tmp_path, flush_ms=flush_ms, flush_records=1000, write_through=False) as s:
            path = only_file(tmp_path)
            async with anyio.create_task_group() as tg:
                tg.start_soon(s.flusher)
                await anyio.sleep(0.05)
                for i in range(3):
                    t0 = time.monotonic()
                    s.append(gen(i))
                    assert lines_in(path) == i  # not written by append itself
                    await wait_for_lines(path, i + 1)
                    delays.append(time.monotonic() - t0)
                    await anyio.sleep(0.15)  # idle: the flusher sleeps on an event meanwhile
                # A full batch goes out at once, long before flush_ms.
                s.flush_ms = 60_000
                s.flush_records = 50
                await anyio.sleep(0.05)
                t0 = time.monotonic()
                for i in range(3, 53):
                    s.append(gen(i))
                await wait_for_lines(path, 53)
                delays.append(time.monotonic() - t0)
                tg.cancel_scope.cancel()

    anyio.run(main)
    assert all(0.05 <= d < 0.1 + 0.4 for d in delays[:3]), delays  # about flush_ms, never much later
    assert delays[3] < 2.0, delays


def test_flusher_and_sync_flush_interleave_without_losing_or_reordering(tmp_path: Path) -> None:
    async def main() -> None:
        with RunStore.open(tmp_path, flush_ms=1, flush_records=5) as s:
            async with anyio.create_task_group() as tg:
                tg.start_soon(s.flusher)
                for i in range(400):
                    s.append(gen(i))
                    if i % 37 == 0:
                        s.flush()
                    if i % 3 == 0:
                        await anyio.lowlevel.checkpoint()
                await anyio.sleep(0.05)
                tg.cancel_scope.cancel()

    anyio.run(main)
    recs = [sl.record()["instance_id"] for sl in scan_shards(tmp_path)]
    assert recs == [f"i{i}" for i in range(400)]


def test_disk_full_error_is_an_oserror_subclass() -> None:
    assert issubclass(DiskFullError, OSError)


def test_index_memory_is_compact(tmp_path: Path) -> None:
    # 50k keys: what the store holds per key, as tracemalloc counts it (1M keys: perf/shards_perf.py).
    import tracemalloc

    keys = [record_key(i) for i in range(50_000)]
    with RunStore.open(tmp_path, fsync=False, flush_records=10_000) as s:
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for k in keys:
                s.append({"v": 1, "kind": "verdict", "key": k, "rows": []})
            s.flush()
            per_key = (tracemalloc.get_traced_memory()[0] - before) / len(keys)
        finally:
            tracemalloc.stop()
        assert s.index_size == len(keys)
        assert s.get(keys[12345]) == {"v": 1, "kind": "verdict", "key": keys[12345], "rows": []}
    assert per_key < 48, per_key  # a dict[bytes, int] index held about 130 bytes a key
    assert os.path.getsize(only_file(tmp_path)) > 0


def test_iter_records_filters_kinds_and_get_notices_later_damage(tmp_path: Path) -> None:
    with RunStore.open(tmp_path) as s:
        s.append(gen(0))
        s.append({"v": 1, "kind": "verdict", "key": record_key("v"), "status": "ok", "rows": []})
        s.append(gen(1))
        assert [r["kind"] for r in s.iter_records(kinds={"verdict"})] == ["verdict"]
        assert [r["kind"] for r in s.iter_records()] == ["generation", "verdict", "generation"]
        path = only_file(tmp_path)
        data = bytearray(path.read_bytes())
        data[-10] ^= 1  # the last record rots on disk after the index was built
        path.write_bytes(bytes(data))
        with pytest.raises(OSError, match="changed on disk"):
            s.get(gen(1)["key"])
        assert s.get(gen(0)["key"]) == gen(0)


def test_write_through_puts_each_record_on_disk_as_it_is_appended(tmp_path: Path) -> None:
    """What a kill -9 finds: every record whose append returned, without any flush."""
    with RunStore.open(tmp_path) as s:
        for i in range(5):
            s.append(gen(i))
            on_disk = [sl.record() for sl in scan_shards(tmp_path)]
            assert on_disk == [gen(j) for j in range(i + 1)]


@settings(max_examples=100, deadline=None)
@given(
    status=st.one_of(st.none(), st.sampled_from(["ok", "error", "empty"])),
    extra=st.dictionaries(
        st.sampled_from(["a", "b", "text", "v", "ts"]), st.integers(-(2**53), 2**53), max_size=4
    ),
    lead=st.booleans(),
)
def test_a_record_in_line_order_encodes_to_the_bytes_of_any_other_order(
    status: str | None, extra: dict[str, int], lead: bool
) -> None:
    """encode_line dumps a dict already in the line's order (key, kind, status) without reordering a
    copy: the bytes must be those the reordering writes, for the same fields in any order."""
    from types import MappingProxyType

    key = record_key({"x": 1})
    fields: dict[str, Any] = {"key": key, "kind": "generation"}
    if status is not None or lead:
        fields["status"] = status
    fields.update(extra)
    shuffled = dict(reversed(list(fields.items())))  # key, kind and status last: the reordering path
    general = encode_line(MappingProxyType(fields))  # not a dict: always the reordering path
    assert encode_line(fields) == general
    assert encode_line(shuffled) == encode_line(MappingProxyType(shuffled))
    head = b'"key":"%s","kind":"generation"' % key.encode()
    assert encode_line(shuffled)[17:].startswith(head) and general[17:].startswith(head)
    if isinstance(status, str):
        assert general[17 + len(head) :].startswith(b',"status":"%s"' % status.encode())


def test_the_pipelines_records_keep_their_line_layout() -> None:
    """Generation, judgment and verdict records are built in the line's order: their lines are the
    bytes the reordering path writes (the shards of a run before this order are the same bytes)."""
    from types import MappingProxyType

    from ifsweep.providers.records import Completion
    from ifsweep.runner.engine.pipeline import completion_record

    rec = completion_record("generation", record_key({"g": 1}), Completion(status="ok", text="hi"))
    rec |= {"model": "m", "benchmark": "b", "instance_id": "i"}
    line = encode_line(rec)
    assert line == encode_line(MappingProxyType(rec))
    head = b'"key":"%s","kind":"generation","status":"ok","v":2,"text":"hi"' % rec["key"].encode()
    assert line[17:].startswith(head)
