"""How many chat completions per second the simulator sustains against a bare aiohttp client.

The simulator runs as `python -m ifsweep.simulator` in its own process (as in the performance suite,
where it sits beside the client on the same 2 cores); the client is a bare aiohttp + orjson loop with
`--concurrency` workers. Prints requests/s and the server's CPU milliseconds per request.
With `--in-process` the simulator shares the client's event loop instead (as `async with Simulator()`
in a test does), and the figure is client and server together on one core.

    python perf/sim_throughput.py --requests 20000 --concurrency 64
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time

import aiohttp
import orjson


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc (Linux only)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _client(base_url: str, n: int, concurrency: int, models: int) -> float:
    url = base_url + "/chat/completions"
    headers = {"Content-Type": "application/json", "Authorization": "Bearer sim"}
    counter = iter(range(n))
    connector = aiohttp.TCPConnector(limit=concurrency)

    async def worker(session: aiohttp.ClientSession) -> None:
        for i in counter:
            body = orjson.dumps(
                {
                    "model": f"sim-{i % models}",
                    "messages": [{"role": "user", "content": f"Write a short note about item {i}."}],
                    "max_tokens": 512,
                }
            )
            async with session.post(url, data=body, headers=headers) as resp:
                data = orjson.loads(await resp.read())
                if resp.status != 200 or not data["choices"][0]["message"]["content"]:
                    raise RuntimeError(f"unexpected answer {resp.status}: {data!r:.200}")

    async with aiohttp.ClientSession(connector=connector) as session:
        start = time.perf_counter()
        async with asyncio.TaskGroup() as tg:
            for _ in range(concurrency):
                tg.create_task(worker(session))
        return time.perf_counter() - start


def _in_process(args: argparse.Namespace) -> int:
    from ifsweep.simulator import Simulator

    async def go() -> float:
        async with Simulator() as sim:
            await _client(sim.base_url, args.warmup, args.concurrency, args.models)
            return await _client(sim.base_url, args.requests, args.concurrency, args.models)

    elapsed = asyncio.run(go())
    print(
        f"simulator in the client's loop: {args.requests / elapsed:,.0f} requests/s "
        f"over {args.requests} calls "
        f"at concurrency {args.concurrency} ({elapsed:.2f} s, client and server on one core)"
    )
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=20000)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--models", type=int, default=8)
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--in-process", action="store_true", help="run the simulator in the client's event loop")
    args = p.parse_args()
    if args.in_process:
        return _in_process(args)

    server = subprocess.Popen(
        [sys.executable, "-m", "ifsweep.simulator", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline().strip()
        if not line.startswith("listening on "):
            raise RuntimeError(f"simulator did not start: {line!r}")
        base_url = line.removeprefix("listening on ")
        asyncio.run(_client(base_url, args.warmup, args.concurrency, args.models))
        cpu0 = _cpu_seconds(server.pid)
        elapsed = asyncio.run(_client(base_url, args.requests, args.concurrency, args.models))
        server_cpu = _cpu_seconds(server.pid) - cpu0
    finally:
        server.terminate()
        server.wait(timeout=10)
    rate = args.requests / elapsed
    print(
        f"simulator: {rate:,.0f} requests/s over {args.requests} calls at concurrency {args.concurrency} "
        f"({elapsed:.2f} s); server CPU {1000 * server_cpu / args.requests:.3f} ms/request"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
