"""runner/store/keyindex.py against the obvious model: a dict that applies the store's precedence rule."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
from array import array

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
@given(ops_strategy, st.integers(0, 40))
def test_put_and_load_follow_the_precedence_rule(ops: list[Op], split: int) -> None:
    rng = random.Random(0)
    one_by_one = KeyIndex()
    for op in ops:
        one_by_one.put(*op)
    check(one_by_one, model(ops), rng)
    # Loading a prefix in bulk, then putting the rest, or loading in two batches: the same map.
    head, tail = ops[:split], ops[split:]
    mixed = KeyIndex()
    mixed.load(*packed(head))
    for op in tail:
        mixed.put(*op)
    check(mixed, model(ops), rng)
    batches = KeyIndex()
    batches.load(*packed(head))
    batches.load(*packed(tail))
    check(batches, model(ops), rng)


def test_many_keys_through_every_growth() -> None:
    rng = random.Random(7)
    ops = random_ops(rng, 60_000, 40_000)
    index = KeyIndex()
    for op in ops[:30_000]:
        index.put(*op)
    index.load(*packed(ops[30_000:]))
    check(index, model(ops), rng)
    grown = KeyIndex()
    for op in ops:
        grown.put(*op)
    check(grown, model(ops), rng)


def test_put_reports_whether_it_kept_the_location() -> None:
    index = KeyIndex()
    key = bytes(range(16))
    assert index.put(key, 0, 10, 5, True)
    assert index.put(key, 0, 20, 5, True)  # an error replaces an error
    assert index.put(key, 1, 30, 5, False)  # a success replaces an error
    assert not index.put(key, 1, 40, 5, True)  # an error never replaces a success
    assert index.get(key) == (1, 30, 5, False)
    assert index.put(key, 2, 50, 6, False)  # a newer success replaces a success
    assert index.get(key) == (2, 50, 6, False)


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
    assert index.nbytes() / len(index) < 45  # 28 bytes of entry + a third-to-two-thirds-full slot table


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
        print("numpy" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"
