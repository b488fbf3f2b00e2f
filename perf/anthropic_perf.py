"""Anthropic over its own protocol: an EIFBench judge's cache and bill, batch against interactive, and a
kill -9 while polling Message Batches.

Every model is an Anthropic model at the simulator's Messages API (`api_base` its root; prices from
LiteLLM's map): `--models` answering models (up to 4: claude-haiku-4-5, claude-opus-4-5, ...) and
claude-sonnet-4-5 judging the EIFBench party set (`--data`, else the real one beside the checkout, else
the sample; `--limit` tasks).
1. Interactive through LiteLLM's anthropic route, warm-then-fan-out on: the judge's prompt tokens read
   from cache (cache_read_input_tokens) and written to it, and the judge's spend against the bill the
   simulator draws up from its own counts at the map's input, cache-read, cache-write and output prices.
2. The same sweep with the models and the judge in batch mode (Message Batches): dollars of both, the
   ratio (goal: at most 0.52) and whether every verdict is identical.
3. The batch sweep as a real `ifsweep run` subprocess, killed with SIGKILL while it polls its batches
   (the simulator holds them), then resumed: requests of the killed run submitted again (goal: 0).

    python perf/anthropic_perf.py --models 2 --limit 10

Figures, not assertions; the script exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from batch_perf import run, summary, verdicts

from ifsweep import benchmarks
from ifsweep.providers.pricing import litellm_price
from ifsweep.providers.records import Price
from ifsweep.runner.store.shards import scan_shards
from ifsweep.simulator import SimConfig, SimulatorThread
from ifsweep.simulator.config import BatchSettings
from ifsweep.simulator.stats import Served

SHARED = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "EIFBench"
# Answering models (each its own answers at the simulator) and the judge, all in LiteLLM's map.
MODELS = ("claude-haiku-4-5", "claude-opus-4-5", "claude-sonnet-4-6", "claude-haiku-4-5-20251001")
JUDGE = "anthropic/claude-sonnet-4-5"
BATCH = "max_requests = 1000, max_age_s = 1, poll_s = 0.25, poll_max_s = 2"


def config(out: Path, root: str, models: int, limit: int, data: Path, batch: bool, judge: str = JUDGE) -> str:
    extra = f'api_base = "{root}"' + (f"\nbatch = {{ {BATCH} }}" if batch else "")
    lines = ["[run]", f'output_dir = "{out}"', 'progress = "off"', "concurrency = 64", ""]
    lines += ["[[benchmarks]]", 'name = "eifbench"', f'data = "{data}"', 'scenario = "party"']
    lines += [f"limit = {limit}", ""]
    # Never the judge's own model: the simulator's log tells models apart by name alone.
    for name in [m for m in MODELS if f"anthropic/{m}" != judge][:models]:
        lines += ["[[models]]", f'id = "{name}"', f'model = "anthropic/{name}"', extra]
        lines += ["params = { temperature = 0, max_tokens = 512 }", ""]
    lines += ["[judge]", f'model = "{judge}"', extra, "params = { temperature = 0, max_tokens = 256 }", ""]
    return "\n".join(lines)


def bill(served: Iterable[Served], price: Price) -> float:
    """What the simulated provider charges for what it served, from its own counts."""
    total = 0.0
    for s in served:
        plain = s.prompt_tokens - s.cached_tokens - s.cache_write_tokens
        total += (
            plain * price.input_per_mtok
            + s.cached_tokens * (price.cached_input_per_mtok or price.input_per_mtok)
            + s.cache_write_tokens * (price.cache_write_per_mtok or price.input_per_mtok)
            + s.output_tokens * price.output_per_mtok
        )
    return total / 1e6


def judge_spend(run_dir: Path) -> float:
    return sum(
        float(r.get("cost_usd") or 0.0)
        for r in (sl.record() for sl in scan_shards(run_dir, kinds=("judgment",)))
    )


def cache_and_batch(tmp: Path, args: argparse.Namespace, data: Path) -> bool:
    price = litellm_price(args.judge)
    assert price is not None
    name = args.judge.partition("/")[2]
    with SimulatorThread(SimConfig(seed=7, batch=BatchSettings(delay_s=args.delay_s))) as sim:
        code_i, wall_i = run(
            tmp,
            "inter",
            config(tmp / "inter", sim.root_url, args.models, args.limit, data, False, args.judge),
        )
        judged = [s for s in sim.stats.log if s.model == name]
        code_b, wall_b = run(
            tmp, "batch", config(tmp / "batch", sim.root_url, args.models, args.limit, data, True, args.judge)
        )
        batched = [s for s in sim.stats.log if s.model == name and s.batch]
        created = sim.stats.batches_created
    share = sum(s.cached_tokens for s in judged) / max(1, sum(s.prompt_tokens for s in judged))
    written = sum(s.cache_write_tokens for s in judged) / max(1, sum(s.prompt_tokens for s in judged))
    spent, billed = judge_spend(tmp / "inter"), bill(judged, price)
    print(
        f"data: {data} (party, {args.limit} tasks), {args.models} models, judge {args.judge} "
        "(LiteLLM map prices)"
    )
    print(
        f"interactive judge: {len(judged)} calls, {share:.1%} of prompt tokens read from cache, "
        f"{written:.1%} written; spent ${spent:.4f}, the simulator's bill ${billed:.4f} "
        f"(difference ${spent - billed:+.2e}); exit {code_i}, {wall_i:.1f} s"
    )
    si, sb = summary(tmp / "inter"), summary(tmp / "batch")
    same = verdicts(tmp / "inter") == verdicts(tmp / "batch")
    ratio = sb["spent_usd"] / si["spent_usd"] if si["spent_usd"] else float("nan")
    b_share = sum(s.cached_tokens for s in batched) / max(1, sum(s.prompt_tokens for s in batched))
    b_billed = bill(batched, price.for_batch())
    print(
        f"batch: {created} Message Batches, judge {b_share:.1%} read from cache, judge spent "
        f"${judge_spend(tmp / 'batch'):.4f}, billed ${b_billed:.4f}; exit {code_b}, {wall_b:.1f} s"
    )
    print(
        f"sweep: interactive ${si['spent_usd']:.4f}, batch ${sb['spent_usd']:.4f}: ratio {ratio:.3f} "
        f"(goal <= 0.52); verdicts identical: {same}"
    )
    return code_i == 0 and code_b == 0 and same and ratio <= 0.52 and abs(spent - billed) < 1e-9


def kill_and_resume(tmp: Path, args: argparse.Namespace, data: Path) -> bool:
    with SimulatorThread(SimConfig(seed=7, batch=BatchSettings(delay_s=3600))) as sim:
        run_dir, cfg = tmp / "killed", tmp / "killed.toml"
        cfg.write_text(config(run_dir, sim.root_url, args.models, args.limit, data, True, args.judge))
        command = [sys.executable, "-m", "ifsweep.runner.commands.cli", "run", str(cfg)]
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and sim.stats.batches_created < 1:
            time.sleep(0.05)
        time.sleep(1.0)  # polling them
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        before, submitted = sim.stats.batches_created, dict(sim.stats.batch_requests)
        sim.set_config(SimConfig(seed=7, batch=BatchSettings(delay_s=args.delay_s)))
        code, wall = run(tmp, "killed", cfg.read_text())
        after, counts = sim.stats.batches_created, sim.stats.batch_requests
    again = sum(1 for k in submitted if counts[k] > 1)
    same = verdicts(run_dir) == verdicts(tmp / "batch")
    print(
        f"kill -9 while polling: {before} Message Batches ({len(submitted)} requests) open at the kill; "
        f"resume: exit {code}, {after - before} new batches, {wall:.1f} s; requests submitted again: "
        f"{again}; most submissions of one request: {max(counts.values())}; verdicts identical: {same}"
    )
    return code == 0 and again == 0 and max(counts.values()) == 1 and same


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", type=int, default=2)
    p.add_argument("--limit", type=int, default=10, help="EIFBench party tasks")
    p.add_argument("--data", type=Path, default=None, help="EIFBench's folder")
    p.add_argument(
        "--judge",
        default=JUDGE,
        help="the judge (claude-haiku-4-5 caches only from 4,096 tokens: simulator/prefix.py)",
    )
    p.add_argument("--delay-s", type=float, default=1.0, help="how long a simulated batch takes")
    args = p.parse_args()
    data = args.data or (SHARED if SHARED.is_dir() else benchmarks.get("eifbench").fixture_dir())
    with tempfile.TemporaryDirectory() as d:
        ok = cache_and_batch(Path(d), args, data)
        ok &= kill_and_resume(Path(d), args, data)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
