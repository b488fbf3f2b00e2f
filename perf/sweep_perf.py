"""The whole sweep under load: overhead against a bare aiohttp loop and Inspect AI, latency-bound
throughput, rate limits, budget, memory. Prints figures and ratios measured in one run; not a test.

The simulator always runs in a SUBPROCESS (`python -m ifsweep.simulator`), so the client's CPU figures
are the client's own. Data: FollowBench's example category (200 rule-scored instances, no judge) from the
benchmark data beside the checkout when it is there, or a generated file in the same schema for bigger runs.

    python perf/sweep_perf.py                  # every scenario, each twice
    python perf/sweep_perf.py overhead --runs 1 --profile
    python perf/sweep_perf.py inspect latency limits budget memory

Scenarios and goals (docs/design/scheduler.md has the measured figures):
  overhead  40 models x 200 instances = 8,000 calls, latency 0, c64: ifsweep >= 50% of the bare loop's
            efficiency (its CPU per call / ifsweep's); --against REV measures REV's pipeline beside it
  inspect   `inspect eval` (openai-api provider, own venv in $TMPDIR): ifsweep >= 10x its calls per CPU-s
  latency   latency 200 ms, c256, 8,000 calls: >= 90% of the ideal 1,280 calls/s
  limits    rpm 1200 and a binding tpm, 2 s burst: >= 95% of the limit's throughput, <= 1% 429s
  budget    cap = half the sweep's cost: spent <= cap and >= 95% of it
  fullscale 40 models x (FollowBench 820 + CFBench 1,000 + EIFBench party 100) = 76,800 pairs, about
            456,560 calls with the simulated judge, c512, in a child process, against 10 models of it:
            peak RSS <= 600 MB, 40 / 10 models <= 1.15, beside the bare loop's CPU per call (about 4 min);
            then 40 models again at concurrency 320 (what 10 models at their cap of 32 can have in
            flight, not 512): the part of the ratio that grows with models, not with concurrency
  memory    200k calls vs 50k calls at latency 0: peak RSS < 500 MB and within 10%, grown two ways:
            4x the models (40 -> 160 models x 1,250 instances), the way sweeps grow, and 4x the
            instances (40 models x 1,250 -> 5,000), where the bigger data set itself is held in memory
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import orjson

from ifsweep.providers.pricing import import_litellm
from ifsweep.runner.config import DEFAULT_MODEL_CONCURRENCY, load_config
from ifsweep.runner.engine.process import OwnedProcess
from ifsweep.runner.engine.sweep import SweepResult, check_ready, load_work, run_sweep

HERE = Path(__file__).resolve().parent
# The benchmark data beside the checkout, or where IFSWEEP_FOLLOWBENCH_DATA says (a worktree's copy).
FOLLOWBENCH = Path(
    os.environ.get(
        "IFSWEEP_FOLLOWBENCH_DATA", HERE.parents[1] / "shared" / "benchmarks" / "FollowBench" / "data"
    )
)
INSPECT_VENV = Path(tempfile.gettempdir()) / "ifsweep-inspect-venv"
MAX_TOKENS = 128
SCENARIOS = ("overhead", "inspect", "latency", "limits", "budget", "memory", "fullscale")
SHARED = HERE.parents[1] / "shared" / "benchmarks"
# The full-size sweep of issue 35: each benchmark's whole released data (FollowBench's six English
# categories, 820 instances; CFBench's 1,000; EIFBench's party scenario, 100, about 80 judge calls each).
FULLSCALE = (
    ("followbench", SHARED / "FollowBench" / "data", ""),
    ("cfbench", SHARED / "CFBench" / "data", ""),
    ("eifbench", SHARED / "EIFBench" / "data", 'scenario = "party"'),
)


# ---------------------------------------------------------------------------------------------- helpers


@dataclass
class Sim:
    proc: subprocess.Popen[str]
    base: str

    def cpu_s(self) -> float:
        return _proc_cpu_s(self.proc.pid)


def _proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def simulator(*flags: str) -> Iterator[Sim]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ifsweep.simulator", "--port", "0", *flags],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "listening on " not in line:
        proc.kill()
        raise SystemExit(f"simulator did not start: {line!r}")
    try:
        yield Sim(proc, line.split("listening on ", 1)[1].strip())
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def load_avg() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def example_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads((FOLLOWBENCH / "example_constraints.json").read_text("utf-8"))
    return rows


def synthetic_data(root: Path, copies: int) -> Path:
    """FollowBench's example file repeated `copies` times, each copy a distinct instance (new example_id,
    an instruction suffix), in the same schema: more distinct prompts without copying the data set."""
    rows = example_rows()
    out = []
    for k in range(copies):
        for r in rows:
            extra = f"\n(variant {k})" if k else ""
            out.append(
                r | {"example_id": r["example_id"] + 1000 * k, "instruction": r["instruction"] + extra}
            )
    folder = root / f"followbench-x{copies}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "example_constraints.json").write_text(json.dumps(out, ensure_ascii=False), "utf-8")
    return folder


def sweep_toml(
    out: Path,
    base: str,
    *,
    models: int,
    data: Path = FOLLOWBENCH,
    concurrency: int = 64,
    max_usd: float | None = None,
    model_extra: str = "",
    progress: str = "off",
    limit: int | None = None,
) -> str:
    run = [f'output_dir = "{out}"', f'progress = "{progress}"', f"concurrency = {concurrency}"]
    if max_usd is not None:
        run.append(f"max_usd = {max_usd!r}")
    lines = ["[run]", *run, "", "[[benchmarks]]", 'name = "followbench"', f'data = "{data}"']
    lines += ['categories = ["example"]', *([f"limit = {limit}"] if limit else []), ""]
    for i in range(models):
        lines += [
            "[[models]]",
            f'id = "m{i:02d}"',
            f'model = "openai/sim-m{i:02d}"',
            f'api_base = "{base}"',
            f"params = {{ temperature = 0, max_tokens = {MAX_TOKENS} }}",
            model_extra,
            "",
        ]
    return "\n".join(lines)


def write_config(root: Path, name: str, text: str) -> Path:
    path = root / f"{name}.toml"
    path.write_text(text)
    return path


@dataclass(frozen=True)
class Measured:
    result: SweepResult
    wall_s: float
    cpu_s: float


def sweep_in_process(cfg_path: Path, profile: Path | None = None) -> Measured:
    """One `ifsweep run` in this process; the clock runs from the sweep's start (data already loaded)."""
    cfg = load_config(cfg_path)
    work = load_work(cfg)
    check_ready(cfg, work)
    # The pool asks litellm's price map about models without a configured price: a one-time ~3 s import
    # (docs/design/scheduler.md), kept out of the per-call figures; the subprocess scenarios include it.
    import_litellm()
    prof = cProfile.Profile() if profile else None
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if prof:
        prof.enable()
    # As the command runs it: with the process-wide settings only a program owning its process makes.
    result = anyio.run(lambda: run_sweep(cfg, work, progress="off", process=OwnedProcess()))
    if prof:
        prof.disable()
    m = Measured(result, time.perf_counter() - wall0, time.process_time() - cpu0)
    if prof and profile:
        prof.dump_stats(profile)
        pstats.Stats(str(profile)).sort_stats("cumulative").print_stats(35)
        pstats.Stats(str(profile)).sort_stats("tottime").print_stats(30)
    return m


