"""How the reading commands behave as Unix tools, on a real run of the simulator (issue 36, items 10 and
12): a reader that closes the pipe early, what `compact` says, where a Markdown report's charts go, and
provider error messages shortened without cutting a word."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import ifsweep
from ifsweep import benchmarks
from ifsweep.providers.send.fast import error_detail
from ifsweep.runner.commands.cli import main
from ifsweep.simulator import SimConfig, SimulatorThread

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE
PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("manners") / "run"
    with SimulatorThread(SimConfig(seed=3)) as sim:
        config = {
            "run": {"output_dir": str(out), "progress": "off"},
            "benchmarks": [
                {"name": b, "data": str(benchmarks.get(b).fixture_dir()), "limit": 4}
                for b in ("cfbench", "followbench")
            ],
            "models": [
                {"id": m, "model": f"openai/sim-{m}", "api_base": sim.base_url, "price": PRICE}
                for m in ("alpha", "beta")
            ],
            "judges": [
                {"id": j, "model": f"openai/{name}", "api_base": sim.base_url, "price": PRICE}
                for j, name in (("j0", "sim-judge"), ("j1", "sim-judge-flip0.3"))
            ],
        }
        assert ifsweep.run(config).status == "complete"
    return out


def into_closed_pipe(*args: str) -> subprocess.CompletedProcess[bytes]:
    """The command with its standard output on a pipe whose reader is already gone (`| head` that has
    read its lines): every write fails, whatever the timing, as it does one time in three with head."""
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run(
            [sys.executable, "-m", "ifsweep", *args], stdout=w, stderr=subprocess.PIPE, timeout=120
        )
    finally:
        os.close(w)


@pytest.mark.parametrize("command", ["status", "agreement", "metrics", "report"])
def test_a_reader_that_closed_the_pipe_ends_the_command_quietly(run_dir: Path, command: str) -> None:
    if command == "metrics":
        rows = run_dir.parent / "rows.jsonl"
        ifsweep.verdicts(run_dir).write_ndjson(rows)
        args = [str(rows), "--format", "table"]
    else:
        args = [str(run_dir)]
    done = into_closed_pipe(command, *args)
    assert done.stderr.decode() == "", done.stderr.decode()
    assert done.returncode == EXIT_BROKEN_PIPE  # what a shell reports for a tool SIGPIPE ended


def test_compact_says_what_it_wrote_in_a_sentence(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["compact", str(run_dir)]) == 0
    said = capsys.readouterr().out.strip()
    assert "CompactResult" not in said and "PosixPath" not in said, said
    verdicts = len(ifsweep.verdicts(run_dir).unique(["benchmark", "model", "judge", "instance_id"]))
    assert said.startswith(f"[ifsweep] compacted {run_dir} into {run_dir / 'compact'}: "), said
    assert f"{verdicts:,} verdicts" in said, said


def test_a_markdown_report_on_stdout_leaves_no_files_and_one_with_out_keeps_its_charts_beside_it(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = sorted(p.name for p in run_dir.iterdir())
    capsys.readouterr()
    assert main(["report", str(run_dir), "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert sorted(p.name for p in run_dir.iterdir()) == before  # nothing written into the run
    assert "](data:image/svg+xml;base64," in md
    assert "](cfbench_by_split_1.svg)" not in md

    out = tmp_path / "reports" / "r.md"
    assert main(["report", str(run_dir), "--format", "md", "--out", str(out)]) == 0
    text = out.read_text()
    svgs = sorted(p.name for p in out.parent.glob("*.svg"))
    assert svgs and all(f"]({name})" in text for name in svgs), (svgs, text[-500:])
    assert "data:image" not in text
    assert sorted(p.name for p in run_dir.iterdir()) == before


def test_a_long_provider_message_is_shortened_at_a_word() -> None:
    words = " ".join(f"token{i:03d}" for i in range(80))  # 719 characters of 8-letter words
    short = error_detail(b'{"error": {"message": "' + words.encode() + b'"}}')
    assert len(short) <= 300 and short.endswith("…"), short
    kept = short.removesuffix("…").split(" ")
    assert kept == words.split(" ")[: len(kept)], short  # whole words only, none cut in two
    assert error_detail(b'{"error": {"message": "too long: 9 > 8"}}') == "too long: 9 > 8"
