"""CPU the progress view costs per refresh at 200 models, against what a sweep spends per call.

Baseline: a real sweep (`run_sweep`, progress off) of 40 simulated models over FollowBench's and
CFBench's fixtures (57 pairs, 94 calls per model), the simulator in a SUBPROCESS so it does not share
our core; CPU ms per call = process_time over the sweep (set-up included) / calls made.

The view: a ProgressState of 200 models over three benchmarks of different shapes (none, one and
eighty judge calls per pair) and a judge, fed real EndpointStats records, its counters advanced
between refreshes as a sweep would (an injected clock, 0.5 s per refresh). Reported per refresh:
the board (sampling, reading, the ETA walk when due), the walk alone, drawing the rich table (a
120 x 40 terminal) and the plain line. The walk is redone at most every ETA_EVERY_S and never more
often than COST_SHARE of the time, so its cost is also given amortized.

    python perf/progress_perf.py            # 200 models, 120 refreshes
    python perf/progress_perf.py --models 40
"""

from __future__ import annotations

import argparse
import io
import tempfile
import time
from pathlib import Path

import anyio
from client_overhead import start_simulator

from ifsweep import benchmarks
from ifsweep.providers import EndpointStats
from ifsweep.runner.config import load_config
from ifsweep.runner.engine.sweep import load_work, run_sweep
from ifsweep.runner.store.shards import RunStore
from ifsweep.runner.watch.board import plain_line, rich_board
from ifsweep.runner.watch.outcomes import Counters
from ifsweep.runner.watch.progress import RICH_EVERY_S, VIEW_SHARE, ProgressState
from ifsweep.runner.watch.reading import SweepPlan
from ifsweep.runner.watch.workload import BenchShape

SHAPES = {  # FollowBench-like, CFBench-like, EIFBench-party-like
    "fb": BenchShape(judge_calls=0.57, judge_depth=0.57, prompt_tokens=400, judge_prompt_tokens=1000),
    "cf": BenchShape(judge_calls=1.0, judge_depth=1.0, prompt_tokens=300, judge_prompt_tokens=2000),
    "eif": BenchShape(judge_calls=80.0, judge_depth=1.0, prompt_tokens=900, judge_prompt_tokens=2100),
}
PLANNED = {"fb": 820, "cf": 1000, "eif": 100}


def sweep_cost_per_call(models: int) -> tuple[float, int]:
    """(CPU ms per call, calls) of a real sweep with the progress view off."""
    proc, base = start_simulator()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cfg_path = Path(tmp) / "sweep.toml"
            lines = ["[run]", f'output_dir = "{Path(tmp) / "run"}"', 'progress = "off"', "concurrency = 64"]
            for bench in ("followbench", "cfbench"):
                data = benchmarks.get(bench).fixture_dir()
                lines += ["", "[[benchmarks]]", f'name = "{bench}"', f'data = "{data}"', ""]
            for i in range(models):
                lines += [
                    "[[models]]",
                    f'id = "m{i}"',
                    f'model = "openai/sim-m{i}"',
                    f'api_base = "{base}"',
                    "",
                ]
            lines += ["[judge]", 'id = "judge"', 'model = "openai/sim-judge"', f'api_base = "{base}"']
            cfg_path.write_text("\n".join(lines))
            cfg = load_config(cfg_path)
            work = load_work(cfg)
            cpu0 = time.process_time()
            result = anyio.run(lambda: run_sweep(cfg, work))
            cpu = time.process_time() - cpu0
            assert result.status == "complete", result
            calls = sum(1 for _ in RunStore.open(cfg.run.output_dir).iter_records({"generation", "judgment"}))
            return cpu * 1000 / calls, calls
    finally:
        proc.terminate()
        proc.wait()


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def stats(model: str, rpm: int | None, calls: int) -> EndpointStats:
    return EndpointStats(
        endpoint=model, calls=calls, in_flight=4, tokens_per_min=30_000, rpm_limit=rpm, tpm_limit=None,
        rpm_learned=False, tpm_learned=False, concurrency_limit=64, max_concurrency=64, backoff_until=None,
        rate_limited=0, errors=0, usage_estimated=0,
    )  # fmt: skip