def sweep_subprocess(cfg_path: Path, *extra: str) -> tuple[int, float, float, int]:
    """`python -m runner.commands.cli run CFG` as a child: (exit code, wall s, CPU s, peak RSS in KiB).

    The peak is the child's own VmHWM, read from /proc while it runs: wait4's ru_maxrss would also count
    this (bigger) process, whose pages the child held between fork and exec."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall0 = time.perf_counter()
    cmd = [
        sys.executable,
        "-m",
        "ifsweep.runner.commands.cli",
        "run",
        str(cfg_path),
        "--progress",
        "off",
        *extra,
    ]
    proc = subprocess.Popen(cmd)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _vm_hwm_kib(proc.pid))
        time.sleep(0.05)
    wall = time.perf_counter() - wall0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the child is reaped: its CPU is in here
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return proc.returncode, wall, cpu, peak


def _vm_hwm_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass  # exited between poll() and open()
    return 0


def same_requests(models: int) -> list[bytes]:
    """The bodies the sweep sends: every model x every example instance, its params, in model order."""
    from ifsweep import benchmarks

    bench = benchmarks.get("followbench")
    instances = list(bench.load(FOLLOWBENCH, {"categories": ["example"]}))
    out = []
    for i in range(models):
        for inst in instances:
            msgs = [m.as_dict() for m in inst.messages]
            body = {"model": f"sim-m{i:02d}", "messages": msgs, "temperature": 0, "max_tokens": MAX_TOKENS}
            out.append(orjson.dumps(body))
    return out


async def bare_loop(base: str, bodies: Sequence[bytes], concurrency: int) -> tuple[float, float]:
    """The floor: bare aiohttp + orjson, `concurrency` workers. (calls/s, client CPU ms per call)."""
    url = base + "/chat/completions"
    headers = {"Authorization": "Bearer x", "Content-Type": "application/json"}
    it = iter(bodies)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def worker() -> None:
            for body in it:
                async with session.post(url, data=body, headers=headers) as resp:
                    data = orjson.loads(await resp.read())
                    if resp.status != 200 or not data["choices"][0]["message"]["content"]:
                        raise RuntimeError(f"bad answer {resp.status}")

        cpu0, wall0 = time.process_time(), time.perf_counter()
        async with asyncio.TaskGroup() as tg:
            for _ in range(concurrency):
                tg.create_task(worker())
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return len(bodies) / wall, cpu * 1000 / len(bodies)


def fresh(root: Path, name: str) -> Path:
    path = root / name
    shutil.rmtree(path, ignore_errors=True)
    return path


# ---------------------------------------------------------------------------------------------- scenarios


def overhead(root: Path, run: int, profile: bool, against: str | None = None) -> dict[str, float]:
    """Efficiency = the bare loop's CPU per call / ifsweep's (goal >= 50%), both measured in this run;
    with `against` (a git revision), that revision's pipeline measured beside this one, alternately."""
    models, conc = 40, 64
    bodies = same_requests(models)
    with simulator() as sim:
        asyncio.run(bare_loop(sim.base, bodies[:500], conc))  # warm the server
        b_rate, b_cpu = asyncio.run(bare_loop(sim.base, bodies, conc))
        cfg = write_config(root, "overhead", sweep_toml(fresh(root, "overhead-run"), sim.base, models=models))
        prof = root / "overhead.prof" if profile else None
        m = sweep_in_process(cfg, prof)
        # Both in fresh child processes, alternately: the in-process sweep runs after the bare loop in
        # a warm process, which a child does not, and that alone moved the figure by 15%.
        other = mine = None
        if against:
            other = _sweep_elsewhere(root, against, sim.base, models)
            mine = _sweep_elsewhere(root, None, sim.base, models)
    calls = m.result.done + m.result.errors
    assert m.result.status == "complete" and calls == len(bodies), m.result
    rate, cpu = calls / m.wall_s, m.cpu_s * 1000 / calls
    print(f"overhead run {run}: {len(bodies)} calls, {models} models, c{conc}, latency 0 ({load_avg()})")
    print(f"  bare aiohttp+orjson       {b_rate:8.0f} calls/s  {b_cpu:6.3f} CPU ms/call")
    print(f"  ifsweep whole pipeline    {rate:8.0f} calls/s  {cpu:6.3f} CPU ms/call")
    if other is not None and mine is not None:
        for name, (r, c) in ((f"at {against}", other), ("this tree", mine)):
            print(f"  child, {name:<16} {r:8.0f} calls/s  {c:6.3f} CPU ms/call  efficiency {b_cpu / c:.0%}")
    print(
        f"  ifsweep / bare: efficiency {b_cpu / cpu:.0%} (goal >= 50%), {rate / b_rate:.0%} of calls/s, "
        f"{cpu / b_cpu:.1f}x CPU per call"
    )
    return {"ratio": b_cpu / cpu, "rate": rate, "cpu_ms": cpu}


