"""runner/store/keyindex.py against the obvious model: a dict that applies the store's precedence rule."""

from __future__ import annotations

import contextlib
import gc
import os
import random
import subprocess
import sys
import textwrap
from array import array
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ifsweep.runner.store.keyindex import KeyIndex, Location, normalized

Op = tuple[bytes, int, int, int, bool]  # key, file number, offset, length, is_error


def model(ops: list[Op]) -> dict[bytes, Location]:
    """Newest wins, except that an error never replaces a success."""
    out: dict[bytes, Location] = {}
    for key, file_no, offset, length, is_error in ops:
        old = out.get(key)
        if old is None or not is_error or old[3]:
            out[key] = (file_no, offset, length, is_error)
    return out


def packed(ops: list[Op]) -> tuple[bytearray, array[int], array[int]]:
    keys, locs, metas = bytearray(), array("Q"), array("I")
    for key, file_no, offset, length, is_error in ops:
        keys += normalized(key)
        locs.append(file_no << 40 | offset)
        metas.append(length << 1 | is_error)
    return keys, locs, metas


def random_ops(rng: random.Random, n: int, distinct: int) -> list[Op]:
    pool = [rng.randbytes(rng.choice([8, 16, 16, 16, 32])) for _ in range(distinct)]
    return [
        (
            rng.choice(pool),
            rng.randrange(1 << 24),
            rng.randrange(1 << 40),
            rng.randrange(1, 1 << 31),
            rng.random() < 0.3,
        )
        for _ in range(n)
    ]


def check(index: KeyIndex, want: dict[bytes, Location], rng: random.Random) -> None:
    assert len(index) == len(want)
    for key, loc in want.items():
        assert index.get(key) == loc
    for _ in range(200):
        assert index.get(rng.randbytes(16)) is None


