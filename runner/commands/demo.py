"""`ifsweep demo`: three simulated models and a simulated judge over the built-in sample of every
benchmark, through the same code path as a real sweep (LiteLLM resolution, HTTP, shards, metrics)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from ifsweep import benchmarks

if TYPE_CHECKING:
    from ifsweep.runner.engine.process import OwnedProcess

DEMO_MODELS = ("sim-alpha", "sim-beta", "sim-gamma")
# gpt-4o-mini's prices, its cached input included: the simulator caches prompt prefixes as OpenAI does.
DEMO_PRICE = {"input_per_mtok": 0.15, "output_per_mtok": 0.60, "cached_input_per_mtok": 0.075}


def demo_config(out: Path, api_base: str, server_id: str) -> dict[str, Any]:
    """The sweep the demo runs, as the TOML tables a user would write. `server_id` names the demo's own
    simulator in the result keys, so a second demo, whose simulator listens on another port, resumes."""
    return {
        "run": {"output_dir": str(out.resolve()), "max_usd": 1.0, "concurrency": 32, "progress": "plain"},
        # Every registered benchmark that loads (a broken plugin leaves the demo to the others).
        "benchmarks": [
            {"name": bench.name, "data": str(bench.fixture_dir())}
            for bench in benchmarks.load_all().benchmarks
        ],
        "models": [
            {
                "id": m,
                "model": f"openai/{m}",
                "api_base": api_base,
                "server_id": server_id,
                "params": {"temperature": 0, "max_tokens": 256},
                "price": DEMO_PRICE,
                "max_concurrency": 8,
            }
            for m in DEMO_MODELS
        ],
        "judge": {
            "id": "sim-judge",
            "model": "openai/sim-judge",
            "api_base": api_base,
            "server_id": server_id,
            "params": {"temperature": 0, "max_tokens": 256},
            "price": DEMO_PRICE,
            "max_concurrency": 16,
        },
    }


async def _demo(out: Path, process: OwnedProcess | None) -> int:
    from ifsweep import metrics
    from ifsweep.runner.commands.rundir import compute
    from ifsweep.runner.config import parse_config
    from ifsweep.runner.engine.sweep import check_ready, load_work, run_sweep
    from ifsweep.runner.store.compact import load_verdict_rows
    from ifsweep.simulator import SimConfig, Simulator

    sim_config = SimConfig(latency_ms=15, jitter_ms=10, seed=7)
    async with Simulator(sim_config) as sim:
        cfg = parse_config(
            demo_config(out, sim.base_url, sim_config.server_id), out / "demo.toml", check_env=False
        )
        work = load_work(cfg)
        check_ready(cfg, work)
        print(f"[ifsweep demo] simulator at {sim.base_url}; run directory {out}", file=sys.stderr)
        result = await run_sweep(cfg, work, process=process)
    print(
        f"[ifsweep demo] {result.status}: {result.done}/{result.planned} done, {result.errors} errors, "
        f"simulated spend ${result.spent_usd:.4f}",
        file=sys.stderr,
    )
    table, catalog = compute(load_verdict_rows(out))
    print(metrics.render_table(table, catalog))
    print(f"\nNext: `ifsweep report {out} --format html --out {out}/report.html`", file=sys.stderr)
    return result.exit_code


def run_demo(out: Path, process: OwnedProcess | None = None) -> int:
    """The demo sweep into `out`; `process` as for run_sweep (the CLI passes it)."""
    out.mkdir(parents=True, exist_ok=True)
    code: int = anyio.run(_demo, out, process)
    return code
