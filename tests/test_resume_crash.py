"""Resume as users meet it: a real `ifsweep run` process killed with SIGKILL at random moments, resumed
to the end; resumes under changed configs (the manifest); error records kept or retried.

The crash chain reports, per kill, how many calls the killed process sent whose result never reached
its shards ("lost"). Resume may re-send exactly those and nothing else, so the simulator's count of
repeated request bodies must not exceed the sum of the losses. Each loss is bounded by the client's
concurrency cap: the store hands every record to the kernel as it is appended (only fsyncs are grouped),
so a kill loses just the calls in flight. See docs/resume.md.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sweeps import toml_config

from ifsweep.runner.commands.cli import main
from ifsweep.runner.store.shards import scan_shards
from ifsweep.simulator import SimConfig, SimulatorThread
from ifsweep.simulator.config import FaultRates

SEED = 3
CONCURRENCY = 4
MODEL_PRICE = "price = { input_per_mtok = 1.0, output_per_mtok = 4.0 }"
JUDGE = 'model = "openai/sim-judge"'
JUDGE_PRICE = "price = { input_per_mtok = 0.5, output_per_mtok = 1.5 }"


def sweep_toml(out: Path, base: str, *, extra_run: str = "", **kw: Any) -> str:
    """A config a user could write; prices given so that no price lookup (and no LiteLLM import)
    slows each child process's start."""
    text = toml_config(
        out, base, extra_run=extra_run, extra_model=MODEL_PRICE + "\n" + kw.pop("extra_model", ""), **kw
    )
    return text.replace(JUDGE, f"{JUDGE}\n{JUDGE_PRICE}")


