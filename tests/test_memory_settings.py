"""runner/engine/memory.py in a fresh interpreter: trimming gives freed heap pages back, and a growing index
array no longer leaves the heap bigger than what it holds."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc settings")

RSS = textwrap.dedent(
    """
    def rss_mb(field="VmRSS"):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    """
)


def run(code: str, *args: str) -> list[float]:
    out = subprocess.run(
        [sys.executable, "-c", RSS + textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return [float(x) for x in out.stdout.split()]


def test_trim_returns_the_free_pages_inside_the_heap() -> None:
    freed, trimmed = run(
        """
        from ifsweep.runner.engine.memory import return_free_memory
        base = rss_mb()
        # 1 KiB strings come from glibc's heap (pymalloc takes only up to 512 bytes); keep every 64th,
        # so the heap cannot shrink from its top and the free pages sit between live chunks.
        blocks = [("x" * 1000) + str(i) for i in range(200_000)]
        keep = blocks[::64]
        del blocks
        freed = rss_mb()
        return_free_memory()
        print(freed - base, rss_mb() - base)
        """
    )
    assert freed > 150, freed  # about 200 MB stayed resident after the free...
    assert trimmed < freed / 3, (freed, trimmed)  # ...until the trim


GROW_INDEX = """
    import random, sys
    import numpy  # imported by the index's first rebuild: load it before the baseline
    from ifsweep.runner.store.keyindex import KeyIndex
    from ifsweep.runner.engine.memory import steady_allocator
    if sys.argv[1:] == ["steady"]:
        steady_allocator()
    junk = bytearray(16 << 20); del junk  # a large free: what raises glibc's threshold otherwise
    # The heap alone (RssAnon): the index's first spill and rebuild also touch code pages (RssFile,
    # about 1 MB), which no allocator setting changes and which were noise beside 36 B a key.
    base = rss_mb("RssAnon")
    index, rng, chatter = KeyIndex(), random.Random(1), []
    for i in range(400_000):
        index.put(rng.randbytes(16), 1, i * 100, 500, False)
        chatter.append(b"y" * 700)  # short-lived medium objects, as answers are during a sweep
        if len(chatter) > 64:
            chatter.clear()
    print((rss_mb("RssAnon") - base) / (index.nbytes() / 2**20))
"""


def test_a_growing_index_with_the_steady_allocator_costs_what_it_holds() -> None:
    (steady,) = run(GROW_INDEX, "steady")
    (default,) = run(GROW_INDEX)
    assert steady < 1.2, steady  # resident growth / bytes the index holds (was 1.46 without)
    assert steady < default - 0.1, (steady, default)
