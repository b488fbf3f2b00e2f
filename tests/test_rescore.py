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
from ifsweep.runner.store.shards import RunStore, record_key
from ifsweep.runner.watch.status import status_views
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


def infobench_sweep(tmp_path: Path, out: Path, sim: SimulatorThread, limit: int = 4) -> Path:
    """sweep.toml: model alpha and the simulator's judge on InFoBench's first `limit` instances."""
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(toml_config(out, sim.base_url, models=("alpha",), bench=("infobench",), limit=limit))
    return cfg


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
    cfg = infobench_sweep(tmp_path, out, sim)
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


def test_a_directory_of_the_older_scheme_resumes_rescores_and_counts_once(
    tmp_path: Path, sim: SimulatorThread
) -> None:
    """A run directory written by the build before (issue 21.2's case): its verdict keys also held what
    the verdict depends on (records without "basis"), and its manifest's template versions mixed in a
    hand-kept parser version. A resume is not refused: it derives every verdict again under its slot's
    key at no cost and says so, and every reader (report, status, the board) counts each slot once."""
    done = tmp_path / "done"
    assert run_cli(infobench_sweep(tmp_path, done, sim)).returncode == 0
    older = tmp_path / "older"  # the same results, its verdicts as the older scheme keyed them
    with RunStore.open(older, writer_id="main") as store:
        for rec in stored_records(done, {"generation", "judgment", "verdict"}):
            if rec["kind"] == "verdict":
                rec = {k: v for k, v in rec.items() if k not in ("basis", "code")}
                rec["key"] = record_key({"older": rec["key"]})
            store.append(rec)
    manifest = json.loads((done / "manifest.json").read_text())
    entry = manifest["benchmarks"]["infobench"]
    del entry["template_scheme"]
    entry["template_version"] = "0ab1c2d3e4f5"  # the prompts and "infobench-parse-2"
    (older / "manifest.json").write_text(json.dumps(manifest))
    sent = sim.stats.requests
    resumed = run_cli(infobench_sweep(tmp_path, older, sim))
    assert resumed.returncode == 0, resumed.stderr
    assert sim.stats.requests == sent
    assert "re-scored 4 verdicts from the stored replies" in resumed.stderr
    assert len(stored_records(older, {"verdict"})) == 8  # four of each scheme
    assert judged(older) == judged(done)
    board, report = status_views(older)
    assert board.totals.pairs_done == 4 and board.totals.errors == 0
    assert [(r["done"], r["errors"]) for r in report.rows] == [(4, 0)]


def test_a_changed_template_under_the_current_scheme_is_still_refused(
    tmp_path: Path, sim: SimulatorThread
) -> None:
    out = tmp_path / "run"
    cfg = infobench_sweep(tmp_path, out, sim, limit=2)
    assert run_cli(cfg).returncode == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["benchmarks"]["infobench"]["template_scheme"] == 2
    manifest["benchmarks"]["infobench"]["template_version"] = "0ab1c2d3e4f5"
    (out / "manifest.json").write_text(json.dumps(manifest))
    refused = run_cli(cfg)
    assert refused.returncode == 2 and "template version changed" in refused.stderr
