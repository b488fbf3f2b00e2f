"""Load and soak: many calls across many models at a mixed fault rate, every result into real shards.

    python perf/soak.py                      # 100,000 calls, 20 models, 2% mixed faults + 5% 429s,
                                             # then the same calls fault-free as the baseline
    python perf/soak.py --calls 20000        # smaller
    python perf/soak.py --soak-minutes 30    # the soak: keep sending for 30 minutes (not for CI)

The simulator runs in its own process (`python -m ifsweep.simulator`), so its CPU is not the client's.
The client is ProviderPool (fast path, default retry policy) writing each Completion to a RunStore, as a
sweep does. Checks, after each run: every planned key is in the shards exactly once, as ok/empty/
truncated/refused or error (no key missing, none twice), budget reservations all settled, and the RSS
sampled every second stays flat after warm-up. Prints wall time, calls/s, attempts, retries by kind, and
the overhead of the faulty run against the fault-free one.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ifsweep.providers.budget import Budget
from ifsweep.providers.pool import ProviderPool
from ifsweep.providers.records import Completion, EndpointSpec, Price
from ifsweep.runner.engine.pipeline import completion_record
from ifsweep.runner.store.shards import RunStore, record_key

# 2% spread over every non-429 fault, 5% 429s half with and half without Retry-After.
MIXED = (
    "server_error",
    "malformed",
    "cut_body",
    "reset",
    "hang",
    "trickle",
    "wrong_content_type",
    "missing_usage",
    "null_content",
    "empty",
    "length",
    "content_filter",
    "refusal",
)


def fault_args(mixed_rate: float, rate_limit_rate: float) -> list[str]:
    args: list[str] = []
    for name in MIXED:
        args += ["--fault", f"{name}={mixed_rate / len(MIXED):.6f}"]
    args += ["--fault", f"rate_limit={rate_limit_rate / 2:.6f}"]
    args += ["--fault", f"rate_limit_no_header={rate_limit_rate / 2:.6f}"]
    return args


class SimProcess:
    def __init__(self, extra: list[str]) -> None:
        cmd = [sys.executable, "-m", "ifsweep.simulator", "--seed", "17", "--hang-s", "60", *extra]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        match = re.search(r"listening on (\S+)", line)
        if match is None:
            self.proc.kill()
            raise RuntimeError(f"simulator did not start: {line!r}")
        self.base_url = match.group(1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class RunStats:
    label: str
    calls: int = 0
    wall_s: float = 0.0
    attempts: int = 0
    rate_limited: int = 0
    statuses: collections.Counter[str] = field(default_factory=collections.Counter)
    error_kinds: collections.Counter[str] = field(default_factory=collections.Counter)
    rss: list[tuple[int, float]] = field(default_factory=list)  # (calls done, MB)
    missing: int = 0
    duplicated: int = 0
    reserved_left: float = 0.0


def messages_for(model: int, i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Soak prompt {i} for model {model}: write about rivers."}]


def spec_for(base: str, model: int, timeout_s: float) -> EndpointSpec:
    return EndpointSpec(
        label=f"m{model:02d}",
        model=f"openai/soak-m{model:02d}",
        api_base=base,
        max_concurrency=24,
        params={"max_tokens": 400},  # above the simulator's longest answer
        price=Price(0.15, 0.60),
        timeout_s=timeout_s,
    )


async def drive(
    base: str,
    run_dir: Path,
    label: str,
    n_models: int,
    per_model: int,
    *,
    until: float | None,
    timeout_s: float,
) -> RunStats:
    """Send per_model calls for each model (or, with `until`, keep cycling until that time)."""
    stats = RunStats(label)
    budget = Budget(None)
    store = RunStore.open(run_dir, writer_id="soak", flush_ms=200.0, retry_errors=True)
    planned: list[str] = []
    start = time.perf_counter()
    async with ProviderPool(budget=budget, global_concurrency=256) as pool:
        endpoints = [pool.endpoint(spec_for(base, m, timeout_s)) for m in range(n_models)]
        flusher = asyncio.create_task(store.flusher())  # perf script: one background task is enough
        done_calls = 0

        async def worker(m: int, queue: collections.deque[int]) -> None:
            nonlocal done_calls
            ep = endpoints[m]
            while queue:
                i = queue.popleft()
                msgs = messages_for(m, i)
                key = record_key({"t": "soak", "m": m, "i": i})
                c: Completion = await ep.complete(msgs)
                store.append(completion_record("generation", key, c) | {"model": ep.spec.label})
                stats.attempts += c.attempts
                stats.rate_limited += c.rate_limited
                stats.statuses[c.status] += 1
                if c.error_kind:
                    stats.error_kinds[c.error_kind] += 1
                done_calls += 1

        async def sampler() -> None:
            while True:
                stats.rss.append((done_calls, rss_mb()))
                await asyncio.sleep(1.0)

        sample = asyncio.create_task(sampler())
        cycle = 0
        while True:
            queues = []
            for m in range(n_models):
                ids = range(cycle * per_model, (cycle + 1) * per_model)
                planned.extend(record_key({"t": "soak", "m": m, "i": i}) for i in ids)
                queues.append((m, collections.deque(ids)))
            # 24 workers per model: the endpoint's max_concurrency, so nothing queues unbounded.
            await asyncio.gather(*(worker(m, q) for m, q in queues for _ in range(24)))
            cycle += 1
            if until is None or time.perf_counter() >= until:
                break
            print(f"  [{label}] cycle {cycle}: {done_calls:,} calls, RSS {rss_mb():.0f} MB", flush=True)
        sample.cancel()
        stats.rss.append((done_calls, rss_mb()))
        store.flush()
        flusher.cancel()
        stats.calls = done_calls
    stats.wall_s = time.perf_counter() - start
    stats.reserved_left = budget.reserved_usd
    store.close()
    seen = collections.Counter(rec["key"] for rec in _records(run_dir))
    stats.missing = sum(1 for k in planned if k not in seen)
    stats.duplicated = sum(1 for n in seen.values() if n > 1)
    return stats


def _records(run_dir: Path) -> list[dict[str, Any]]:
    store = RunStore.open(run_dir, writer_id="reader")
    try:
        return list(store.iter_records({"generation"}))
    finally:
        store.close()


def report(s: RunStats) -> None:
    retries = s.attempts - s.calls
    print(f"\n== {s.label}: {s.calls:,} calls in {s.wall_s:.1f} s ({s.calls / s.wall_s:,.0f}/s)")
    print(
        f"   attempts {s.attempts:,} (retries {retries:,} = {retries / max(s.calls, 1):.2%}), "
        f"429s {s.rate_limited:,}"
    )
    print(f"   statuses {dict(s.statuses)}")
    print(f"   error kinds {dict(s.error_kinds)}")
    print(f"   keys missing {s.missing}, keys twice {s.duplicated}, reserved left ${s.reserved_left:.6f}")
    if s.rss:
        warm = [mb for n, mb in s.rss if n >= s.calls * 0.1] or [s.rss[-1][1]]
        print(
            f"   RSS MB: first {s.rss[0][1]:.0f}, after 10% {warm[0]:.0f}, "
            f"peak {max(mb for _, mb in s.rss):.0f}, "
            f"last {s.rss[-1][1]:.0f} (growth after warm-up {max(warm) - warm[0]:+.0f} MB)"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--calls", type=int, default=100_000)
    p.add_argument("--models", type=int, default=20)
    p.add_argument("--fault-rate", type=float, default=0.02, help="mixed non-429 faults")
    p.add_argument("--rate-limit-rate", type=float, default=0.05, help="spurious 429s")
    p.add_argument("--timeout-s", type=float, default=10.0, help="per-call deadline (hangs end here)")
    p.add_argument("--latency-ms", type=float, default=0.0)
    p.add_argument("--soak-minutes", type=float, default=None, help="keep sending this long (not for CI)")
    p.add_argument("--no-baseline", action="store_true", help="skip the fault-free run")
    args = p.parse_args(argv)
    per_model = args.calls // args.models
    until_s = args.soak_minutes * 60 if args.soak_minutes else None
    latency = ["--latency-ms", str(args.latency_ms)]
    runs: list[RunStats] = []
    plan = [("faulty", fault_args(args.fault_rate, args.rate_limit_rate))]
    if not args.no_baseline:
        plan.append(("fault-free", []))
    for label, faults in plan:
        sim = SimProcess(latency + faults)
        try:
            with tempfile.TemporaryDirectory(prefix="ifsweep-soak-") as tmp:
                until = time.perf_counter() + until_s if until_s else None
                stats = asyncio.run(
                    drive(
                        sim.base_url,
                        Path(tmp),
                        label,
                        args.models,
                        per_model,
                        until=until,
                        timeout_s=args.timeout_s,
                    )
                )
        finally:
            sim.stop()
        report(stats)
        runs.append(stats)
    ok = all(s.missing == 0 and s.duplicated == 0 and abs(s.reserved_left) < 1e-9 for s in runs)
    if len(runs) == 2:
        faulty, clean = runs
        print(
            f"\nfaulty / fault-free: time x{faulty.wall_s / clean.wall_s:.2f}, "
            f"attempts x{faulty.attempts / max(clean.attempts, 1):.3f}"
        )
    print("\nOK: every key once" if ok else "\nFAILED: keys missing or twice, or budget left reserved")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