ops_strategy = st.lists(
    st.tuples(
        st.sampled_from([bytes([i]) * 16 for i in range(6)] + [b"\x07" * 8, b"\x07" * 32]),
        st.integers(0, (1 << 24) - 1),
        st.integers(0, (1 << 40) - 1),
        st.integers(1, (1 << 31) - 1),
        st.booleans(),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(ops_strategy, st.integers(0, 40), st.sampled_from([1, 3, 4096]))
def test_put_and_load_follow_the_precedence_rule(ops: list[Op], split: int, tail_rows: int) -> None:
    # tail_rows 1 and 3 spill rows to the file almost at once: every path reads rows back from disk.
    rng = random.Random(0)
    with KeyIndex(tail_rows=tail_rows) as one_by_one:
        for op in ops:
            one_by_one.put(*op)
        check(one_by_one, model(ops), rng)
    # Loading a prefix in bulk, then putting the rest, or loading in two batches: the same map.
    head, tail = ops[:split], ops[split:]
    with KeyIndex(tail_rows=tail_rows) as mixed:
        mixed.load(*packed(head))
        for op in tail:
            mixed.put(*op)
        check(mixed, model(ops), rng)
    with KeyIndex(tail_rows=tail_rows) as batches:
        batches.load(*packed(head))
        batches.load(*packed(tail))
        check(batches, model(ops), rng)


@pytest.mark.parametrize("tail_rows", [4096, 7])
def test_many_keys_through_every_growth(tail_rows: int) -> None:
    rng = random.Random(7)
    ops = random_ops(rng, 60_000, 40_000)
    with KeyIndex(tail_rows=tail_rows) as index:
        for op in ops[:30_000]:
            index.put(*op)
        index.load(*packed(ops[30_000:]))
        check(index, model(ops), rng)
        for op in ops[:5_000]:  # puts after a load: rows it wrote to the file are replaced in place
            index.put(*op)
        check(index, model(ops + ops[:5_000]), rng)
    with KeyIndex(tail_rows=tail_rows) as grown:
        for op in ops:
            grown.put(*op)
        check(grown, model(ops), rng)
        assert grown.spilled() > len(grown) - tail_rows


def test_the_spill_file_has_no_name_and_holds_the_rows(tmp_path: Path) -> None:
    with KeyIndex(tmp_path, tail_rows=100) as index:
        for i in range(1_000):
            index.put(i.to_bytes(16, "little"), 0, i * 100, 100, False)
        assert index.spilled() == 1_000  # ten tails of 100 rows each went to the file
        assert list(tmp_path.iterdir()) == []  # unnamed: nothing to leave behind after a crash
        assert index.get((999).to_bytes(16, "little")) == (0, 99_900, 100, False)
        assert index.nbytes() == 1_000 * 4 + 4 * 2**11 + 100 * 28  # tags, slots and one tail, no rows
    assert len(index) == 0
    with pytest.raises(ValueError, match="closed"):  # never a silent "not there"
        index.get((1).to_bytes(16, "little"))


def test_a_disk_that_refuses_the_rows_loses_none_of_them(tmp_path: Path) -> None:
    # No folder to spill to: the rows stay in memory.
    with KeyIndex(tmp_path / "gone", tail_rows=4) as index:
        for i in range(100):
            index.put(i.to_bytes(16, "little"), 0, i, 1, False)
        assert index.spilled() == 0 and len(index) == 100
        assert all(index.get(i.to_bytes(16, "little")) == (0, i, 1, False) for i in range(100))
    # A file that stops growing part-way (the file size limit here; a full disk in a sweep): the rows
    # it took are read from it, the rest stay in memory, and every lookup still finds its own.
    code = textwrap.dedent(
        f"""
        import resource, signal
        from ifsweep.runner.store.keyindex import KeyIndex
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (28 * 1000, resource.RLIM_INFINITY))
        index = KeyIndex({str(tmp_path)!r}, tail_rows=300)
        for i in range(5_000):
            index.put(i.to_bytes(16, "little"), 0, i, 1, False)
        assert all(index.get(i.to_bytes(16, "little")) == (0, i, 1, False) for i in range(5_000))
        for i in range(5_000):  # newer locations, in the file and in memory alike
            index.put(i.to_bytes(16, "little"), 1, i, 2, False)
        assert all(index.get(i.to_bytes(16, "little")) == (1, i, 2, False) for i in range(5_000))
        print(index.spilled(), len(index))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["900", "5000"]  # three tails of 300 fit below the limit, the 4th did not


def test_an_index_never_closed_gives_its_spill_file_back_when_collected(tmp_path: Path) -> None:
    # The viewer's index lives as long as its server and is never closed: its descriptor must not leak.
    # Told by what each descriptor opens, not by their count: a collection also closes whatever else
    # earlier tests left to the collector, and other threads open and close their own.
    def spill_files() -> set[str]:
        fds = Path("/proc/self/fd")
        out = set()
        for fd in fds.iterdir():
            with contextlib.suppress(OSError):  # closed since it was listed
                target = os.readlink(fd)
                if target.startswith(str(tmp_path)) and target.endswith("(deleted)"):
                    out.add(target)
        return out

    index = KeyIndex(tmp_path, tail_rows=2)
    for i in range(10):
        index.put(i.to_bytes(16, "little"), 0, i, 1, False)
    assert len(spill_files()) == 1  # its spill file, open, with no name
    del index
    gc.collect()
    assert spill_files() == set()


@pytest.mark.parametrize("tail_rows", [4096, 1])
def test_put_reports_whether_it_kept_the_location(tail_rows: int) -> None:
    index = KeyIndex(tail_rows=tail_rows)
    key = bytes(range(16))
    assert index.put(key, 0, 10, 5, True)
    assert index.put(key, 0, 20, 5, True)  # an error replaces an error
    assert index.put(key, 1, 30, 5, False)  # a success replaces an error
    assert not index.put(key, 1, 40, 5, True)  # an error never replaces a success
    assert index.get(key) == (1, 30, 5, False)
    assert index.put(key, 2, 50, 6, False)  # a newer success replaces a success
    assert index.get(key) == (2, 50, 6, False)
    index.close()


@pytest.mark.parametrize(
    ("file_no", "offset", "length"),
    [(1 << 24, 0, 1), (0, 1 << 40, 1), (0, 0, 0), (0, 0, 1 << 31), (-1, 0, 1)],
)
def test_a_location_that_does_not_fit_is_refused(file_no: int, offset: int, length: int) -> None:
    index = KeyIndex()
    with pytest.raises(ValueError, match="out of range"):
        index.put(b"k" * 16, file_no, offset, length, False)
    assert len(index) == 0


def test_load_refuses_mismatched_arrays() -> None:
    keys, locs, metas = packed([(b"a" * 16, 0, 0, 1, False)])
    with pytest.raises(ValueError, match="load"):
        KeyIndex().load(keys + b"x", locs, metas)


def test_memory_per_key_stays_small() -> None:
    rng = random.Random(3)
    index = KeyIndex()
    for _ in range(100_000):
        index.put(rng.randbytes(16), 3, rng.randrange(1 << 30), 500, False)
    # 4 bytes of tag + a third-to-two-thirds-full slot table + the tail (the rows are on disk)
    assert index.nbytes() / len(index) < 18
    index.close()


def test_a_growing_index_of_a_small_sweep_never_imports_numpy() -> None:
    # A fresh sweep of a few thousand calls grows its index by put() alone: NumPy's import (0.15 s)
    # would be a tenth of its CPU. Measured in a child, where nothing else has imported it.
    code = textwrap.dedent(
        """
        import sys
        from ifsweep.runner.store.keyindex import KeyIndex
        index = KeyIndex()
        for i in range(20_000):
            index.put(i.to_bytes(16, "little"), 0, i * 100, 100, False)
        assert all(index.get(i.to_bytes(16, "little")) == (0, i * 100, 100, False) for i in range(20_000))
        index.close()
        print("numpy" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"
