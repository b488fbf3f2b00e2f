"""The call total and the ETA of a sweep whose judge needs re-asks (issue 21, item 7).

The plan counts one judge call per question; a judge that garbles half its replies is asked again, so
the sweep makes about 1.75 calls per question (2 re-asks). A total taken from the plan alone reads
"calls N/N ... ETA 0s" from a little past half-way on, while calls go on being sent. Read from the plain
progress lines of a real `ifsweep run`: no line says the calls are all made, or that no time is left,
while a later line shows more calls made.
"""

from __future__ import annotations

import re
from pathlib import Path

from test_eta_sweep import eif_party, run_plain

from ifsweep.simulator import SimConfig, SimulatorThread

CALLS_RE = re.compile(r"\| calls ([\d,]+)/([\d,?]+) ")


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
            "rpm = 2000",
        ]
    )


def calls_of(line: str) -> tuple[int, str]:
    found = CALLS_RE.search(line)
    assert found is not None, line
    return int(found[1].replace(",", "")), found[2].replace(",", "")


def test_total_and_eta_never_read_done_while_calls_are_sent(tmp_path: Path) -> None:
    eif = eif_party(tmp_path / "eif", tasks=6)  # 480 questions: about 840 judge calls
    run = tmp_path / "run"
    lines: list[tuple[float, str]] = []
    with SimulatorThread(SimConfig(latency_ms=5, seed=3)) as sim:
        cfg = tmp_path / "sweep.toml"
        cfg.write_text(sweep_toml(run, sim.base_url, eif))
        assert run_plain(cfg, lines) == 0, lines
    progress = [x for _t, x in lines if x.startswith("[ifsweep] pairs ")]
    made = [calls_of(x)[0] for x in progress]
    final = made[-1]
    assert final > 480 * 1.5, progress  # the judge really was asked again, about 1.75 calls a question
    while_sending = [x for x, n in zip(progress, made, strict=True) if n < final]
    assert len(while_sending) >= 4, progress  # lines printed while calls were still to come
    for line in while_sending:
        n, expected = calls_of(line)
        assert expected != str(n), f"the total reads done with {final - n} calls to come:\n{line}"
        assert "ETA 0s" not in line, f"the ETA reads done with {final - n} calls to come:\n{line}"
    # Once over, the total is what was made
    n, expected = calls_of(progress[-1])
    assert expected == str(n) == str(final), progress[-1]
