"""Real processes: kill -9 at random moments, and a full disk (RLIMIT_FSIZE), against
runner/store/shards.py."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from ifsweep.runner.store.shards import RunStore, record_key, scan_shards, shard_files

RUNNER = Path(__file__).resolve().parents[1] / "runner" / "store"

# The child loads runner/store/shards.py (and the index and lock modules it uses) by path, so the test
# does not depend on what runner/__init__ imports and a child starts in about 0.1 s.
PRELUDE = textwrap.dedent(
    f"""
    import importlib.util, sys
    for name in ("keyindex", "locks"):
        spec = importlib.util.spec_from_file_location(
            "ifsweep.runner.store." + name, {str(RUNNER)!r} + "/" + name + ".py"
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules["ifsweep.runner.store." + name] = module
        spec.loader.exec_module(module)
    spec = importlib.util.spec_from_file_location("shards_under_test", {str(RUNNER / "shards.py")!r})
    shards = importlib.util.module_from_spec(spec)
    sys.modules["shards_under_test"] = shards
    spec.loader.exec_module(shards)
    """
)

WRITER = PRELUDE + textwrap.dedent(
    """
    run_dir, n, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store = shards.RunStore.open(run_dir, flush_records=10**9, rotate_bytes=64 << 10)
    pending = 0
    for i in range(n):
        key = shards.record_key({"i": i})
        if store.done(key):
            continue
        rec = {"v": 1, "kind": "generation", "key": key, "status": "ok", "i": i, "text": "x" * (i % 300)}
        store.append(rec)
        pending += 1
        if pending == batch:
            store.flush()
            pending = 0
            print("committed", i + 1, flush=True)
    store.close()
    print("committed", n, flush=True)
    """
)


def expected(i: int) -> dict[str, object]:
    return {
        "v": 1,
        "kind": "generation",
        "key": record_key({"i": i}),
        "status": "ok",
        "i": i,
        "text": "x" * (i % 300),
    }


def committed(stdout: bytes) -> int:
    # Only whole lines: the kill may land in the middle of a print.
    whole = stdout.split(b"\n")[:-1]
    counts = [int(line.split()[1]) for line in whole if line.startswith(b"committed ")]
    return max(counts, default=0)


def test_kill_9_at_random_moments_loses_nothing_committed_and_writes_nothing_twice(tmp_path: Path) -> None:
    rng = random.Random(20261122)
    n = 100_000  # more than the trials write, so every kill lands mid-run
    seen_committed = 0
    trials = 24
    for trial in range(trials):
        batch = rng.choice([1, 2, 3, 17, 64, 5000])  # 5000: one ~1 MB write
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), str(n), str(batch)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        # The kill comes once the child has committed a random number more records, then within a few
        # ms: the progress is the same on a loaded machine and a quiet one (a delay from the start let a
        # loaded child commit nothing, a quiet one finish the run).
        assert proc.stdout is not None
        target, reported = seen_committed + rng.randint(50, 800), 0
        for line in proc.stdout:
            if line.startswith(b"committed "):
                reported = int(line.split()[1])
                if reported >= target:
                    break
        time.sleep(rng.uniform(0, 0.01))
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate()
        assert proc.returncode in (-signal.SIGKILL, 0), err.decode()
        # Everything the child reported committed (before this kill, or earlier) is there, intact.
        seen_committed = max(seen_committed, reported, committed(out))
        with RunStore.open(tmp_path, rotate_bytes=64 << 10) as s:
            for i in range(seen_committed):
                assert s.get(record_key({"i": i})) == expected(i), (trial, i)
            assert all(d.reason.startswith(("torn tail", "truncated")) for d in s.damaged), s.damaged
        # The reopen above cut any torn tail: the files now hold only whole, valid lines.
        damaged: list[object] = []
        keys = Counter(sl.key for sl in scan_shards(tmp_path, damaged))
        assert not damaged and max(keys.values(), default=1) == 1, trial
    # Finish the run without a kill: every key exactly once.
    done = subprocess.run(
        [sys.executable, "-c", WRITER, str(tmp_path), str(n), "100"],
        capture_output=True,
        check=True,
        timeout=120,
    )
    assert committed(done.stdout) == n
    recs = [sl.record() for sl in scan_shards(tmp_path)]
    assert sorted(r["i"] for r in recs) == list(range(n))  # type: ignore[type-var]
    assert all(r == expected(r["i"]) for r in recs)  # type: ignore[arg-type]
    assert len(shard_files(tmp_path)) > 1  # rotation happened along the way
    assert 0 < seen_committed < n - 1000  # the kills did interrupt the writer


FULL = PRELUDE + textwrap.dedent(
    """
    import resource, signal
    run_dir, limit = sys.argv[1], int(sys.argv[2])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    store = shards.RunStore.open(run_dir, flush_records=10, write_through=False)
    n = 0
    try:
        while True:
            store.append({"v": 1, "kind": "generation", "key": shards.record_key(n), "status": "ok", "n": n})
            n += 1
    except shards.DiskFullError as e:
        print("full", n, e, flush=True)
    try:
        store.flush()  # still full: raises again, writes nothing
    except shards.DiskFullError:
        print("still full", flush=True)
    try:
        store.close()
    except shards.DiskFullError:
        print("close full", flush=True)
    """
)


def test_full_disk_raises_disk_full_error_corrupts_nothing_and_appends_resume(tmp_path: Path) -> None:
    limit = 20_000
    proc = subprocess.run(
        [sys.executable, "-c", FULL, str(tmp_path), str(limit)], capture_output=True, timeout=60
    )
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()
    assert "full" in out and "disk full or file size limit" in out and "still ends whole" in out, out
    assert "still full" in out and "close full" in out
    path = shard_files(tmp_path)[0][2]
    data = path.read_bytes()
    assert 0 < len(data) <= limit and data.endswith(b"\n")
    appended = int(out.split()[1])
    with RunStore.open(tmp_path) as s:
        assert not s.damaged
        on_disk = s.index_size
        # Whole batches of 10 made it; the failed batch (and what followed) did not, and nothing is torn.
        assert on_disk % 10 == 0 and 0 < on_disk < appended
        for n in range(on_disk):
            assert s.get(record_key(n)) == {
                "v": 1,
                "kind": "generation",
                "key": record_key(n),
                "status": "ok",
                "n": n,
            }
        for n in range(on_disk, on_disk + 50):
            assert not s.done(record_key(n))
            s.append({"v": 1, "kind": "generation", "key": record_key(n), "status": "ok", "n": n})
    with RunStore.open(tmp_path) as s:
        assert not s.damaged and s.index_size == on_disk + 50


FULL_ASYNC = PRELUDE + textwrap.dedent(
    """
    import resource, signal, anyio
    run_dir, limit = sys.argv[1], int(sys.argv[2])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    store = shards.RunStore.open(run_dir, flush_records=10, flush_ms=5, write_through=False)
    n = 0

    async def produce():
        global n
        while True:
            record = {"v": 1, "kind": "generation", "key": shards.record_key(n), "status": "ok", "n": n}
            try:
                store.append(record)
            finally:
                # An append whose own flush met the full disk has still buffered its record: it counts.
                n += 1
            if n % 5 == 0:
                await anyio.sleep(0.001)

    async def main():
        async with anyio.create_task_group() as tg:
            tg.start_soon(store.flusher)
            tg.start_soon(produce)

    try:
        anyio.run(main)
    except BaseException as eg:
        errors = eg.exceptions if isinstance(eg, BaseExceptionGroup) else [eg]
        print("raised", [type(e).__name__ for e in errors], n, flush=True)
    # Everything appended is still held: the file ends whole, the unwritten records wait in the buffer.
    print("buffered", store._buf_count, "of", n, flush=True)
    """
)


def test_full_disk_under_the_async_flusher(tmp_path: Path) -> None:
    limit = 30_000
    proc = subprocess.run(
        [sys.executable, "-c", FULL_ASYNC, str(tmp_path), str(limit)], capture_output=True, timeout=60
    )
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()
    # The flusher's failure is the first error; an append that flushes on its own thread before the task
    # group has cancelled it (the flusher no longer runs) may meet the same full disk: one kind, no other.
    raised = out.split("raised [")[1].split("]")[0].replace("'", "").split(", ")
    assert set(raised) == {"DiskFullError"}, out
    buffered, appended = int(out.split("buffered ")[1].split()[0]), int(out.split()[-1])
    data = shard_files(tmp_path)[0][2].read_bytes()
    assert 0 < len(data) <= limit and data.endswith(b"\n")
    with RunStore.open(tmp_path) as s:
        assert not s.damaged
        assert s.index_size + buffered == appended  # nothing lost, nothing counted twice
        assert [r["n"] for r in s.iter_records()] == list(range(s.index_size))


@pytest.mark.parametrize("n", [1, 7])
def test_lock_is_released_when_the_writer_is_killed(tmp_path: Path, n: int) -> None:
    hold = PRELUDE + "s = shards.RunStore.open(sys.argv[1]); print('ready', flush=True); sys.stdin.read()"
    proc = subprocess.Popen(
        [sys.executable, "-c", hold, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    from ifsweep.runner.store.shards import WriterBusyError

    with pytest.raises(WriterBusyError):
        RunStore.open(tmp_path)
    proc.kill()
    proc.communicate()
    with RunStore.open(tmp_path) as s:
        for i in range(n):
            s.append(expected(i))


FULL_WRITE_THROUGH = PRELUDE + textwrap.dedent(
    """
    import resource, signal
    run_dir, limit = sys.argv[1], int(sys.argv[2])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    store = shards.RunStore.open(run_dir)  # write-through, the sweep's default
    n = 0
    try:
        while True:
            store.append({"v": 1, "kind": "generation", "key": shards.record_key(n), "status": "ok", "n": n})
            n += 1
    except shards.DiskFullError as e:
        print("full", n, flush=True)
    """
)


def test_full_disk_in_write_through_mode_keeps_every_returned_append(tmp_path: Path) -> None:
    limit = 20_000
    proc = subprocess.run(
        [sys.executable, "-c", FULL_WRITE_THROUGH, str(tmp_path), str(limit)], capture_output=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr.decode()
    appended = int(proc.stdout.decode().split()[1])
    data = shard_files(tmp_path)[0][2].read_bytes()
    assert 0 < len(data) <= limit and data.endswith(b"\n")
    # Every append that returned is on disk, whole; the one that failed left nothing behind.
    assert [sl.record()["n"] for sl in scan_shards(tmp_path)] == list(range(appended))
    with RunStore.open(tmp_path) as s:
        s.append({"v": 1, "kind": "generation", "key": record_key(appended), "status": "ok", "n": appended})
    assert len(list(scan_shards(tmp_path))) == appended + 1