def view_state(models: int) -> tuple[ProgressState, Clock, dict[tuple[str, str], Counters]]:
    clock = Clock()
    labels = [f"m{i}" for i in range(models)]
    # Sizes and paces differ by model, so the models move on to their next benchmark at different
    # moments: the walk then has one step per (model, benchmark), its worst case.
    counters = {
        (m, b): Counters(planned=n * (50 + (i * 37) % 100) // 100, started=0.0)
        for i, m in enumerate(labels)
        for b, n in PLANNED.items()
    }
    plan = SweepPlan(
        order=tuple(PLANNED), shapes=SHAPES, workers=dict.fromkeys(labels, 3), slots=256, judge="judge"
    )
    state = ProgressState(counters, spent=lambda _l: 1.0, caps={None: 100.0}, plan=plan, clock=clock)
    for i, m in enumerate(labels):
        state.endpoints[m] = lambda m=m, i=i: stats(f"openai/{m}", 60 + 10 * (i % 7), 0)
    state.endpoints["judge"] = lambda: stats("openai/judge", 600_000, 0)
    return state, clock, counters


def advance(counters: dict[tuple[str, str], Counters], step: int) -> None:
    """Each model does about a pair a second, benchmark by benchmark, at its own pace."""
    for (m, b), c in counters.items():
        i = int(m[1:])
        if c.done < c.planned and all(
            counters[(m, x)].done >= counters[(m, x)].planned for x in PLANNED if x != b and x < b
        ):
            n = 1 + (step + i) % (2 + i % 3)
            c.done = min(c.planned, c.done + n)
            c.calls += n
            c.judge.calls += round(n * SHAPES[b].judge_calls)
            c.input_tokens += 400 * n
            c.output_tokens += 200 * n
            c.latency_s += 0.4 * n
            c.judge.latency_s += 0.6 * n * SHAPES[b].judge_calls


def view_costs(models: int, refreshes: int) -> dict[str, float]:
    """CPU ms per refresh of each part of the view."""
    from rich.console import Console

    state, clock, counters = view_state(models)
    console = Console(file=io.StringIO(), width=120, height=40, force_terminal=True)
    board_cpu = render_cpu = plain_cpu = 0.0
    for step in range(refreshes):
        clock.t += RICH_EVERY_S
        advance(counters, step)
        t0 = time.process_time()
        board = state.board()
        t1 = time.process_time()
        console.print(rich_board(board, 40, 120))
        t2 = time.process_time()
        plain_line(board)
        t3 = time.process_time()
        board_cpu, render_cpu, plain_cpu = board_cpu + t1 - t0, render_cpu + t2 - t1, plain_cpu + t3 - t2
    reading = state.reading(clock.t, *_use(state), latency=True)
    lanes = reading.lanes()
    t0 = time.process_time()
    for _ in range(5):
        reading.outlook(lanes)
    walk = (time.process_time() - t0) / 5
    return {
        "board": board_cpu * 1000 / refreshes,
        "walk": walk * 1000,
        "rich": render_cpu * 1000 / refreshes,
        "plain": plain_cpu * 1000 / refreshes,
    }


def _use(state: ProgressState) -> tuple[dict[tuple[str, str], object], dict[str, object]]:
    from ifsweep.runner.watch.workload import Tally, use_by_endpoint

    tallies = {k: Tally.of(c) for k, c in state.counters.items()}
    return tallies, use_by_endpoint(tallies, "judge")  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", type=int, default=200)
    parser.add_argument("--refreshes", type=int, default=120)
    parser.add_argument("--sweep-models", type=int, default=40)
    args = parser.parse_args()
    per_call, calls = sweep_cost_per_call(args.sweep_models)
    costs = view_costs(args.models, args.refreshes)
    refresh = costs["board"] + costs["rich"]
    print(f"sweep: {per_call:.3f} CPU ms per call ({calls} calls, {args.sweep_models} models, progress off)")
    print(
        f"view at {args.models} models: board {costs['board']:.2f} ms per refresh (the ETA walk "
        f"{costs['walk']:.1f} ms when due), live table {costs['rich']:.2f} ms, "
        f"plain line {costs['plain']:.3f} ms"
    )
    every = max(RICH_EVERY_S, refresh / 1000 / VIEW_SHARE)  # as _run_rich waits
    share = refresh / 1000 / every
    print(
        f"one live refresh = {refresh / per_call:.1f} calls' worth of CPU; redrawn every {every:.2f} s "
        f"the view takes {100 * share:.2f}% of a core, {share * 1000 / per_call:.1f} calls/s' worth"
    )


if __name__ == "__main__":
    main()
