"""runner/store/spooled.py: instances spooled to an unnamed file come back equal, in order, for every
benchmark."""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Iterator
from dataclasses import replace

import pytest

from ifsweep import benchmarks
from ifsweep.benchmarks import Instance
from ifsweep.runner.store.spooled import SpooledInstances


@pytest.mark.parametrize("name", benchmarks.names())
def test_every_fixture_instance_comes_back_equal(name: str) -> None:
    bench = benchmarks.get(name)
    loaded = list(bench.load(bench.fixture_dir(), {}))
    spooled = SpooledInstances(bench.load(bench.fixture_dir(), {}))
    assert len(spooled) == len(loaded) > 0
    assert list(spooled) == loaded
    assert spooled[0] == loaded[0] and spooled[-1] == loaded[-1]
    assert spooled[1:3] == loaded[1:3]
    # the plan (what scoring reads from the instance, meta included) is the same too
    for a, b in zip(spooled, loaded, strict=True):
        assert bench.plan(a, "an answer", "paper") == bench.plan(b, "an answer", "paper")


def test_limit_index_errors_and_the_file_has_no_name() -> None:
    bench = benchmarks.get("followbench")
    spooled = SpooledInstances(bench.load(bench.fixture_dir(), {}), limit=7)
    assert len(spooled) == 7
    with pytest.raises(IndexError):
        spooled[7]
    with pytest.raises(IndexError):
        spooled[-8]
    assert os.fstat(spooled._file.fileno()).st_nlink == 0  # nothing else can open it
    spooled.close()


def test_memory_held_per_instance_is_its_offset() -> None:
    bench = benchmarks.get("followbench")
    base = list(bench.load(bench.fixture_dir(), {}))
    many = [replace(base[i % len(base)], instance_id=f"copy-{i}") for i in range(5000)]
    SpooledInstances(many).close()  # warm up: tuple and list free lists fill once, then stay
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        spooled = SpooledInstances(many)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(spooled) == 5000 and spooled[4321].instance_id == "copy-4321"
    assert held / 5000 < 16, held  # 8 bytes of offset each (the file object itself is a few hundred)


def test_a_loader_failing_midway_leaves_no_open_file() -> None:
    bench = benchmarks.get("cfbench")

    def failing() -> Iterator[Instance]:
        yield from list(bench.load(bench.fixture_dir(), {}))[:3]
        raise ValueError("bad record")

    fds = len(os.listdir("/proc/self/fd"))
    with pytest.raises(ValueError, match="bad record"):
        SpooledInstances(failing())
    assert len(os.listdir("/proc/self/fd")) == fds


def test_recently_read_instances_are_decoded_once_and_bounded() -> None:
    # Every model's workers read the same instances at about the same time: the second read of a
    # recent one is the same object, not another unpickling; memory stays bounded by the window.
    bench = benchmarks.get("followbench")
    base = list(bench.load(bench.fixture_dir(), {}))
    spooled = SpooledInstances(replace(base[i % len(base)], instance_id=f"copy-{i}") for i in range(600))
    first = spooled[5]
    assert spooled[5] is first and spooled[5] == first
    for i in range(600):
        assert spooled[i].instance_id == f"copy-{i}"
    assert spooled[5] is not first and spooled[5] == first  # read 600 others since: decoded again
    assert len(spooled._recent) <= 256
    spooled.close()