def run_child(cfg: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "ifsweep.runner.commands.cli", "run", str(cfg), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def call_lines(run_dir: Path) -> int:
    """Whole, valid generation and judgment lines on disk (a torn tail is not counted)."""
    if not (run_dir / "shards").is_dir():
        return 0
    return sum(1 for _ in scan_shards(run_dir, [], kinds=("generation", "judgment")))


def verdicts(run_dir: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Newest verdict record per (model, benchmark, instance), without the wall-clock field, the keys or
    the basis: the baseline ran against another simulator, and they name the server that answered."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for sl in scan_shards(run_dir, kinds=("verdict",)):
        rec = sl.record()
        for name in ("ts", "_c", "key", "gen_key", "basis"):
            rec.pop(name, None)
        out[(rec["model"], rec["benchmark"], rec["instance_id"])] = rec
    return out


def resends(sim: SimulatorThread) -> int:
    return sum(n - 1 for n in sim.stats.bodies.values())


@dataclass(frozen=True, slots=True)
class Kill:
    requests: int  # requests the killed process sent (as the simulator counted them)
    in_flight: int  # the simulator's in-flight count just after the kill (a sample)
    lost: int  # requests whose result is not in the shards


def wait_until(cond: Any, timeout: float, what: str, every_s: float = 0.002) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every_s)


def crash_chain(
    cfg: Path, run_dir: Path, sim: SimulatorThread, rng: random.Random, trials: int, max_delay_s: float
) -> list[Kill]:
    """Start `ifsweep run`, SIGKILL it at a random moment once it has stored a random number of
    results (0 to twice its concurrency), repeat. Stops early when a run finishes before its kill."""
    kills: list[Kill] = []
    for _ in range(trials):
        req0, lines0 = sim.stats.requests, call_lines(run_dir)
        proc = run_child(cfg)
        # Kill only once this process is calling: before that a kill tests nothing new. How far it got
        # is an event (its results on disk), not a time: a loaded machine slows the child, not the test.
        wait_until(
            lambda p=proc, r=req0: sim.stats.requests > r or p.poll() is not None, 60, "a first request"
        )
        stored = rng.randrange(2 * CONCURRENCY + 1)
        wait_until(
            lambda p=proc, n=lines0 + stored: p.poll() is not None or call_lines(run_dir) >= n,
            60,
            f"{stored} results stored",
            every_s=0.01,
        )
        time.sleep(rng.uniform(0.0, max_delay_s))
        if proc.poll() is not None:
            _, err = proc.communicate()
            assert proc.returncode == 0, err.decode()
            break
        proc.send_signal(signal.SIGKILL)
        in_flight = sim.stats.in_flight
        _, err = proc.communicate()
        assert proc.returncode == -signal.SIGKILL, err.decode()
        # Requests of the dead client finish their simulated latency before the count is final.
        wait_until(lambda: sim.stats.in_flight == 0, 10, "the simulator to drain")
        sent = sim.stats.requests - req0
        kills.append(Kill(sent, in_flight, sent - (call_lines(run_dir) - lines0)))
    return kills


@pytest.fixture
def baseline(tmp_path: Path) -> Iterator[dict[tuple[str, str, str], dict[str, Any]]]:
    """Verdicts of the same sweep run once, uninterrupted, against a zero-latency simulator."""
    with SimulatorThread(SimConfig(seed=SEED)) as sim:
        out = tmp_path / "baseline"
        cfg = tmp_path / "baseline.toml"
        cfg.write_text(sweep_toml(out, sim.base_url, bench=("followbench", "cfbench", "infobench")))
        assert main(["run", str(cfg)]) == 0
        assert resends(sim) == 0
        yield verdicts(out)


def test_sigkill_at_random_moments_then_resume_equals_an_uninterrupted_run(
    tmp_path: Path, baseline: dict[tuple[str, str, str], dict[str, Any]]
) -> None:
    rng = random.Random(20261122)
    with SimulatorThread(SimConfig(seed=SEED, latency_ms=150, jitter_ms=20)) as sim:
        out = tmp_path / "run"
        cfg = tmp_path / "sweep.toml"
        extra = f"concurrency = {CONCURRENCY}"
        cfg.write_text(
            sweep_toml(out, sim.base_url, bench=("followbench", "cfbench", "infobench"), extra_run=extra)
        )
        kills = crash_chain(cfg, out, sim, rng, trials=20, max_delay_s=0.3)
        final = run_child(cfg)
        _, err = final.communicate(timeout=120)
        assert final.returncode == 0, err.decode()

        assert len(kills) == 20, f"only {len(kills)} kills landed mid-run"
        assert sim.stats.max_in_flight <= CONCURRENCY
        for k in kills:
            assert k.in_flight <= CONCURRENCY, kills
            assert 0 <= k.lost <= CONCURRENCY, kills
        assert sum(k.requests - k.lost for k in kills) >= 40, kills  # the killed runs did make progress
        # Nothing recorded is ever sent again: every repeated request body is a call whose result died
        # with its process.
        assert 0 < resends(sim) <= sum(k.lost for k in kills), (resends(sim), kills)

    got = verdicts(out)
    assert got.keys() == baseline.keys()
    assert got == baseline
    keys = Counter(sl.key for sl in scan_shards(out, kinds=("generation", "judgment", "verdict")))
    assert max(keys.values()) == 1, [k for k, n in keys.items() if n > 1][:3]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["done"] == summary["planned"] == len(baseline)


# ------------------------------------------------------------------------------------------ manifest


def snapshot(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def test_resume_accepts_compatible_changes_and_refuses_others_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with SimulatorThread(SimConfig(seed=SEED)) as sim:
        out = tmp_path / "run"
        cfg = tmp_path / "sweep.toml"

        def write(**kw: Any) -> None:
            kw.setdefault("extra_run", "max_usd = 10\nconcurrency = 4")
            cfg.write_text(sweep_toml(out, sim.base_url, bench=("followbench", "cfbench"), limit=5, **kw))

        write()
        assert main(["run", str(cfg)]) == 0
        sent = sim.stats.requests
        base = cfg.read_text()

        incompatible = {
            "params": (
                base.replace("temperature = 0,", "temperature = 0.5,", 1),
                "params changed: temperature 0 -> 0.5",
            ),
            "judge": (
                base.replace('"openai/sim-judge"', '"openai/sim-judge2"'),
                "judge 'judge': provider model changed from 'openai/sim-judge'",
            ),
            "scoring": (
                base.replace('name = "cfbench"', 'name = "cfbench"\nscoring = "reference"'),
                "benchmark 'cfbench': scoring changed from 'paper' to 'reference'",
            ),
            "budget": (
                base.replace("max_usd = 10", "max_usd = 5"),
                "budget lowered or removed (10.0 -> 5.0)",
            ),
        }
        before = snapshot(out)
        for what, (text, needle) in incompatible.items():
            cfg.write_text(text)
            capsys.readouterr()
            assert main(["run", str(cfg)]) == 2, what
            err = capsys.readouterr().err
            assert needle in err and "Start a new run" in err, (what, err)
            assert snapshot(out) == before, f"{what}: a refused resume changed the run directory"
        assert sim.stats.requests == sent

        # Compatible: a higher budget and more concurrency resume with nothing to send.
        write(extra_run="max_usd = 20\nconcurrency = 16")
        assert main(["run", str(cfg)]) == 0
        assert sim.stats.requests == sent
        # An added model: only its own calls (and its judge calls) go out.
        seen = Counter(sim.stats.by_model)
        write(extra_run="max_usd = 20\nconcurrency = 16", models=("alpha", "beta", "gamma"))
        assert main(["run", str(cfg)]) == 0
        new = Counter(sim.stats.by_model) - seen
        # `limit = 5` is 5 sampling units (issue 34): 5 FollowBench groups of 5 levels and 5 CFBench
        # instances, 30 pairs a model.
        assert set(new) == {"sim-gamma", "sim-judge"} and new["sim-gamma"] == 30, new
        assert resends(sim) == 0
        summary = json.loads((out / "summary.json").read_text())
        assert summary["status"] == "complete" and summary["planned"] == summary["done"] == 90


# ------------------------------------------------------------------------------------------ errors


def test_error_records_are_kept_with_no_retry_errors_and_retried_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failing = SimConfig(seed=SEED, faults=FaultRates(server_error=1.0))
    with SimulatorThread(failing) as sim:
        out = tmp_path / "run"
        cfg = tmp_path / "sweep.toml"
        # A short per-call deadline ends each call's retries quickly.
        cfg.write_text(
            sweep_toml(
                out,
                sim.base_url,
                models=("alpha",),
                bench=("cfbench",),
                limit=4,
                extra_model="timeout_s = 0.3",
            )
        )
        main(["run", str(cfg)])
        summary = json.loads((out / "summary.json").read_text())
        assert summary["planned"] == summary["errors"] == 4 and summary["done"] == 0, summary
        assert set(sim.stats.status_counts) <= {500, 502, 503}

        sim.set_config(SimConfig(seed=SEED))
        sent = sim.stats.requests
        main(["run", str(cfg), "--no-retry-errors"])
        assert sim.stats.requests == sent, "--no-retry-errors re-sent stored errors"
        summary = json.loads((out / "summary.json").read_text())
        assert summary["errors"] == 4 and summary["done"] == 0, summary

        assert main(["run", str(cfg)]) == 0
        assert sim.stats.by_model["sim-alpha"] >= 4 and sim.stats.requests > sent
        summary = json.loads((out / "summary.json").read_text())
        assert summary["status"] == "complete" and summary["done"] == 4 and summary["errors"] == 0, summary
        capsys.readouterr()
        assert main(["status", str(out)]) == 0
        text = capsys.readouterr().out.splitlines()
        line = next(x for x in text if x.split()[:2] == ["alpha", "cfbench"])  # the table per benchmark
        assert line.split()[2:5] == ["4", "4", "0"], line  # planned, done, errors
