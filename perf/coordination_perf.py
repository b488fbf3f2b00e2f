"""Partitions sharing one account through Redis: figures measured in one run, printed as ratios.

Four `ifsweep run --partition i/4` processes against ONE simulator process that enforces the account's
limit, with a coordinator (a redis-server started here on a free loopback port) and without one.
Data: FollowBench's example category (../shared/benchmarks), repeated as distinct instances.

    /work/venv/bin/python perf/coordination_perf.py              # every scenario
    /work/venv/bin/python perf/coordination_perf.py limits budget overhead

Scenarios and goals (docs/design/coordination.md has the measured figures):
  limits    rpm 3000 (and a run where a tpm binds at 75% of it), 2,000 calls over 4 partitions:
            steady pace >= 95% of the limit, 429s <= 1% of attempts; uncoordinated for comparison
  budget    cap = half the sweep's cost, 4 partitions: spent <= cap and >= 95% of it
  overhead  one process, 40 models x 200 calls, latency 0, no limits: calls/s and client CPU per call
            with a coordinator (a rate slot per call; and a budget reservation when a cap is set)
            against none; none is the code path of a sweep without a coordinator
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sweep_perf import (
    FOLLOWBENCH,
    _generation_records,
    _server_tokens,
    fresh,
    load_avg,
    simulator,
    sweep_in_process,
    sweep_toml,
    synthetic_data,
    write_config,
)

SCENARIOS = ("limits", "budget", "overhead")
PARTS = 4
PRICE = "price = { input_per_mtok = 1.0, output_per_mtok = 2.0 }"


@contextmanager
def redis(root: Path) -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    folder = root / "redis"
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder), "--save", "",
           "--appendonly", "no", "--logfile", str(folder / "redis.log")]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5) as c:
                    c.sendall(b"PING\r\n")
                    if c.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("redis-server did not start")
            time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


def coordinated(text: str, url: str | None) -> str:
    return text.replace("[run]\n", f'[run]\ncoordinator = "{url}"\n', 1) if url else text


def run_partitions(cfg: Path) -> tuple[list[int], float]:
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ifsweep.runner.commands.cli",
                "run",
                str(cfg),
                "--partition",
                f"{i}/{PARTS}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for i in range(PARTS)
    ]
    codes = [p.wait() for p in procs]
    return codes, time.perf_counter() - t0


def steady_rate(times: Sequence[float]) -> float:
    """Calls per minute between the 10th and 90th percentile of completion times."""
    n = len(times)
    lo, hi = n // 10, n * 9 // 10
    return (hi - lo) / (times[hi] - times[lo]) * 60


def per_call_tokens(data: Path) -> float:
    import orjson

    from ifsweep import benchmarks

    instances = list(benchmarks.get("followbench").load(data, {"categories": ["example"]}))
    bodies = [
        orjson.dumps({"messages": [m.as_dict() for m in i.messages], "max_tokens": 128}) for i in instances
    ]
    return _server_tokens(bodies)


def limits(root: Path, bindings: Sequence[str] = ("rpm", "tpm"), alone: bool = True) -> dict[str, float]:
    rpm, copies = 3000, 10  # 2,000 calls: 40 s at the limit
    data = synthetic_data(root, copies)
    per_call = per_call_tokens(data)
    out: dict[str, float] = {}
    for binding in bindings:
        tpm = int(rpm * per_call * 0.75) if binding == "tpm" else None
        limit = rpm if tpm is None else tpm / per_call  # calls per minute the binding limit allows
        flags = ("--rpm", str(rpm), "--burst-s", "2", *(("--tpm", str(tpm)) if tpm else ()))
        extra = f"rpm = {rpm}" + (f"\ntpm = {tpm}" if tpm else "") + f"\n{PRICE}"
        for url_on in (True, False) if alone else (True,):
            with simulator(*flags) as sim, redis(root) as url:
                run_dir = fresh(root, "limits-run")
                text = sweep_toml(run_dir, sim.base, models=1, data=data, model_extra=extra)
                cfg = write_config(root, "limits", coordinated(text, url if url_on else None))
                codes, wall = run_partitions(cfg)
            gens = _generation_records(run_dir)
            times = sorted(float(g["ts"]) for g in gens)
            limited = sum(int(g.get("rate_limited") or 0) for g in gens)
            attempts = sum(int(g.get("attempts") or 0) for g in gens)
            rate = steady_rate(times)
            tag = f"{binding}-{'coordinated' if url_on else 'alone'}"
            print(
                f"limits {tag}: {len(gens)} calls over {PARTS} partitions, {binding} binds at {limit:.0f} "
                f"calls/min ({load_avg()}); exits {codes}, {wall:.1f} s wall"
            )
            print(
                f"  steady pace {rate:.0f}/min = {rate / limit:.1%} of the limit (goal >= 95%); "
                f"429s {limited}/{attempts} attempts = {limited / max(attempts, 1):.2%} (goal <= 1%)"
            )
            out[f"{tag}_ratio"] = rate / limit
            out[f"{tag}_429"] = limited / max(attempts, 1)
    return out


def budget(root: Path) -> dict[str, float]:
    data = synthetic_data(root, 5)  # 1,000 calls
    with simulator("--latency-ms", "20") as sim:
        full_dir = fresh(root, "budget-full")
        full = sweep_in_process(
            write_config(root, "full", sweep_toml(full_dir, sim.base, models=1, data=data, model_extra=PRICE))
        )
        cap = full.result.spent_usd / 2
        out: dict[str, float] = {}
        for url_on in (True, False):
            with redis(root) as url:
                run_dir = fresh(root, "budget-run")
                text = sweep_toml(run_dir, sim.base, models=1, data=data, max_usd=cap, model_extra=PRICE)
                codes, wall = run_partitions(
                    write_config(root, "budget", coordinated(text, url if url_on else None))
                )
            spent = sum(float(g.get("cost_usd") or 0) for g in _generation_records(run_dir))
            tag = "coordinated" if url_on else "alone"
            print(
                f"budget {tag}: whole sweep ${full.result.spent_usd:.4f}, cap ${cap:.4f}, {PARTS} partitions "
                f"({load_avg()}); exits {codes}, {wall:.1f} s"
            )
            print(f"  spent ${spent:.4f} = {spent / cap:.2%} of the cap (goal <= 100% and >= 95%)")
            out[f"{tag}_ratio"] = spent / cap
    return out


def overhead(root: Path) -> dict[str, float]:
    """The hot path's price: a rate slot per call (and a reservation with a cap), one Redis round trip
    each, against a sweep without a coordinator."""
    models = 40
    out: dict[str, float] = {}
    with simulator() as sim, redis(root) as url:
        for tag, url_used, cap in (("none", None, None), ("redis", url, None), ("redis+cap", url, 1e6)):
            run_dir = fresh(root, f"overhead-{tag}")
            text = sweep_toml(run_dir, sim.base, models=models, max_usd=cap, model_extra=PRICE)
            m = sweep_in_process(write_config(root, f"overhead-{tag}", coordinated(text, url_used)))
            calls = m.result.done + m.result.errors
            out[f"{tag}_rate"] = calls / m.wall_s
            out[f"{tag}_cpu"] = m.cpu_s * 1000 / calls
            print(
                f"overhead {tag:9s}: {calls} calls, {models} models, latency 0: "
                f"{calls / m.wall_s:6.0f} calls/s, "
                f"{m.cpu_s * 1000 / calls:.3f} CPU ms/call ({load_avg()})"
            )
    for tag in ("redis", "redis+cap"):
        print(
            f"  {tag} / none: {out[f'{tag}_rate'] / out['none_rate']:.0%} of calls/s, "
            f"{out[f'{tag}_cpu'] / out['none_cpu']:.2f}x CPU per call"
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenarios", nargs="*", metavar="SCENARIO", help=f"any of {', '.join(SCENARIOS)}")
    p.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temp folder)")
    p.add_argument("--binding", choices=["rpm", "tpm"], action="append", help="limits: which limit binds")
    p.add_argument("--no-alone", action="store_true", help="limits: skip the uncoordinated runs")
    args = p.parse_args(argv)
    if not FOLLOWBENCH.is_dir():
        raise SystemExit(f"{FOLLOWBENCH} is missing: the shared benchmark data sits beside the checkout")
    chosen = args.scenarios or list(SCENARIOS)
    for name in chosen:
        if name not in SCENARIOS:
            p.error(f"unknown scenario {name!r}; choose from {', '.join(SCENARIOS)}")
    root = args.keep or Path(tempfile.mkdtemp(prefix="coordination-perf-"))
    root.mkdir(parents=True, exist_ok=True)
    os.environ.pop("IFSWEEP_COORDINATOR", None)  # each scenario says whether it coordinates
    scenarios: dict[str, Any] = {
        "limits": lambda r: limits(r, args.binding or ("rpm", "tpm"), not args.no_alone),
        "budget": budget,
        "overhead": overhead,
    }
    try:
        for name in chosen:
            scenarios[name](root)
            sys.stdout.flush()
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