def _sweep_elsewhere(root: Path, rev: str | None, base: str, models: int) -> tuple[float, float]:
    """The same sweep in a child process on this one's interpreter and libraries, with revision `rev`'s
    package (`_revision_package`, first on PYTHONPATH) or, for None, this tree's. Returns (calls/s,
    client CPU ms per call)."""
    env = dict(os.environ)
    if rev is not None:
        env["PYTHONPATH"] = str(_revision_package(root, rev))
    cfg = write_config(root, "overhead-rev", sweep_toml(fresh(root, "overhead-rev-run"), base, models=models))
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "_child_sweep", str(cfg)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    rate, cpu = out.stdout.split()[-2:]
    return float(rate), float(cpu)


def _revision_package(root: Path, rev: str) -> Path:
    """Revision `rev` laid out as the installed package (pyproject's package-dir), from `git archive`."""
    tree = root / f"rev-{rev}"
    if not tree.exists():
        (tree / "src").mkdir(parents=True)
        archive = subprocess.run(
            ["git", "-C", str(HERE.parent), "archive", rev], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(tree / "src")], input=archive.stdout, check=True)
        pkg = tree / "pkg" / "ifsweep"
        pkg.mkdir(parents=True)
        for f in (tree / "src" / "api").iterdir():
            (pkg / f.name).symlink_to(f)
        for sub in ("runner", "providers", "metrics", "benchmarks", "simulator"):
            (pkg / sub).symlink_to(tree / "src" / sub)
    return tree / "pkg"


