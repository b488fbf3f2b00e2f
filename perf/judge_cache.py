"""Cache-aware judge dispatch against today's fan-out (issue 13). Prints figures and ratios measured in
one run; not a test.

    python perf/judge_cache.py sim        # EIFBench party set, 4 simulated models, latency 200 ms
    python perf/judge_cache.py real       # llama.cpp (SmolLM2) as the judge: its per-slot prefix cache
    python perf/judge_cache.py sim --limit 25

sim: the same sweep twice, each on a fresh simulator (a cold cache) run in a subprocess: `cache_dispatch`
on (warm one call per shared prefix, then fan out) and off (every judge call of a task at once, as
before). From the shards: the share of the judge's prompt tokens served from cache, the judge's input
dollars at a price whose cached input costs 10% of input, and whether the verdicts are identical.
Goals: >= 80% cached, >= 60% fewer judge input dollars.

real: llama.cpp's prompt cache lives per slot; SmolLM2 reads a Chinese EIFBench judge prompt (about
5,000 of its tokens) in tens of seconds on this machine, so a whole task is out of reach: the first
N judge prompts of one party task (answer: a fixed text) go through the same endpoint, gate and hints
the pipeline uses (runner/engine/warmup.py), warmed-then-fanned-out against all at once. Cached tokens are
what the server reports (prompt_tokens_details.cached_tokens).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

from ifsweep import benchmarks
from ifsweep.providers.budget import Budget
from ifsweep.providers.pool import ProviderPool
from ifsweep.providers.records import Completion, EndpointSpec, Price
from ifsweep.runner.config import load_config
from ifsweep.runner.engine.sweep import check_ready, load_work, run_sweep
from ifsweep.runner.engine.warmup import WarmGate, hints_for
from ifsweep.runner.store.shards import RunStore

HERE = Path(__file__).resolve().parent
EIFBENCH = HERE.parents[1] / "shared" / "benchmarks" / "EIFBench"
MODELS = ("alpha", "beta", "gamma", "delta")
# A judge whose cached input costs 10% of its input (Anthropic's cache reads, OpenAI's newest models).
JUDGE_PRICE = Price(input_per_mtok=2.5, output_per_mtok=10.0, cached_input_per_mtok=0.25)


@contextmanager
def simulator(latency_ms: int) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ifsweep.simulator", "--latency-ms", str(latency_ms), "--seed", "13"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("listening on "):
            raise RuntimeError(f"simulator did not start: {line!r}")
        yield line.split()[-1]
    finally:
        proc.terminate()
        proc.wait(10)


def sweep_toml(out: Path, base: str, limit: int | None, dispatch: bool, concurrency: int) -> str:
    p = JUDGE_PRICE
    lines = [
        "[run]",
        f'output_dir = "{out}"',
        'progress = "off"',
        f"concurrency = {concurrency}",
        "",
        "[[benchmarks]]",
        'name = "eifbench"',
        f'data = "{EIFBENCH}"',
        f"limit = {limit}" if limit else "",
        "",
    ]
    for m in MODELS:
        lines += [
            "[[models]]",
            f'id = "{m}"',
            f'model = "openai/sim-{m}"',
            f'api_base = "{base}"',
            "params = { temperature = 0, max_tokens = 512 }",
            "",
        ]
    lines += [
        "[judge]",
        'id = "judge"',
        'model = "openai/sim-judge"',
        f'api_base = "{base}"',
        "params = { temperature = 0, max_tokens = 256 }",
        f"price = {{ input_per_mtok = {p.input_per_mtok}, output_per_mtok = {p.output_per_mtok}, "
        f"cached_input_per_mtok = {p.cached_input_per_mtok} }}",
        f"cache_dispatch = {'true' if dispatch else 'false'}",
    ]
    return "\n".join(lines)


def read_run(out: Path) -> dict[str, Any]:
    store = RunStore.open(out, writer_id="perf_reader")
    try:
        judged = list(store.iter_records({"judgment"}))
        verdicts = {(r["model"], r["instance_id"]): r["rows"] for r in store.iter_records({"verdict"})}
    finally:
        store.close()
    prompt = sum(r["input_tokens"] for r in judged)
    cached = sum(r["cached_tokens"] for r in judged)
    p = JUDGE_PRICE
    return {
        "calls": len(judged),
        "prompt": prompt,
        "cached": cached,
        "input_usd": ((prompt - cached) * p.input_per_mtok + cached * (p.cached_input_per_mtok or 0)) / 1e6,
        "spent": sum(r["cost_usd"] for r in judged),
        "verdicts": verdicts,
    }


def run_sim(args: argparse.Namespace) -> None:
    results = {}
    for dispatch in (False, True):
        name = "cache-aware" if dispatch else "fan-out"
        with tempfile.TemporaryDirectory() as tmp, simulator(args.latency_ms) as base:
            out = Path(tmp) / "run"
            cfg_path = Path(tmp) / "sweep.toml"
            cfg_path.write_text(sweep_toml(out, base, args.limit, dispatch, args.concurrency))
            cfg = load_config(cfg_path)
            work = load_work(cfg)
            check_ready(cfg, work)
            start = time.perf_counter()
            result = anyio.run(run_sweep, cfg, work)
            wall = time.perf_counter() - start
            figures = read_run(out)
        figures["wall"] = wall
        figures["status"] = result.status
        results[name] = figures
        print(
            f"{name:12s} status {result.status}, {figures['calls']} judge calls, {wall:.1f} s, "
            f"judge prompt {figures['prompt']:,} tokens, cached {figures['cached']:,} "
            f"({figures['cached'] / figures['prompt']:.1%}), judge input ${figures['input_usd']:.4f}",
            flush=True,
        )
    on, off = results["cache-aware"], results["fan-out"]
    print()
    print(
        f"cached share: cache-aware {on['cached'] / on['prompt']:.1%} "
        f"vs fan-out {off['cached'] / off['prompt']:.1%}"
    )
    print(
        f"judge input dollars (cached input at 10%): cache-aware / fan-out = "
        f"{on['input_usd'] / off['input_usd']:.3f} ({1 - on['input_usd'] / off['input_usd']:.1%} lower)"
    )
    full = on["prompt"] * JUDGE_PRICE.input_per_mtok / 1e6
    print(
        f"judge input dollars against today's settlement (every prompt token at the input price, "
        f"${full:.4f}): cache-aware {on['input_usd'] / full:.3f} ({1 - on['input_usd'] / full:.1%} lower)"
    )
    print(f"wall time: cache-aware / fan-out = {on['wall'] / off['wall']:.2f}")
    print(f"identical verdicts: {on['verdicts'] == off['verdicts']} ({len(on['verdicts'])} pairs)")


def real_prompts(n: int) -> list[list[dict[str, str]]]:
    bench = benchmarks.get("eifbench")
    inst = next(iter(bench.load(EIFBENCH, {})))
    answer = "好的，下面逐条回答各位的问题，并按要求给出简洁的说明。" * 8
    tasks = bench.plan(inst, answer, "paper").judge_tasks[:n]
    return [[m.as_dict() for m in t.messages_for_turn(0, ())] for t in tasks]


async def real_once(
    base: str, prompts: Sequence[list[dict[str, str]]], dispatch: bool
) -> tuple[float, list[Completion]]:
    spec = EndpointSpec(
        label="judge",
        model="openai/smollm2",
        api_base=base,
        params={"max_tokens": 8, "temperature": 0, "cache_prompt": True},
        timeout_s=3600.0,
        cache_dispatch=dispatch,
    )
    out: list[Completion | None] = [None] * len(prompts)
    async with ProviderPool(budget=Budget(None)) as pool:
        ep = pool.endpoint(spec)
        hints = hints_for(prompts, "perf") if ep.caches_prefixes else {}
        gate = WarmGate()

        async def one(i: int) -> None:
            hint = hints.get(i)
            async with gate.warm(hint.key if hint else None):
                out[i] = await ep.complete(prompts[i], hint)

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i in range(len(prompts)):
                tg.start_soon(one, i)
        wall = time.perf_counter() - start
    done = [c for c in out if c is not None]
    return wall, done


def run_real(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(HERE.parent / "tests"))
    from llamaserver import ServerShape, running
    from realmodel import BUILD_HINT, expected_paths

    paths = expected_paths()
    if not paths.server.exists() or not paths.gguf.exists():
        raise SystemExit(f"llama.cpp or SmolLM2 missing: {BUILD_HINT}")
    binary, gguf = paths.server, paths.gguf
    prompts = real_prompts(args.calls)
    for dispatch in (False, True):
        name = "cache-aware" if dispatch else "fan-out"
        with tempfile.TemporaryDirectory() as tmp:
            # SmolLM2 trains on 8,192 tokens: llama.cpp caps each slot there. With one KV buffer for all
            # slots (--kv-unified), llama.cpp keeps idle slots' prompts in its host-memory prompt cache
            # and restores them into any slot; without it, each slot caches only its own last prompt.
            unified = ("--kv-unified",) if args.kv_unified else ("--no-kv-unified",)
            shape = ServerShape(ctx=8192 * args.slots, slots=args.slots, threads=1, extra_args=unified)
            with running(binary, gguf, Path(tmp) / "llama.log", shape) as server:
                wall, done = asyncio.run(real_once(server.api_base, prompts, dispatch))
        errors = [c.error_message for c in done if c.status == "error"]
        prompt = sum(c.input_tokens for c in done)
        cached = sum(c.cached_tokens for c in done)
        print(
            f"{name:12s} {len(done)} judge calls ({len(errors)} errors), {args.slots} slots"
            f"{' (kv-unified)' if args.kv_unified else ''}, "
            f"wall {wall:.1f} s, "
            f"prompt {prompt:,} tokens, cached {cached:,} ({cached / max(prompt, 1):.1%})",
            flush=True,
        )
        if errors:
            print("  first error:", errors[0])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("tier", choices=("sim", "real"))
    p.add_argument("--limit", type=int, default=None, help="sim: EIFBench tasks (default: all 100)")
    p.add_argument("--latency-ms", type=int, default=200)
    p.add_argument("--concurrency", type=int, default=256)
    p.add_argument("--calls", type=int, default=8, help="real: judge prompts of one task")
    p.add_argument("--slots", type=int, default=2, help="real: llama.cpp slots")
    p.add_argument("--kv-unified", action="store_true", help="real: one KV buffer for every slot")
    args = p.parse_args()
    if not EIFBENCH.is_dir():
        raise SystemExit(f"{EIFBENCH} is missing: the benchmark data lives beside the checkout")
    run_sim(args) if args.tier == "sim" else run_real(args)


if __name__ == "__main__":
    main()
