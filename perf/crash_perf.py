"""Crash-resume at scale: many SIGKILLs of a real `ifsweep run` against the simulator, then resume.

Prints, per setting, what each kill cost: requests the killed process had sent whose result was not in
its shards ("lost"), split into those in flight and those finished but still in the group-commit buffer,
and checks that the resumed run re-sent nothing else and ends with the verdicts of an uninterrupted run.

    python perf/crash_perf.py --trials 60 --concurrency 4 8 --flush-ms 5 200

Figures, not assertions (the suite's tests/test_resume_crash.py asserts on 20 kills); the script exits
1 if the resumed verdicts differ or something recorded was sent again.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_resume_crash import SEED, crash_chain, resends, run_child, sweep_toml, verdicts

from ifsweep import benchmarks
from ifsweep.runner.commands.cli import main as cli_main
from ifsweep.simulator import SimConfig, SimulatorThread

BENCH = benchmarks.names()
MODELS = ("alpha", "beta", "gamma")


def one(tmp: Path, concurrency: int, flush_ms: float, trials: int, latency_ms: float, seed: int) -> bool:
    with SimulatorThread(SimConfig(seed=SEED)) as fast:
        ref = tmp / f"ref-{concurrency}-{flush_ms}"
        cfg = tmp / f"ref-{concurrency}-{flush_ms}.toml"
        cfg.write_text(sweep_toml(ref, fast.base_url, models=MODELS, bench=BENCH))
        assert cli_main(["run", str(cfg), "--progress", "off"]) == 0
    with SimulatorThread(SimConfig(seed=SEED, latency_ms=latency_ms, jitter_ms=latency_ms / 5)) as sim:
        out = tmp / f"run-{concurrency}-{flush_ms}"
        cfg = tmp / f"run-{concurrency}-{flush_ms}.toml"
        extra = f"concurrency = {concurrency}\nflush_ms = {flush_ms}"
        cfg.write_text(sweep_toml(out, sim.base_url, models=MODELS, bench=BENCH, extra_run=extra))
        t0 = time.monotonic()
        kills = crash_chain(cfg, out, sim, random.Random(seed), trials, max_delay_s=0.4)
        final = run_child(cfg)
        _, err = final.communicate(timeout=600)
        elapsed = time.monotonic() - t0
        repeated = resends(sim)
    same = final.returncode == 0 and verdicts(out) == verdicts(ref)
    lost = [k.lost for k in kills]
    over = [k.lost - min(k.in_flight, concurrency) for k in kills]
    print(
        f"c={concurrency:3d} flush_ms={flush_ms:6.1f} latency={latency_ms:.0f}ms kills={len(kills):3d} "
        f"lost/kill mean={statistics.fmean(lost or [0]):.2f} max={max(lost, default=0)} "
        f"(cap {concurrency}; beyond in-flight: max {max(over, default=0)}, "
        f"kills with any {sum(o > 0 for o in over)}) resent={repeated} <= lost={sum(lost)}: "
        f"{repeated <= sum(lost)}; verdicts equal: {same}; {elapsed:.1f}s"
    )
    if final.returncode != 0:
        print(err.decode(), file=sys.stderr)
    return same and repeated <= sum(lost)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[4, 16])
    ap.add_argument("--flush-ms", type=float, nargs="+", default=[5.0, 200.0])
    ap.add_argument("--latency-ms", type=float, default=100.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as d:
        for c in args.concurrency:
            for f in args.flush_ms:
                ok &= one(Path(d), c, f, args.trials, args.latency_ms, args.seed)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