def _child_sweep(cfg: Path) -> None:
    m = sweep_in_process(cfg)
    calls = m.result.done + m.result.errors
    assert m.result.status == "complete", m.result
    print(calls / m.wall_s, m.cpu_s * 1000 / calls)


INSPECT_TASK = HERE / "_inspect_task.py"


def ensure_inspect() -> Path | None:
    """Inspect AI in its own venv (its openai pin conflicts with our litellm's); None if it won't install."""
    inspect_bin = INSPECT_VENV / "bin" / "inspect"
    if inspect_bin.exists():
        return inspect_bin
    print(f"installing inspect-ai and openai into {INSPECT_VENV} (once)", flush=True)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(INSPECT_VENV)], check=True)
    pip = subprocess.run(
        [str(INSPECT_VENV / "bin" / "pip"), "install", "-q", "inspect-ai", "openai"],
        capture_output=True,
        text=True,
    )
    print(f"  pip took {time.perf_counter() - t:.0f} s, exit {pip.returncode}")
    if pip.returncode != 0 or not inspect_bin.exists():
        print("  install failed:\n" + pip.stderr[-2000:])
        return None
    return inspect_bin


def inspect_compare(root: Path, run: int, samples: int) -> dict[str, float]:
    inspect_bin = ensure_inspect()
    if inspect_bin is None:
        return {}
    models, conc = 40, 64
    with simulator() as sim:
        cfg = write_config(
            root, "inspect-ifs", sweep_toml(fresh(root, "inspect-ifs-run"), sim.base, models=models)
        )
        code, wall, cpu, _ = sweep_subprocess(cfg)
        ifs_calls = models * 200
        assert code == 0, code
        logs = fresh(root, "inspect-logs")
        env = os.environ | {
            "SIM_API_KEY": "no-key-needed",
            "SIM_BASE_URL": sim.base,
            "IFSWEEP_PERF_SAMPLES": str(samples),
            "IFSWEEP_PERF_DATA": str(FOLLOWBENCH / "example_constraints.json"),
            "INSPECT_LOG_DIR": str(logs),
        }
        cmd = [
            str(inspect_bin), "eval", f"{INSPECT_TASK.name}@sweep_perf",
            "--model", "openai-api/sim/sim-inspect",
            "--max-connections", str(conc), "--max-tasks", "1", "--display", "none", "--log-level", "error",
            "--no-log-samples", "--no-log-realtime", "--max-tokens", str(MAX_TOKENS), "--temperature", "0",
            "--no-fail-on-error", "--log-format", "json",
        ]  # fmt: skip
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall0 = time.perf_counter()
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=INSPECT_TASK.parent)
        i_wall = time.perf_counter() - wall0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    i_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if res.returncode != 0:
        print(f"inspect eval failed (exit {res.returncode}):\n{res.stdout[-1500:]}\n{res.stderr[-3000:]}")
        return {}
    ifs_per_cpu, i_per_cpu = ifs_calls / cpu, samples / i_cpu
    print(f"inspect run {run}: whole processes (start-up included), c{conc}, latency 0 ({load_avg()})")
    print(
        f"  ifsweep run   {ifs_calls:6d} calls {wall:6.1f} s wall {cpu:6.1f} CPU s "
        f"= {ifs_per_cpu:7.0f} calls/CPU-s"
    )
    print(
        f"  inspect eval  {samples:6d} calls {i_wall:6.1f} s wall {i_cpu:6.1f} CPU s "
        f"= {i_per_cpu:7.0f} calls/CPU-s"
    )
    print(f"  inspect log: {_inspect_completed(logs)}")
    print(f"  ifsweep / inspect calls per CPU-second: {ifs_per_cpu / i_per_cpu:.1f}x (goal >= 10x)")
    return {"ratio": ifs_per_cpu / i_per_cpu}


