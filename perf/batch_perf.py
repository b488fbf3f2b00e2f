"""Batch mode against interactive on the same simulated sweep, and a kill -9 while polling.

1. The judged EIFBench party set (the real one beside the checkout when present, else the built-in
   sample; `--limit` tasks) for `--models` simulated models, run twice against the simulator: every call
   interactive, then the models and the judge in batch mode (`batch = { ... }`). Prints both runs'
   dollars, the ratio (goal: at most 0.52) and whether every verdict is identical.
2. The batch sweep again as a real `ifsweep run` subprocess, killed with SIGKILL once its first batches
   are submitted and it is polling them (the simulator holds them `--delay-s`), then resumed: prints the
   batches the simulator created before and after the kill and the most often any request (custom_id)
   was submitted (goal: 1, and every request of the killed run collected from its own batch).

    python perf/batch_perf.py --models 4 --limit 20

Figures, not assertions; the script exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ifsweep import benchmarks
from ifsweep.runner.commands.cli import main as cli_main
from ifsweep.runner.store.shards import scan_shards
from ifsweep.simulator import SimConfig, SimulatorThread
from ifsweep.simulator.config import BatchSettings

SHARED = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "EIFBench"
PRICE = "price = { input_per_mtok = 2.5, output_per_mtok = 10.0 }"  # gpt-4o's list price


def config(out: Path, base: str, models: int, limit: int, data: Path, batch: str | None) -> str:
    extra = PRICE + (f"\nbatch = {{ {batch} }}" if batch else "")
    lines = ["[run]", f'output_dir = "{out}"', 'progress = "off"', "concurrency = 64", ""]
    lines += ["[[benchmarks]]", 'name = "eifbench"', f'data = "{data}"', 'scenario = "party"']
    lines += [f"limit = {limit}", ""]
    for i in range(models):
        lines += [
            "[[models]]",
            f'id = "m{i}"',
            f'model = "openai/sim-m{i}"',
            f'api_base = "{base}"',
            "params = { temperature = 0, max_tokens = 512 }",
            extra,
            "",
        ]
    lines += ["[judge]", 'model = "openai/sim-judge"', f'api_base = "{base}"', extra]
    lines += ["params = { temperature = 0, max_tokens = 256 }", ""]
    return "\n".join(lines)


def verdicts(run_dir: Path) -> dict[tuple[str, str], Any]:
    return {
        (r["model"], r["instance_id"]): r["rows"]
        for r in (sl.record() for sl in scan_shards(run_dir, kinds=("verdict",)))
    }


def summary(run_dir: Path) -> dict[str, Any]:
    out: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    return out


def run(tmp: Path, name: str, text: str) -> tuple[int, float]:
    cfg = tmp / f"{name}.toml"
    cfg.write_text(text)
    started = time.perf_counter()
    code = cli_main(["run", str(cfg)])
    return code, time.perf_counter() - started


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", type=int, default=4)
    p.add_argument("--limit", type=int, default=20, help="EIFBench party tasks")
    p.add_argument("--latency-ms", type=float, default=200.0, help="the simulator's interactive latency")
    p.add_argument("--delay-s", type=float, default=1.0, help="how long a simulated batch takes")
    args = p.parse_args()
    data = SHARED if SHARED.is_dir() else benchmarks.get("eifbench").fixture_dir()
    batch = "max_requests = 1000, max_age_s = 1, poll_s = 0.25, poll_max_s = 2"
    ok = True
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        sim_cfg = SimConfig(latency_ms=args.latency_ms, seed=7, batch=BatchSettings(delay_s=args.delay_s))
        with SimulatorThread(sim_cfg) as sim:
            code_i, wall_i = run(
                tmp, "inter", config(tmp / "inter", sim.base_url, args.models, args.limit, data, None)
            )
            chat = sim.stats.requests
            code_b, wall_b = run(
                tmp, "batch", config(tmp / "batch", sim.base_url, args.models, args.limit, data, batch)
            )
            created = sim.stats.batches_created
            chat_in_batch = sim.stats.requests - chat
        si, sb = summary(tmp / "inter"), summary(tmp / "batch")
        same = verdicts(tmp / "inter") == verdicts(tmp / "batch")
        ratio = sb["spent_usd"] / si["spent_usd"] if si["spent_usd"] else float("nan")
        print(f"data: {data} (party, {args.limit} tasks), {args.models} models, judge gpt-4o prices")
        print(f"interactive: exit {code_i}, {chat} calls, ${si['spent_usd']:.4f}, {wall_i:.1f} s")
        print(
            f"batch:       exit {code_b}, {created} batches, {chat_in_batch} interactive calls, "
            f"${sb['spent_usd']:.4f}, {wall_b:.1f} s"
        )
        print(f"cost ratio batch / interactive: {ratio:.3f} (goal <= 0.52); verdicts identical: {same}")
        ok &= code_i == 0 and code_b == 0 and same and ratio <= 0.52

        # --- kill -9 while polling, then resume
        with SimulatorThread(SimConfig(seed=7, batch=BatchSettings(delay_s=3600))) as sim:
            run_dir = tmp / "killed"
            cfg = tmp / "killed.toml"
            cfg.write_text(config(run_dir, sim.base_url, args.models, args.limit, data, batch))
            proc = subprocess.Popen(
                [sys.executable, "-m", "ifsweep.runner.commands.cli", "run", str(cfg)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and sim.stats.batches_created < args.models:
                time.sleep(0.05)
            time.sleep(1.0)  # polling them
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            before = sim.stats.batches_created
            submitted = dict(sim.stats.batch_requests)
            states = [sl.record().get("state") for sl in scan_shards(run_dir, kinds=("batch",))]
            sim.set_config(SimConfig(seed=7, batch=BatchSettings(delay_s=args.delay_s)))
            code_r, wall_r = run(tmp, "killed", cfg.read_text())
            after = sim.stats.batches_created
            most = max(sim.stats.batch_requests.values())
            again = sum(1 for k in submitted if sim.stats.batch_requests[k] > 1)
        same_r = verdicts(run_dir) == verdicts(tmp / "batch")
        print(
            f"kill -9 while polling: {before} batches ({len(submitted)} requests) created before the kill, "
            f"{states.count('submitted')} recorded as submitted"
        )
        print(
            f"resume: exit {code_r}, {after - before} new batches, {wall_r:.1f} s; requests of the killed "
            f"run "
            f"submitted again: {again}; most submissions of one request: {most}; verdicts identical: {same_r}"
        )
        ok &= code_r == 0 and again == 0 and most == 1 and same_r
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
