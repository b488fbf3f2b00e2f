"""The call total and the ETA of a sweep whose judge needs re-asks (issue 21, item 7).

The plan counts one judge call per question; a judge that garbles half its replies is asked again, so
the sweep makes about 1.75 calls per question (2 re-asks). A total taken from the plan alone reads
"calls N/N ... ETA 0s" from a little past half-way on, while calls go on being sent. Read from the plain
progress lines of a real `ifsweep run`: no line says the calls are all made, or that no time is left,
while a later line shows more calls made.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from test_eta_sweep import eif_party, eta_seconds, run_plain

from ifsweep.runner.commands.cli import main
from ifsweep.simulator import SimConfig, SimulatorThread

CALLS_RE = re.compile(r"\| calls ([\d,]+)/([\d,?]+) ")
TOTAL_TOLERANCE = 0.15  # of the calls made in the end
ETA_TOLERANCE = 0.30  # of the time left
ETA_SLACK_S = 2.0  # the line's whole seconds, and a status read between two walks


def sweep_toml(out: Path, base: str, eif: Path) -> str:
    return "\n".join(
        [
            "[run]",
            f'output_dir = "{out}"',
            "reask = 2",
            "",
            "[[benchmarks]]",
            'name = "eifbench"',
            f'data = "{eif}"',
            "",
            "[[models]]",
            'id = "m1"',
            'model = "openai/sim-m1"',
            f'api_base = "{base}"',
            "params = { max_tokens = 64 }",
            "",
            "[judge]",
            'id = "judge"',
            'model = "openai/sim-judge-garble0.5"',  # half the replies parse as nothing: re-asked
            f'api_base = "{base}"',
            "params = { max_tokens = 64 }",
            "rpm = 1600",
        ]
    )


def calls_of(line: str) -> tuple[int, str]:
    found = CALLS_RE.search(line)
    assert found is not None, line
    return int(found[1].replace(",", "")), found[2].replace(",", "")


def test_total_and_eta_never_read_done_while_calls_are_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    eif = eif_party(tmp_path / "eif", tasks=6)  # 480 questions: about 840 judge calls
    run = tmp_path / "run"
    lines: list[tuple[float, str]] = []
    statuses: list[tuple[float, str]] = []  # the totals line of `ifsweep status`, beside the sweep

    def status() -> None:
        if (run / "summary.json").is_file():
            capsys.readouterr()
            assert main(["status", str(run)]) == 0
            statuses.append((time.monotonic(), capsys.readouterr().out.splitlines()[0]))

    with SimulatorThread(SimConfig(latency_ms=5, seed=3)) as sim:
        cfg = tmp_path / "sweep.toml"
        cfg.write_text(sweep_toml(run, sim.base_url, eif))
        assert run_plain(cfg, lines, status, 2.0) == 0, lines
    # The lines every few seconds, then the final board, whose first line is the totals (said once)
    last = next(((t, x) for t, x in lines if x.startswith("pairs 6/6 100%")), None)
    assert last is not None, lines
    progress = [(t, x) for t, x in lines if x.startswith("[ifsweep] pairs ")] + [last]
    final = calls_of(progress[-1][1])[0]
    assert final > 480 * 1.5, progress  # the judge really was asked again, about 1.75 calls a question
    end = progress[-1][0]
    seen = []
    for source, taken in (("run", progress), ("status", statuses)):
        while_sending = [(t, x) for t, x in taken if calls_of(x)[0] < final]
        assert len(while_sending) >= 4, taken  # read while calls were still to come
        for t, line in while_sending:
            n, expected = calls_of(line)
            seen.append(f"{source:6s} left {end - t:5.1f}s  {line.partition(' || ')[0]}")
            assert expected != str(n), f"the total reads done with {final - n} calls to come:\n{line}"
            assert "ETA 0s" not in line, f"the ETA reads done with {final - n} calls to come:\n{line}"
            # It learns: the total is near what the sweep makes, the ETA near the time it takes.
            assert abs(int(expected) - final) <= TOTAL_TOLERANCE * final, (
                f"{final} calls made in all:\n{line}"
            )
            eta = eta_seconds(line)
            assert eta is None or abs(eta - (end - t)) <= max(ETA_TOLERANCE * (end - t), ETA_SLACK_S), (
                f"{end - t:.1f} s were left:\n{line}"
            )
        assert sum(eta_seconds(x) is not None for _t, x in while_sending) >= 3, taken
    # Once over, the total is what was made
    n, expected = calls_of(progress[-1][1])
    assert expected == str(n) == str(final), progress[-1]
    if request.config.getoption("capture") == "no":  # with -s: the figures of this run
        with capsys.disabled():
            print("\n" + "\n".join(seen))
