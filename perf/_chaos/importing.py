"""The re-import edit: a reference tool's output imported, then a corrected version of it imported into
the same directory. The directory must then report exactly what the corrected file alone gives (I1),
through the real `ifsweep import`."""

from __future__ import annotations

import random
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

from _chaos import checks, records
from ifsweep.benchmarks import Instance

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from test_one_verdict import eval_file


def _import(file: Path, out: Path, texts: list[str]) -> int:
    args = [sys.executable, "-m", "ifsweep.runner.commands.cli", "import", "cfbench", str(file)]
    done = subprocess.run([*args, "--out", str(out)], capture_output=True, text=True, timeout=240)
    texts += [done.stdout, done.stderr]
    return done.returncode


def reimport(root: Path, seed: int, texts: list[str]) -> list[str]:
    rng = random.Random(f"reimport-{seed}")
    masks = rng.getrandbits(16), rng.getrandbits(16)

    def passes(mask: int) -> Callable[[Instance], int]:
        return lambda inst: zlib.crc32(inst.instance_id.encode()) & mask

    first = eval_file(root / "first" / "gpt4o_eval.json", passes(masks[0]))
    second = eval_file(root / "second" / "gpt4o_eval.json", passes(masks[1]))
    both, alone = root / "both", root / "alone"
    codes = [_import(first, both, texts), _import(second, both, texts), _import(second, alone, texts)]
    if codes != [0, 0, 0]:
        return [f"I1: importing, re-importing and importing alone exited {codes}, not [0, 0, 0]"]
    judges = tuple(sorted({pair[3] for pair in records.verdicts(alone)}))
    return [f"{v} (after a re-import)" for v in checks.same_verdicts(both, alone, judges)]
