"""Promises under chaos: seeded random sweeps, faults, kill -9s, Redis restarts and edits between runs,
each resumed to the end and checked against the simulator's own ledger (issue 22).

    python perf/chaos.py --seeds 12 --seed 100      # 12 runs, seeds 100..111
    python perf/chaos.py --seed 7 --runs 1 --verbose  # one run, every round printed

Each seed draws a sweep (1-3 of the four benchmarks at 2-3 instances, 1-5 models, one judge or a panel),
options (cache_dispatch, the Batch API on some endpoints, reask, caps that bind or not, 2-3 partitions
sharing a password-protected redis-server, restarted mid-run), faults at the simulator (429 with
Retry-After, 5xx, malformed JSON, resets, hangs past the timeout, no usage, context-length errors,
batches that fail or expire), 1-3 kill -9s, and edits between runs (add or remove a judge, raise a cap,
change max_tokens). It then resumes without faults to the end and checks:
  I1 every planned (model, instance, judge) has exactly one current verdict, equal to a fault-free run's;
  I2 what the simulator billed never exceeds a cap while that cap holds, across processes;
  I3 no request billed twice beyond those a kill left in flight (or in the group-commit buffer); no
     batch line submitted twice; a finished run run again sends nothing;
  I4 exit codes and summary.json agree with the records;
  I5 a changed input is never served from old results: refused changes exit 2 and touch nothing, accepted
     ones send exactly what a fresh run of the change adds;
  I6 no secret (the API key, the Redis password) in any file of the run or any output.
A failing seed is shrunk (faults, kills, edits, options, models dropped while it still fails) and printed
with its repro command. The last line is always `chaos: N runs, F faults, K kills, V violations`;
exit 1 on any violation.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _chaos.play import Outcome, Play
from _chaos.scenario import Scenario, draw
from _chaos.shrink import shrink

_SHOWN = 12  # violations printed per seed


def run_one(s: Scenario, verbose: bool) -> Outcome:
    log = print if verbose else (lambda _: None)
    with tempfile.TemporaryDirectory(prefix=f"chaos-{s.seed}-") as d:
        try:
            return Play(s, Path(d), log).run()
        except Exception as exc:  # a harness failure is reported as such, never as a pass
            log(traceback.format_exc())
            return Outcome(s.seed, violations=[f"harness: {type(exc).__name__}: {exc}"])


def repro(s: Scenario) -> str:
    without = f" --without {','.join(s.dropped)}" if s.dropped else ""
    return f"python perf/chaos.py --seed {s.seed} --runs 1{without} --verbose"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", "--runs", dest="runs", type=int, default=12, help="how many seeds to run")
    ap.add_argument("--seed", type=int, default=0, help="the first seed")
    ap.add_argument("--without", default="", help="parts to drop, comma-separated (a shrunk repro)")
    ap.add_argument("--no-shrink", action="store_true", help="report a failing seed without shrinking it")
    ap.add_argument("--shrink-runs", type=int, default=8, help="at most this many runs to shrink one seed")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    # `timeout` and kill stop a script with SIGTERM: as an exception, the seed's finally blocks still
    # stop its redis-server and simulators instead of leaving them running with their folders gone.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    dropped = [x for x in args.without.split(",") if x]
    totals = Outcome(seed=args.seed)
    start = time.monotonic()
    for seed in range(args.seed, args.seed + args.runs):
        s = draw(seed).without(dropped)
        if args.verbose:
            print(f"seed {seed}: {s.describe()}")
        out = run_one(s, args.verbose)
        _add(totals, out)
        print(
            f"seed {seed}: {out.rounds} rounds, {out.faults} faults, {out.kills} kills, {out.edits} edits, "
            f"{len(out.violations)} violations, {out.seconds:.1f}s",
            flush=True,
        )
        if out.violations:
            _report(s, out, args)
    print(f"edits {totals.edits}, time {time.monotonic() - start:.0f}s")
    n = len(totals.violations)
    print(f"chaos: {args.runs} runs, {totals.faults} faults, {totals.kills} kills, {n} violations")
    return 1 if totals.violations else 0


def _add(totals: Outcome, out: Outcome) -> None:
    totals.faults += out.faults
    totals.kills += out.kills
    totals.edits += out.edits
    totals.violations += out.violations


def _report(s: Scenario, out: Outcome, args: argparse.Namespace) -> None:
    for v in out.violations[:_SHOWN]:
        print(f"  seed {s.seed} VIOLATION {v}")
    if len(out.violations) > _SHOWN:
        print(f"  seed {s.seed}: {len(out.violations) - _SHOWN} more violations (--verbose shows the rounds)")
    print(f"  repro: {repro(s)}")
    if args.no_shrink:
        return
    small = shrink(s, out.violations, lambda t: run_one(t, False).violations, args.shrink_runs)
    print(f"  smallest failing combination: {small.describe()}")
    print(f"  repro (shrunk): {repro(small)}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
