"""The Python API against the simulator: `ifsweep.run` from a worker thread and inside a running event
loop, `ifsweep.arun` cancelled mid-sweep (flushed, resumable, nothing paid twice), the read-side
functions, and no process-wide state touched (signal handlers, garbage collector, allocator)."""

from __future__ import annotations

import asyncio
import gc
import json
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import polars as pl
import pytest
from sweeps import stored_records
from test_signals import wait_until

import ifsweep
from ifsweep import benchmarks
from ifsweep.runner.engine.process import RUN_GC_THRESHOLD, OwnedProcess
from ifsweep.simulator import SimConfig, SimulatorThread

PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}  # a known price: LiteLLM stays unloaded
PAIRS = 24  # 2 models x 12 CFBench fixture instances


def config(out: Path | str, base: str, **run: Any) -> dict[str, Any]:
    """A sweep as a dict: two simulated models and a judge over the CFBench sample."""
    models = [
        {"id": m, "model": f"openai/sim-{m}", "api_base": base, "price": PRICE, "params": {"max_tokens": 64}}
        for m in ("a", "b")
    ]
    return {
        "run": {"output_dir": str(out), "progress": "off", "concurrency": 4, **run},
        "benchmarks": [{"name": "cfbench", "data": str(benchmarks.get("cfbench").fixture_dir())}],
        "models": models,
        "judge": {"model": "openai/sim-judge", "api_base": base, "price": PRICE},
    }


@pytest.fixture
def sim() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimConfig(seed=4)) as s:
        yield s


def process_state() -> tuple[Any, Any, int, tuple[int, int, int]]:
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    return (*handlers, gc.get_freeze_count(), gc.get_threshold())


def summary(out: Path) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return body


