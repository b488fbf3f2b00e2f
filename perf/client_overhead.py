"""Client overhead of Endpoint.complete (fast path and LiteLLM path) against a bare aiohttp+orjson loop.

The simulator runs in a SUBPROCESS (`python -m ifsweep.simulator --port 0`, latency 0) so it does not
share the client's core. Each mode sends N chat completions with 64 in flight and reports calls/s and
client CPU ms per call (process_time over the loop), then the ratios to the bare loop. Also times the
token estimate against litellm.token_counter, and checks the estimate against real benchmark prompts.

    python perf/client_overhead.py            # N=5000, litellm N=2000, 2 runs
    python perf/client_overhead.py --n 1000 --runs 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import orjson

from ifsweep.providers.budget import Budget
from ifsweep.providers.pool import ProviderPool
from ifsweep.providers.pricing import estimate_tokens, import_litellm
from ifsweep.providers.records import EndpointSpec, Price

MSGS = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Write a short poem about autumn leaves, in exactly four lines. " * 3},
]
CONCURRENCY = 64
SHARED = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"


async def drive(n: int, call: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """Run `call` n times with CONCURRENCY workers; (calls/s, CPU ms per call)."""
    left = n

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await call()

    cpu0, wall0 = time.process_time(), time.perf_counter()
    async with asyncio.TaskGroup() as tg:
        for _ in range(CONCURRENCY):
            tg.create_task(worker())
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return n / wall, cpu * 1000 / n


async def bare(base: str, n: int) -> tuple[float, float]:
    url = base + "/chat/completions"
    headers = {"Authorization": "Bearer x", "Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def call() -> None:
            body = orjson.dumps({"model": "perf", "messages": MSGS, "max_tokens": 400})
            async with session.post(url, data=body, headers=headers) as resp:
                data = orjson.loads(await resp.read())
                assert data["choices"][0]["message"]["content"]

        await drive(200, call)  # warm the connection pool
        return await drive(n, call)


async def endpoint(base: str, n: int, force_litellm: bool) -> tuple[float, float]:
    spec = EndpointSpec(
        label="perf",
        model="openai/perf",
        api_base=base,
        price=Price(0.15, 0.6),
        params={"max_tokens": 400},
        max_concurrency=CONCURRENCY,
        force_litellm=force_litellm,
    )
    async with ProviderPool(budget=Budget(1e9)) as pool:
        ep = pool.endpoint(spec)

        async def call() -> None:
            done = await ep.complete(MSGS)
            assert done.status == "ok", done

        await drive(200, call)
        return await drive(n, call)


def token_cost() -> None:
    litellm = import_litellm()
    litellm.token_counter(model="gpt-4o-mini", messages=MSGS)
    reps = 2000
    t0 = time.perf_counter()
    for _ in range(reps):
        litellm.token_counter(model="gpt-4o-mini", messages=MSGS)
    t1 = time.perf_counter()
    for _ in range(reps):
        estimate_tokens(MSGS)
    t2 = time.perf_counter()
    print(
        f"token count per call: litellm.token_counter {(t1 - t0) / reps * 1e6:.1f} us, "
        f"estimate_tokens {(t2 - t1) / reps * 1e6:.2f} us"
    )
    prompts = real_prompts()
    if not prompts:
        print("estimate vs tokenizer: no benchmark data beside the checkout, skipped")
        return
    ratios = sorted(
        estimate_tokens(m) / max(1, litellm.token_counter(model="gpt-4o-mini", messages=m)) for m in prompts
    )
    under = sum(r < 1.0 for r in ratios)
    print(
        f"estimate / gpt-4o-mini tokens over {len(ratios)} real prompts: min {ratios[0]:.2f}, "
        f"median {ratios[len(ratios) // 2]:.2f}, max {ratios[-1]:.2f}; under-estimates: {under}"
    )


def real_prompts(per_file: int = 150) -> list[list[dict[str, str]]]:
    """User prompts from the benchmark files (any JSON/JSONL field that looks like the instruction)."""
    out: list[list[dict[str, str]]] = []
    if not SHARED.is_dir():
        return out
    for path in sorted(SHARED.rglob("*.json*"))[:12]:
        try:
            if path.suffix == ".jsonl":
                rows = [json.loads(line) for line in path.read_text("utf-8").splitlines()[:per_file] if line]
            else:
                data = json.loads(path.read_text("utf-8"))
                rows = data[:per_file] if isinstance(data, list) else []
        except (ValueError, OSError):
            continue
        for row in rows:
            if not isinstance(row, dict):
                continue
            text = next(
                (
                    row[k]
                    for k in ("instruction", "prompt", "input", "question", "prompt_new")
                    if isinstance(row.get(k), str) and row[k]
                ),
                None,
            )
            if text:
                out.append([{"role": "user", "content": text}])
    return out


def start_simulator() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ifsweep.simulator", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "listening on " not in line:
        proc.terminate()
        raise SystemExit(f"simulator did not start: {line!r}")
    return proc, line.split("listening on ", 1)[1].strip()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--n-litellm", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    import_litellm()  # import outside the timed loops
    token_cost()
    proc, base = start_simulator()
    try:
        for run in range(1, args.runs + 1):
            b = asyncio.run(bare(base, args.n))
            f = asyncio.run(endpoint(base, args.n, force_litellm=False))
            lt = asyncio.run(endpoint(base, args.n_litellm, force_litellm=True))
            print(f"run {run}: c{CONCURRENCY}, latency 0, simulator in a subprocess")
            for name, (rate, cpu) in (
                ("bare aiohttp+orjson", b),
                ("Endpoint fast path", f),
                ("Endpoint litellm", lt),
            ):
                print(f"  {name:22s} {rate:8.0f} calls/s  {cpu:6.3f} CPU ms/call")
            print(
                f"  fast/bare: {f[0] / b[0]:.2f}x calls/s, {f[1] / b[1]:.2f}x CPU per call; "
                f"litellm/bare: {lt[0] / b[0]:.2f}x calls/s, {lt[1] / b[1]:.2f}x CPU per call"
            )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
