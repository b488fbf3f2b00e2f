"""What only a program that owns its process does around a sweep: signal handling, the garbage
collector, the allocator. The `ifsweep` command passes an `OwnedProcess` to `run_sweep`; the library
(`ifsweep.run`, `ifsweep.arun`) never does, so a notebook's kernel, a web server or a worker thread
keeps its own signal handlers, collector and malloc settings, and stops a sweep by cancelling it."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
from collections.abc import Iterator

import anyio

from ifsweep.runner.engine.memory import return_free_memory, steady_allocator
from ifsweep.runner.engine.scheduler import StopControl
from ifsweep.runner.store.shards import RunStore

__all__ = ["RUN_GC_THRESHOLD", "OwnedProcess", "frozen_heap"]


# The collector's first threshold while a sweep runs (Python's default is 700): the event loop's and
# aiohttp's short-lived cycles then cost about 0.3 ms of collection per 1,000 calls instead of 17 ms
# (2-4% of the sweep's CPU at latency 0, perf/sweep_perf.py overhead); what waits for the next
# collection is a few thousand small objects at most.
RUN_GC_THRESHOLD = 10_000


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Keep what exists before the run (modules, litellm's tables, the loaded data) out of the cyclic
    garbage collector for its duration, and collect the young generation less often. Those objects
    live as long as the run anyway; with litellm loaded each full collection walked them all and
    stalled the event loop 100-300 ms (measured in the latency-bound perf run: 84% of the ideal
    throughput with the stalls, 92% without). Both settings are restored after the run."""
    gc.freeze()  # without a collect first (0.2 s with litellm loaded): startup garbage waits for unfreeze
    threshold = gc.get_threshold()
    gc.set_threshold(max(RUN_GC_THRESHOLD, threshold[0]), *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


class OwnedProcess:
    """The process-wide settings of the `ifsweep` command's sweep, each at the point run_sweep calls it."""

    def prepare(self) -> None:
        """Before the run directory is opened: glibc's mmap threshold fixed (runner/engine/memory.py)."""
        steady_allocator()

    def frozen(self) -> contextlib.AbstractContextManager[None]:
        """Around the running sweep, once everything it starts with is loaded: the GC freeze and the
        young generation's threshold (frozen_heap)."""
        return frozen_heap()

    def trim(self) -> None:
        """Every summary (2 s), on a worker thread: free heap pages back to the system."""
        return_free_memory()

    async def watch(
        self, stop: StopControl, deadline_s: float, scope: anyio.CancelScope, store: RunStore
    ) -> None:
        """First Ctrl-C (or SIGTERM): no new pair starts, in-flight calls get `deadline_s`. Second: flush
        and leave now. Needs the main thread (signal handlers live there)."""
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                if stop.stopped and stop.reason == "interrupted":
                    store.flush()
                    print(
                        "\n[ifsweep] second interrupt: exiting now; the run is resumable",
                        file=sys.stderr,
                        flush=True,
                    )
                    os._exit(130)
                stop.stop("interrupted")
                print(
                    f"\n[ifsweep] interrupted: finishing calls in flight (up to {deadline_s:.0f} s); "
                    "Ctrl-C again to exit now",
                    file=sys.stderr,
                    flush=True,
                )
                scope.deadline = min(scope.deadline, anyio.current_time() + deadline_s)
