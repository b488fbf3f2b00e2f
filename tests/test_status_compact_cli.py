"""`ifsweep status` and `ifsweep compact` on a real run directory, through the command line."""

from __future__ import annotations

import json
import time
from pathlib import Path

import polars as pl
import pytest
from test_resume_crash import SEED, sweep_toml

from ifsweep.runner.commands.cli import main
from ifsweep.runner.store.compact import COMPACT_DIR, load_call_records
from ifsweep.runner.watch.status import status_board
from ifsweep.simulator import SimConfig, SimulatorThread


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(args))
    return code, capsys.readouterr().out


def test_status_then_compact_then_report_from_parquet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    cfg = tmp_path / "sweep.toml"
    with SimulatorThread(SimConfig(seed=SEED)) as sim:
        cfg.write_text(sweep_toml(out, sim.base_url, bench=("followbench", "cfbench", "eifbench"), limit=6))
        assert main(["run", str(cfg)]) == 0
    summary = json.loads((out / "summary.json").read_text())

    code, text = cli(capsys, "status", str(out))
    assert code == 0
    lines = text.splitlines()
    # the board first: totals, then one row per endpoint, the judge's included
    n, calls = summary["planned"], sum(e["calls"] for e in summary["by_model"])
    assert lines[0].startswith(f"pairs {n}/{n} 100% | calls {calls}/{calls} |"), lines[0]
    assert lines[0].endswith("| complete"), lines[0]
    assert lines[2].split()[:2] == ["endpoint", "calls"]
    endpoints = lines[4 : lines.index("", 4)]
    assert "* learned from the provider's headers" not in lines  # no limit was learned: no "*" to explain
    assert [x.split()[0] for x in endpoints] == ["alpha", "beta", "judge"]
    head = lines.index(next(x for x in lines if x.startswith("model ")))
    head_words = ["model", "benchmark", "planned", "done", "errors", "spent", "$", "cached", "saved", "$"]
    assert lines[head].split() == head_words
    rows = {tuple(x.split()[:2]): x.split()[2:] for x in lines[head + 2 :]}
    assert len(rows) == len(summary["by_model"]) == 6
    for entry in summary["by_model"]:
        planned, done, errors, spent, _cached, _saved = rows[(entry["model"], entry["benchmark"])]
        assert (int(planned), int(done), int(errors)) == (entry["planned"], entry["planned"], 0)
        assert 0 < entry["planned"] <= 30  # `limit` counts sampling units: a FollowBench group is 5 levels
        assert float(spent) > 0
    # Spent is what the call records cost, judge calls included (they are billed to the judged model).
    calls = load_call_records(out)
    assert sum(float(r[3]) for r in rows.values()) == pytest.approx(calls["cost_usd"].sum(), abs=1e-3)

    # A summary that still says "running" but was last written long ago: no sweep runs any more.
    path = out / "summary.json"
    good = path.read_bytes()
    stale = summary | {"status": "running", "updated_at": summary["updated_at"] - 3600}
    path.write_text(json.dumps(stale))
    assert cli(capsys, "status", str(out))[1].splitlines()[0].endswith("| not running")
    path.write_text(
        json.dumps(stale | {"progress": summary["progress"] | {"limits": {"alpha": {"rpm": "x"}}}})
    )
    assert main(["status", str(out)]) == 2
    assert f"{path}: progress.limits.alpha.rpm: expected an integer or null" in capsys.readouterr().err
    path.write_bytes(good)

    code, before = cli(capsys, "report", str(out), "--format", "json")
    assert code == 0 and json.loads(before)
    code, said = cli(capsys, "compact", str(out))
    assert code == 0 and said.strip()
    parquet = out / COMPACT_DIR / "verdicts.parquet"
    assert parquet.is_file() and (out / COMPACT_DIR / "state.json").is_file()
    code, after = cli(capsys, "report", str(out), "--format", "json")
    assert code == 0 and json.loads(after) == json.loads(before)

    # The report really reads the Parquet while it is current: drop one model from it and watch.
    full = pl.read_parquet(parquet)
    full.filter(pl.col("model") != "beta").write_parquet(parquet)
    _, partial = cli(capsys, "report", str(out), "--format", "json")
    assert {r["model"] for r in json.loads(partial)} == {"alpha"}
    # Compaction is repeatable and restores it; status never needs it.
    assert cli(capsys, "compact", str(out))[0] == 0
    assert json.loads(cli(capsys, "report", str(out), "--format", "json")[1]) == json.loads(before)
    assert cli(capsys, "status", str(out))[1] == text


def test_status_and_compact_refuse_a_directory_that_is_not_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for cmd in ("status", "compact", "report"):
        capsys.readouterr()
        assert main([cmd, str(tmp_path)]) == 2
        assert "not a run directory" in capsys.readouterr().err


def test_status_counts_rpm_over_the_last_minute_never_scaled_up(tmp_path: Path) -> None:
    """A sweep's calls all made in the last seconds: status's rpm is their count (what a provider saw
    in its minute), not the last 20 seconds' count times three (issue 36, item 12)."""
    out = tmp_path / "run"
    cfg = tmp_path / "sweep.toml"
    with SimulatorThread(SimConfig(seed=SEED)) as sim:
        cfg.write_text(sweep_toml(out, sim.base_url, bench=("cfbench",), limit=4))
        assert main(["run", str(cfg)]) == 0
    # The board as a `status` beside the running sweep would read it: the summary just written.
    path = out / "summary.json"
    now = time.time()
    path.write_text(json.dumps(json.loads(path.read_text()) | {"status": "running", "updated_at": now}))
    board = status_board(out, now=now)
    calls = {r.label: r.calls for r in board.rows}
    assert calls and all(n > 0 for n in calls.values()), calls
    assert {r.label: r.pace.calls_per_min for r in board.rows} == calls


def test_status_reads_a_run_without_the_sweep_machinery(tmp_path: Path) -> None:
    """`ifsweep status` (run every few seconds by a person watching) loads no part of the engine, the
    provider pool or the HTTP stack: on a full-size run they were a fifth of its time."""
    import subprocess
    import sys

    out = tmp_path / "run"
    cfg = tmp_path / "sweep.toml"
    with SimulatorThread(SimConfig(seed=SEED)) as sim:
        cfg.write_text(sweep_toml(out, sim.base_url, bench=("followbench",), limit=2))
        assert main(["run", str(cfg)]) == 0
    heavy = (
        "asyncio",
        "aiohttp",
        "aiolimiter",
        "litellm",
        "ifsweep.runner.engine.pipeline",
        "ifsweep.runner.engine.scheduler",
        "ifsweep.runner.engine.sweep",
        "ifsweep.providers.pool",
    )
    probe = (
        "import sys, contextlib, io\n"
        "from ifsweep.runner.commands.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    code = main(['status', {str(out)!r}])\n"
        f"print(code, [m for m in {heavy!r} if m in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(None, 1) == ["0", "[]\n"], done.stdout