def _inspect_completed(logs: Path) -> str:
    """Status and completed samples from the JSON log, so a failed Inspect run is not timed unseen."""
    found = sorted(logs.glob("*.json"))
    if not found:
        return "no log written"
    header = json.loads(found[-1].read_text("utf-8"))
    results = header.get("results") or {}
    done, total = results.get("completed_samples"), results.get("total_samples")
    return f"status {header.get('status')}, {done}/{total} samples"


def latency(root: Path, run: int) -> dict[str, float]:
    models, conc, lat = 40, 256, 0.2
    with simulator("--latency-ms", str(lat * 1000)) as sim:
        bodies = same_requests(models)
        b_rate, _ = asyncio.run(bare_loop(sim.base, bodies, conc))
        cfg = write_config(
            root, "latency", sweep_toml(fresh(root, "latency-run"), sim.base, models=models, concurrency=conc)
        )
        m = sweep_in_process(cfg)
    calls = m.result.done + m.result.errors
    assert m.result.status == "complete" and calls == len(bodies), m.result
    ideal = conc / lat
    rate = calls / m.wall_s
    print(f"latency run {run}: {calls} calls, latency 200 ms, c{conc}, ideal {ideal:.0f}/s ({load_avg()})")
    print(f"  bare aiohttp  {b_rate:7.0f} calls/s = {b_rate / ideal:.0%} of ideal")
    print(f"  ifsweep       {rate:7.0f} calls/s = {rate / ideal:.0%} of ideal (goal >= 90%)")
    return {"ratio": rate / ideal}


