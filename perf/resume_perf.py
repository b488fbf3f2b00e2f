"""A resumed run that has nothing left to send: the whole `ifsweep run` process, start to exit.

Builds a run of 8,000 done pairs on the built-in simulator (20 models x 400 FollowBench "example"
instances: the fixture's rows repeated as distinct instances, rule-scored, so no judge; latency 0), then
times `ifsweep run` on it again in a subprocess, ours against a baseline measured in the same run: the
same command with litellm imported first, as every run did before prices came from LiteLLM's JSON map
(providers/price_map.py). Prints both, the ratio, and the goal (< 1.5 s). Not a test.

    python perf/resume_perf.py                 # 8,000 pairs, 3 timed resumes of each
    python perf/resume_perf.py --models 4 --copies 20 --runs 1
    python perf/resume_perf.py --importtime    # also the 12 slowest imports of our resume (-X importtime)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ifsweep import benchmarks
from ifsweep.simulator import SimulatorThread

GOAL_S = 1.5
# Our resume: the command itself. The baseline: the command after importing litellm, as a resume that
# looked its prices up through litellm did.
OURS = "from ifsweep.runner.commands.cli import main; import sys; sys.exit(main(sys.argv[1:]))"
BASELINE = "from ifsweep.providers.pricing import import_litellm; import_litellm(); " + OURS


def synthetic_followbench(root: Path, copies: int) -> Path:
    """The fixture's example-category rows repeated `copies` times, each copy distinct (new example_id,
    an instruction suffix), in the same schema."""
    src = benchmarks.get("followbench").fixture_dir() / "data" / "example_constraints.json"
    rows = json.loads(src.read_text("utf-8"))
    out = []
    for k in range(copies):
        for r in rows:
            extra = f"\n(variant {k})" if k else ""
            out.append(
                r | {"example_id": r["example_id"] + 1000 * k, "instruction": r["instruction"] + extra}
            )
    folder = root / "data"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "example_constraints.json").write_text(json.dumps(out, ensure_ascii=False), "utf-8")
    return folder


def config(root: Path, base: str, data: Path, models: int) -> Path:
    lines = ["[run]", f'output_dir = "{root / "run"}"', 'progress = "off"', "concurrency = 64", ""]
    lines += ["[[benchmarks]]", 'name = "followbench"', f'data = "{data}"', 'categories = ["example"]', ""]
    for i in range(models):
        lines += [
            "[[models]]",
            f'id = "m{i:02d}"',
            f'model = "openai/sim-m{i:02d}"',
            f'api_base = "{base}"',
            "params = { temperature = 0, max_tokens = 64 }",
            "",
        ]
    path = root / "sweep.toml"
    path.write_text("\n".join(lines))
    return path


def timed(code: str, cfg: Path, *flags: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    t, _, done = timed_cpu(code, cfg, *flags)
    return t, done


def timed_cpu(code: str, cfg: Path, *flags: str) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """(wall s, the child's CPU s (user + system), the finished process). On a busy machine the wall
    time mostly measures the other work; the CPU time is the resume's own."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *flags, "-c", code, "run", str(cfg)], capture_output=True, text=True, timeout=600
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", type=int, default=20)
    p.add_argument("--copies", type=int, default=80, help="fixture copies (5 instances each)")
    p.add_argument("--runs", type=int, default=3, help="timed resumes of each, alternating")
    p.add_argument("--importtime", action="store_true")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp, SimulatorThread() as sim:
        root = Path(tmp)
        cfg = config(root, sim.base_url, synthetic_followbench(root, args.copies), args.models)
        build_s, first = timed(OURS, cfg)
        summary = json.loads((root / "run" / "summary.json").read_text())
        if first.returncode != 0 or summary["done"] != summary["planned"]:
            print(first.stderr[-2000:], file=sys.stderr)
            return 1
        pairs = summary["planned"]
        print(f"built: {pairs} pairs done in {build_s:.1f} s; {os.getloadavg()[0]:.2f} load average")
        sent = sim.stats.requests
        ours: list[float] = []
        base: list[float] = []
        ours_cpu: list[float] = []
        base_cpu: list[float] = []
        for _ in range(args.runs):
            for code, into, cpu_into in ((OURS, ours, ours_cpu), (BASELINE, base, base_cpu)):
                took, cpu, done = timed_cpu(code, cfg)
                if done.returncode != 0:
                    print(done.stderr[-2000:], file=sys.stderr)
                    return 1
                into.append(took)
                cpu_into.append(cpu)
        assert sim.stats.requests == sent, "a resume sent a request"
        o, b = statistics.median(ours), statistics.median(base)
        print(f"resume of {pairs} done pairs, whole process (median of {args.runs}):")
        print(f"  ours                      {o:6.2f} s   (runs: {', '.join(f'{x:.2f}' for x in ours)})")
        print(f"  baseline (litellm import) {b:6.2f} s   (runs: {', '.join(f'{x:.2f}' for x in base)})")
        verdict = "met" if o < GOAL_S else "MISSED"
        print(f"  ratio baseline/ours       {b / o:6.2f}x   goal: ours < {GOAL_S} s -> {verdict}")
        oc, bc = statistics.median(ours_cpu), statistics.median(base_cpu)
        print(f"  CPU s (user+sys), median: ours {oc:.2f}, baseline {bc:.2f}, ratio {bc / oc:.2f}x")
        print(f"  load average after: {os.getloadavg()[0]:.2f}")
        if args.importtime:
            _, done = timed(OURS, cfg, "-X", "importtime")
            rows = []
            for line in done.stderr.splitlines():
                if line.startswith("import time:") and "|" in line:
                    _, cumulative, name = (x.strip() for x in line[len("import time:") :].split("|"))
                    if cumulative.isdigit():
                        rows.append((int(cumulative), name))
            print("slowest imports (cumulative us):")
            for us, name in sorted(rows, reverse=True)[:12]:
                print(f"  {us:9d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