def test_importing_ifsweep_loads_nothing() -> None:
    code = (
        "import sys, ifsweep\n"
        "heavy = ('polars', 'anyio', 'aiohttp', 'litellm', 'numpy', 'orjson')\n"
        "print(sorted(m for m in sys.modules if m.startswith('ifsweep.') or m.split('.')[0] in heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    # ifsweep.exports is the list of the library's names (api/exports.py, which imports nothing).
    assert out.stdout.strip() == "['ifsweep.exports']"


def test_run_from_a_worker_thread(tmp_path: Path, sim: SimulatorThread) -> None:
    before = process_state()
    results: list[ifsweep.SweepResult] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(ifsweep.run(config(tmp_path / "run", sim.base_url)))
        except BaseException as e:  # surfaced below, in the test's thread
            errors.append(e)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive() and errors == []
    (result,) = results
    assert (result.status, result.exit_code, result.done, result.planned) == ("complete", 0, PAIRS, PAIRS)
    assert result.spent_usd > 0
    assert process_state() == before


def test_arun_and_run_inside_a_running_event_loop(tmp_path: Path, sim: SimulatorThread) -> None:
    """As in a notebook: `await ifsweep.arun(...)` on the loop that is running, and the blocking
    `ifsweep.run(...)` called from code running on that loop."""
    seen: list[tuple[Any, Any, int]] = []
    before: list[tuple[Any, Any, int]] = []  # as the running loop set it up (asyncio.run's own handler)

    async def watch() -> None:
        while True:  # what the process looks like while the sweep runs
            seen.append(process_state())
            await asyncio.sleep(0.01)

    async def main() -> tuple[ifsweep.SweepResult, ifsweep.SweepResult]:
        before.append(process_state())
        watcher = asyncio.ensure_future(watch())
        try:
            first = await ifsweep.arun(config(tmp_path / "async", sim.base_url))
        finally:
            watcher.cancel()
        second = ifsweep.run(config(tmp_path / "blocking", sim.base_url))  # blocks this loop: allowed
        assert process_state() == before[0]
        return first, second

    first, second = asyncio.run(main())
    assert first.status == second.status == "complete" and first.done == second.done == PAIRS
    assert len(seen) >= 2 and set(seen) == set(before)  # no freeze, no handler, during the sweep either
    # The second sweep reused nothing (its own run directory) but the simulator saw the same bodies.
    assert max(sim.stats.bodies.values()) == 2


def test_cancelling_arun_flushes_and_the_same_call_resumes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with SimulatorThread(SimConfig(latency_ms=300, seed=9)) as sim:
        cfg = config(out, sim.base_url)

        async def cancel_mid_sweep() -> int:
            async with anyio.create_task_group() as tg:
                tg.start_soon(ifsweep.arun, cfg)
                # Some answers are in and more are in flight (watched from a thread: the loop runs on).
                await anyio.to_thread.run_sync(wait_until, lambda: sim.stats.status_counts[200] >= 8)
                in_flight = sim.stats.in_flight
                tg.cancel_scope.cancel()
            return in_flight

        in_flight = anyio.run(cancel_mid_sweep)
        assert summary(out)["status"] == "interrupted"
        stored = stored_records(out, {"generation", "judgment"})  # the store's lock was released
        assert 0 < len(stored) < sim.stats.requests + 1
        sent_before = sim.stats.requests

        sim.set_config(SimConfig(seed=9))
        result = ifsweep.run(cfg)
        assert (result.status, result.done) == ("complete", PAIRS)
        # Resuming sent only what had not been answered and stored: the calls cut off in flight.
        resent = sum(n - 1 for n in sim.stats.bodies.values())
        assert resent <= max(in_flight, sent_before - len(stored))
        assert resent <= 4 + 4  # at most the calls in flight (concurrency 4) and their judge calls


def test_a_dict_config_resolves_relative_paths_against_the_working_directory(
    tmp_path: Path, sim: SimulatorThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = config("runs/rel", sim.base_url)
    fixture = benchmarks.get("cfbench").fixture_dir()
    (tmp_path / "data").symlink_to(fixture)
    cfg["benchmarks"][0]["data"] = "data"
    assert ifsweep.run(cfg).status == "complete"
    assert (tmp_path / "runs" / "rel" / "summary.json").is_file()
    with pytest.raises(ifsweep.ConfigError, match=r"config dict: benchmarks\[0\]\.name: unknown benchmark"):
        ifsweep.plan({**cfg, "benchmarks": [{"name": "nope"}]})


def test_plan_status_verdicts_scores_and_report(tmp_path: Path, sim: SimulatorThread) -> None:
    out = tmp_path / "run"
    cfg = config(out, sim.base_url)
    estimates = ifsweep.plan(cfg)
    assert [(e.model, e.benchmark, e.calls) for e in estimates] == [
        ("a", "cfbench", 12),
        ("b", "cfbench", 12),
    ]
    assert ifsweep.run(cfg).status == "complete"

    rows = ifsweep.status(out)
    assert [(r.model, r.benchmark, r.planned, r.done, r.errors) for r in rows] == [
        ("a", "cfbench", 12, 12, 0),
        ("b", "cfbench", 12, 12, 0),
    ]
    assert all(isinstance(r, ifsweep.StatusRow) and r.spent_usd > 0 for r in rows)

    v = ifsweep.verdicts(out)
    assert isinstance(v, pl.DataFrame) and v.height > 0
    assert set(v.get_column("benchmark").to_list()) == {"cfbench"}

    s = ifsweep.scores(out)
    # A run directory's scores say how far each pair's plan is (issue 31): 12 of 12 instances here.
    assert set(s.columns) == {
        "benchmark",
        "model",
        "judge",
        "metric",
        "slice",
        "value",
        "n",
        "planned",
        "done",
    }
    assert set(s.select("planned", "done").unique().rows()) == {(12, 12)}
    assert {"CSR", "ISR", "PSR", "coverage"} <= set(s.get_column("metric").to_list())
    # The same numbers from the rows themselves, and from a file of them (which know no plan).
    figures = s.drop("planned", "done")
    assert ifsweep.scores(v).equals(figures)
    v.write_parquet(tmp_path / "rows.parquet")
    assert ifsweep.scores(tmp_path / "rows.parquet").equals(figures)
    with_ci = ifsweep.scores(out, ci=True)
    assert {"ci_low", "ci_high"} <= set(with_ci.columns)

    table = ifsweep.report(out)
    assert "CFBench (2 models)" in table and "PSR %" in table
    page = tmp_path / "report.html"
    assert ifsweep.report(out, "html", out=page).startswith("<!DOCTYPE html>")
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    with pytest.raises(ValueError, match="format must be one of"):
        ifsweep.report(out, "pdf")


def test_the_library_never_loads_the_process_settings(tmp_path: Path, sim: SimulatorThread) -> None:
    """In a fresh interpreter: a sweep through the library imports neither the allocator settings nor
    the signal and GC handling (runner/engine/process.py), which the command alone uses."""
    code = textwrap.dedent(
        """
        import gc, json, signal, sys
        import ifsweep
        cfg = json.loads(sys.argv[1])
        handlers = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
        result = ifsweep.run(cfg)
        print(result.status)
        owned = ("ifsweep.runner.engine.memory", "ifsweep.runner.engine.process")
        print(sorted(m for m in owned if m in sys.modules))
        print(handlers == (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)))
        print(gc.get_freeze_count())
        """
    )
    arg = json.dumps(config(tmp_path / "run", sim.base_url))
    done = subprocess.run(
        [sys.executable, "-c", code, arg], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:4] == ["complete", "[]", "True", "0"]


def test_ctrl_c_during_run_cancels_the_sweep_and_leaves_it_resumable(tmp_path: Path) -> None:
    """KeyboardInterrupt in the thread blocked in `ifsweep.run` (a script's Ctrl-C, a notebook's
    interrupt): the sweep on the worker thread is cancelled and flushed before the interrupt goes on."""
    code = textwrap.dedent(
        """
        import json, sys
        import ifsweep
        try:
            ifsweep.run(json.loads(sys.argv[1]))
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        """
    )
    out = tmp_path / "run"
    with SimulatorThread(SimConfig(latency_ms=400, seed=6)) as sim:
        cfg = config(out, sim.base_url)
        proc = subprocess.Popen(
            [sys.executable, "-c", code, json.dumps(cfg)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_until(lambda: sim.stats.status_counts[200] >= 6)
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0 and stdout.strip() == "interrupted", stderr
        assert summary(out)["status"] == "interrupted"
        sim.set_config(SimConfig(seed=6))
        assert ifsweep.run(cfg).status == "complete"
        assert sum(n - 1 for n in sim.stats.bodies.values()) <= 4 + 4


def test_the_command_collects_young_garbage_less_often_during_its_sweep_only() -> None:
    # What the command (OwnedProcess) does around its sweep: the event loop's short-lived cycles cost
    # 2-4% of a latency-0 sweep's CPU at Python's threshold of 700; both settings come back after.
    before = gc.get_threshold(), gc.get_freeze_count()
    with OwnedProcess().frozen():
        assert gc.get_threshold() == (max(RUN_GC_THRESHOLD, before[0][0]), *before[0][1:])
        assert RUN_GC_THRESHOLD > 700 and gc.get_freeze_count() > 0
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
