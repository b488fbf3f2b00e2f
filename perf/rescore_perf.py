"""Re-scoring a run after its scoring code changed: the whole `ifsweep run` process, start to exit.

Builds resume_perf's run (20 models x 400 FollowBench "example" instances, rule-scored, on the built-in
simulator), then times in this one run: the resume with nothing to do, against the resume under changed
scoring code (a copy of the installed package on PYTHONPATH whose FollowBench rule module has one more
comment line: its scoring version changes, so every verdict is derived again from the stored answers
and nothing is sent). Prints both, the verdicts re-scored per CPU second and the ratio. Not a test.

    python perf/rescore_perf.py                 # 8,000 verdicts
    python perf/rescore_perf.py --models 4 --copies 20
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from importlib import import_module
from pathlib import Path

from resume_perf import OURS, config, synthetic_followbench, timed_cpu

import ifsweep
from ifsweep.simulator import SimulatorThread


def changed_code(root: Path) -> Path:
    """A copy of the installed package (editable or not) whose FollowBench rules have one more comment
    line; the directory to put on PYTHONPATH."""
    top = root / "changed" / "ifsweep"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(Path(ifsweep.__file__).parent, top, ignore=ignore)
    for sub in ("benchmarks", "metrics", "providers", "runner", "simulator"):
        source = Path(str(import_module(f"ifsweep.{sub}").__file__)).parent
        shutil.copytree(source, top / sub, ignore=ignore, dirs_exist_ok=True)
    rules = top / "benchmarks" / "followbench" / "_rules.py"
    rules.write_text(rules.read_text("utf-8") + "# changed\n", "utf-8")
    return top.parent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", type=int, default=20)
    p.add_argument("--copies", type=int, default=80, help="fixture copies (5 instances each)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp, SimulatorThread() as sim:
        root = Path(tmp)
        cfg = config(root, sim.base_url, synthetic_followbench(root, args.copies), args.models)
        timed_cpu(OURS, cfg)  # the build
        sent = sim.stats.requests
        _, plain, _ = timed_cpu(OURS, cfg)
        os.environ["PYTHONPATH"] = str(changed_code(root))  # the children's, and this process's last use
        _, rescore, done = timed_cpu(OURS, cfg)
        n = json.loads((root / "run" / "summary.json").read_text())["rescored"]
        if done.returncode != 0 or sim.stats.requests != sent or n == 0:
            raise SystemExit(f"the re-scoring resume did not do what it should:\n{done.stderr[-2000:]}")
    print(f"resume of {n} done pairs, whole process, CPU s (user+sys):")
    print(f"  nothing to do                 {plain:6.2f}")
    print(f"  scoring code changed          {rescore:6.2f}   ({n} verdicts re-scored, 0 requests)")
    print(f"  re-scored per CPU s beyond a plain resume: {n / max(rescore - plain, 1e-9):,.0f}")
    print(f"  ratio re-score / plain: {rescore / plain:.2f}x; load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
