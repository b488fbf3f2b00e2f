"""A verdict depends on exactly what produced it: the code that parses replies is part of that.

Issue 21.2: a parser change (commit 365e3a8) bumped no hand-kept version, and a resume kept the old
verdicts. The version is now a hash of the scoring code's source (benchmarks/versions.py). These tests
change that code for real: the CLI runs from a copy of the installed package (PYTHONPATH overlay) whose
InFoBench parser reads every verdict the other way round, against the simulator over HTTP.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib import import_module
from pathlib import Path

import pytest
from sweeps import stored_records, toml_config

import ifsweep
from ifsweep.runner.store.compact import load_verdict_rows
from ifsweep.simulator import SimConfig, SimulatorThread

SUBPACKAGES = ("benchmarks", "metrics", "providers", "runner", "simulator")
# The changed parser: paper mode reads each decided reply the other way round.
HONEST = "        return TurnOutcome(values=None if verdict is None else (verdict,))\n"
FLIPPED = "        return TurnOutcome(values=None if verdict is None else (not verdict,))\n"


@pytest.fixture
def sim() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimConfig(seed=3)) as s:
        yield s


def overlay(root: Path) -> Path:
    """A copy of the installed `ifsweep` (editable or not) whose InFoBench parser is changed."""
    top = root / "ifsweep"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(Path(ifsweep.__file__).parent, top, ignore=ignore)
    for sub in SUBPACKAGES:
        source = Path(str(import_module(f"ifsweep.{sub}").__file__)).parent
        shutil.copytree(source, top / sub, ignore=ignore, dirs_exist_ok=True)
    parser = top / "benchmarks" / "infobench" / "_parse.py"
    text = parser.read_text(encoding="utf-8")
    assert text.count(HONEST) == 1, "the parser's paper-mode return line moved: update this test"
    parser.write_text(text.replace(HONEST, FLIPPED), encoding="utf-8")
    return root


def run_cli(cfg: Path, code: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    return subprocess.run(
        [sys.executable, "-m", "ifsweep", "run", str(cfg)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )


def judged(out: Path) -> dict[tuple[str, int], bool | None]:
    """What the report reads: (instance, constraint) -> satisfied, one current verdict per slot."""
    rows = load_verdict_rows(out).filter(source="judge")
    pairs = [(r["instance_id"], r["constraint_idx"]) for r in rows.iter_rows(named=True)]
    assert len(pairs) == len(set(pairs)), "two verdicts of one instance reach the report"
    return {(r["instance_id"], r["constraint_idx"]): r["satisfied"] for r in rows.iter_rows(named=True)}


def test_a_changed_parser_rescores_the_stored_replies_with_no_request(
    tmp_path: Path, sim: SimulatorThread
) -> None:
    out = tmp_path / "run"
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(toml_config(out, sim.base_url, models=("alpha",), bench=("infobench",), limit=4))
    first = run_cli(cfg)
    assert first.returncode == 0, first.stderr
    before = judged(out)
    verdicts = len(stored_records(out, {"verdict"}))
    assert verdicts == 4 and any(before.values()) and not all(before.values())
    sent = sim.stats.requests

    changed = run_cli(cfg, overlay(tmp_path / "changed"))
    assert changed.returncode == 0, changed.stderr
    assert sim.stats.requests == sent, "a resume under a changed parser sent requests"
    assert f"re-scored {verdicts} verdicts from the stored replies" in changed.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rescored"] == verdicts and summary["complete"]
    after = judged(out)
    assert after == {k: None if v is None else not v for k, v in before.items()}

    # Back to the installed code: the verdicts it derives are current again, still with no request.
    back = run_cli(cfg)
    assert back.returncode == 0, back.stderr
    assert sim.stats.requests == sent
    assert json.loads((out / "summary.json").read_text())["rescored"] == verdicts
    assert judged(out) == before
    # The same code again: nothing to re-score.
    again = run_cli(cfg)
    assert again.returncode == 0 and "re-scored" not in again.stderr
    assert json.loads((out / "summary.json").read_text())["rescored"] == 0