def _server_tokens(bodies: Sequence[bytes]) -> float:
    """What the simulator charges per request: prompt tokens (len // 4 + 1 per message) + max_tokens."""
    total = 0
    for body in bodies:
        req = orjson.loads(body)
        total += sum(len(m["content"]) // 4 + 1 for m in req["messages"]) + req["max_tokens"]
    return total / len(bodies)


def limits(root: Path, run: int, copies: int = 3) -> dict[str, float]:
    rpm, burst = 1200, 2.0
    data = synthetic_data(root, copies)
    from ifsweep import benchmarks

    instances = list(benchmarks.get("followbench").load(data, {"categories": ["example"]}))
    per_call = _server_tokens(
        [
            orjson.dumps({"messages": [m.as_dict() for m in i.messages], "max_tokens": MAX_TOKENS})
            for i in instances
        ]
    )
    tpm = int(rpm * per_call * 0.75)  # the token limit binds at 75% of the request limit
    n = len(instances)
    # Ideal: the server's token bucket starts with `burst` seconds' worth, then refills at tpm/60.
    ideal_s = max(0.0, (n * per_call - tpm * burst / 60) / (tpm / 60))
    flags = ("--rpm", str(rpm), "--tpm", str(tpm), "--burst-s", str(burst))
    out: dict[str, float] = {}
    for retry_after in (True, False):
        with simulator(*flags, *(() if retry_after else ("--no-retry-after",))) as sim:
            extra = f"rpm = {rpm}\ntpm = {tpm}"
            text = sweep_toml(fresh(root, "limits-run"), sim.base, models=1, data=data, model_extra=extra)
            m = sweep_in_process(write_config(root, "limits", text))
        res = m.result
        gens = _generation_records(root / "limits-run")
        limited = sum(int(g.get("rate_limited") or 0) for g in gens)
        attempts = sum(int(g.get("attempts") or 0) for g in gens)
        ok = sum(g["status"] != "error" for g in gens)
        ratio = ideal_s / m.wall_s if m.wall_s else 0.0
        tag = "with" if retry_after else "without"
        print(
            f"limits run {run} ({tag} Retry-After): {n} calls, rpm {rpm}, tpm {tpm} "
            f"(~{per_call:.0f} tokens/call, binds at {tpm / per_call:.0f}/min), burst {burst:.0f} s "
            f"({load_avg()})"
        )
        print(
            f"  {m.wall_s:.1f} s vs ideal {ideal_s:.1f} s = {ratio:.0%} of the limit's throughput "
            "(goal >= 95%); "
            f"429s {limited}/{attempts} attempts = {limited / max(attempts, 1):.2%} (goal <= 1%); "
            f"status {res.status}, {ok}/{n} ok"
        )
        out[f"ratio_{tag}"] = ratio
        out[f"rate429_{tag}"] = limited / max(attempts, 1)
    return out


def _generation_records(run_dir: Path) -> list[dict[str, Any]]:
    from ifsweep.runner.store.shards import RunStore

    store = RunStore.open(run_dir, writer_id="perf_reader")
    try:
        return list(store.iter_records({"generation"}))
    finally:
        store.close()


def budget(root: Path, run: int) -> dict[str, float]:
    models = 10
    price = "price = { input_per_mtok = 1.0, output_per_mtok = 2.0 }"
    with simulator() as sim:
        full = sweep_in_process(
            write_config(
                root,
                "budget-full",
                sweep_toml(
                    fresh(root, "budget-full-run"), sim.base, models=models, max_usd=1e6, model_extra=price
                ),
            )
        )
        # The same sweep without a cap: no intents (runner/store/intents.py), the hot path as before.
        free = sweep_in_process(
            write_config(
                root,
                "budget-free",
                sweep_toml(fresh(root, "budget-free-run"), sim.base, models=models, model_extra=price),
            )
        )
        cap = full.result.spent_usd / 2
        half = sweep_in_process(
            write_config(
                root,
                "budget-half",
                sweep_toml(
                    fresh(root, "budget-half-run"), sim.base, models=models, max_usd=cap, model_extra=price
                ),
            )
        )
    res = half.result
    print(
        f"budget run {run}: {models} models x 200, whole sweep costs ${full.result.spent_usd:.4f}; "
        f"cap ${cap:.4f} ({load_avg()})"
    )
    print(
        f"  status {res.status} (exit {res.exit_code}), {res.done}/{res.planned} done, "
        f"spent ${res.spent_usd:.4f} "
        f"= {res.spent_usd / cap:.2%} of cap (goal <= 100% and >= 95%)"
    )
    per_call = {
        name: m.cpu_s / max(m.result.done, 1) * 1000 for name, m in (("capped", full), ("free", free))
    }
    print(
        f"  intents: a capped sweep's client CPU per pair {per_call['capped']:.3f} ms against "
        f"{per_call['free']:.3f} ms uncapped = {per_call['capped'] / per_call['free']:.2f}x"
    )
    return {"ratio": res.spent_usd / cap, "intent_cpu_ratio": per_call["capped"] / per_call["free"]}


def memory(root: Path, run: int) -> dict[str, float]:
    """Peak RSS of `ifsweep run` subprocesses, 50k calls against 200k, grown by models and by instances."""
    layouts = {  # name: ((models, instances) of the 50k run, (models, instances) of the 200k run)
        "models": ((40, 1250), (160, 1250)),
        "instances": ((40, 1250), (40, 5000)),
    }
    figures: dict[str, float] = {}
    with simulator() as sim:
        for layout, sizes in layouts.items():
            peaks = []
            for models, instances in sizes:
                calls = models * instances
                data = synthetic_data(root, -(-instances // 200))
                name = f"mem-{layout}-{calls}"
                out = fresh(root, f"{name}-run")
                text = sweep_toml(out, sim.base, models=models, data=data, limit=instances)
                code, wall, cpu, rss_kib = sweep_subprocess(write_config(root, name, text))
                peaks.append(rss_kib / 1024)
                print(
                    f"memory run {run}, {layout}: {calls} calls ({models} models x {instances}) exit {code}: "
                    f"peak RSS {rss_kib / 1024:.0f} MB, {wall:.0f} s wall ({calls / wall:.0f} calls/s), "
                    f"{cpu / calls * 1000:.3f} CPU ms/call ({load_avg()})"
                )
                shutil.rmtree(out, ignore_errors=True)
            small, big = peaks
            figures[f"{layout}_ratio"] = big / small
            figures[f"{layout}_peak_mb"] = big
            print(
                f"  {layout}: 200k / 50k peak RSS {big / small:.2f} (goal <= 1.10), "
                f"200k under 500 MB: {big < 500}"
            )
    return figures


def fullscale_toml(out: Path, base: str, *, models: int, concurrency: int = 512) -> str:
    lines = ["[run]", f'output_dir = "{out}"', 'progress = "off"', f"concurrency = {concurrency}", ""]
    for name, data, extra in FULLSCALE:
        lines += ["[[benchmarks]]", f'name = "{name}"', f'data = "{data}"', extra, ""]
    params = f"params = {{ temperature = 0, max_tokens = {MAX_TOKENS} }}"
    for i in range(models):
        lines += ["[[models]]", f'id = "m{i:02d}"', f'model = "openai/sim-m{i:02d}"', f'api_base = "{base}"']
        lines += [params, ""]
    lines += ["[judge]", 'id = "judge"', 'model = "openai/sim-judge"', f'api_base = "{base}"', params, ""]
    return "\n".join(lines)


def _summary_calls(run_dir: Path) -> tuple[str, int]:
    summary = json.loads((run_dir / "summary.json").read_text())
    return summary["status"], sum(int(row["calls"]) for row in summary["by_model"])


def fullscale(
    root: Path, run: int, sizes: Sequence[int] = (10, 40), keep_run: Path | None = None
) -> dict[str, float]:
    """Peak RSS, wall, CPU per call and calls/s of the full-size sweep at 10 and 40 models, each an
    `ifsweep run` child; the bare loop's CPU per call measured against the same simulator first.
    With `keep_run`, the biggest size's run directory is written there and kept (the commands' perf
    scripts read it: perf/reading_perf.py fullscale)."""
    for _, data, _ in FULLSCALE:
        if not data.is_dir():
            raise SystemExit(f"fullscale needs the benchmark data: {data} is not there")
    peaks: dict[int, float] = {}
    with simulator() as sim:
        bodies = same_requests(40)
        asyncio.run(bare_loop(sim.base, bodies[:500], 64))  # warm the server
        b_rate, b_cpu = asyncio.run(bare_loop(sim.base, bodies, 64))
        print(f"fullscale run {run}: bare aiohttp+orjson {b_rate:.0f} calls/s, {b_cpu:.3f} CPU ms/call")
        for models in sizes:
            kept = keep_run is not None and models == max(sizes)
            out = fresh(
                *((keep_run.parent, keep_run.name) if keep_run and kept else (root, f"full-{models}-run"))
            )
            cfg = write_config(root, f"full-{models}", fullscale_toml(out, sim.base, models=models))
            code, wall, cpu, rss_kib = sweep_subprocess(cfg)
            status, calls = _summary_calls(out)
            peaks[models] = rss_kib / 1024
            print(
                f"  {models} models: exit {code} {status}, {calls} calls, peak RSS {rss_kib / 1024:.0f} MB, "
                f"{wall:.0f} s wall, {calls / wall:.0f} calls/s, {cpu * 1000 / calls:.3f} CPU ms/call "
                f"(bare loop {b_cpu:.3f}: {b_cpu / (cpu * 1000 / calls):.0%}) ({load_avg()})"
            )
            if not kept:
                shutil.rmtree(out, ignore_errors=True)
        small, big = min(peaks), max(peaks)
        if small == big:  # one size: no ratio to print
            return {"peak_mb": peaks[big]}
        # What the small run's models can have in flight at their default cap (10 x 32), as the big
        # run's global cap: the same generation concurrency, so what still differs grows with models.
        same = min(512, small * DEFAULT_MODEL_CONCURRENCY)
        out = fresh(root, f"full-{big}-c{same}-run")
        cfg = write_config(
            root, f"full-{big}-c{same}", fullscale_toml(out, sim.base, models=big, concurrency=same)
        )
        code, wall, _, rss_kib = sweep_subprocess(cfg)
        status, calls = _summary_calls(out)
        shutil.rmtree(out, ignore_errors=True)
        print(
            f"  {big} models at concurrency {same}: exit {code} {status}, {calls} calls, "
            f"peak RSS {rss_kib / 1024:.0f} MB, {wall:.0f} s wall"
        )
    ratio = peaks[big] / peaks[small]
    print(
        f"  peak RSS {big} / {small} models: {ratio:.2f} (goal <= 1.15); {big} models "
        f"{peaks[big]:.0f} MB (goal <= 600 MB); at concurrency {same} "
        f"{rss_kib / 1024 / peaks[small]:.2f}"
    )
    return {"ratio": ratio, "peak_mb": peaks[big], "same_concurrency_ratio": rss_kib / 1024 / peaks[small]}


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_child_sweep"]:
        _child_sweep(Path(argv[1]))
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "scenarios", nargs="*", metavar="SCENARIO", help=f"any of {', '.join(SCENARIOS)} (default: all)"
    )
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--profile", action="store_true", help="cProfile the overhead sweep (first run)")
    p.add_argument("--inspect-samples", type=int, default=2000)
    p.add_argument(
        "--against", metavar="REV", help="overhead: also measure git revision REV's pipeline, in the same run"
    )
    p.add_argument(
        "--sizes", type=int, nargs="+", default=[10, 40], help="fullscale: the model counts (default 10 40)"
    )
    p.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temp folder)")
    p.add_argument(
        "--keep-run",
        type=Path,
        metavar="DIR",
        help="fullscale: write the biggest size's run directory to DIR, keep it",
    )
    args = p.parse_args(argv)
    chosen = args.scenarios or list(SCENARIOS)
    for name in chosen:
        if name not in SCENARIOS:
            p.error(f"unknown scenario {name!r}; choose from {', '.join(SCENARIOS)}")
    root = args.keep or Path(tempfile.mkdtemp(prefix="sweep-perf-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        for name in chosen:
            for run in range(1, args.runs + 1):
                if name == "overhead":
                    overhead(root, run, args.profile and run == 1, args.against)
                elif name == "inspect":
                    inspect_compare(root, run, args.inspect_samples)
                elif name == "latency":
                    latency(root, run)
                elif name == "limits":
                    limits(root, run)
                elif name == "budget":
                    budget(root, run)
                elif name == "memory":
                    memory(root, run)
                elif name == "fullscale":
                    fullscale(root, run, args.sizes, args.keep_run)
                sys.stdout.flush()
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
