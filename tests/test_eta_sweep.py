"""The overall ETA a real sweep prints, against the time that was really left.

Heterogeneous on purpose: each model first answers FollowBench pairs (none or one judge call each),
then EIFBench party tasks (80 judge calls each); the models are paced to 240, 120 and 60 requests a
minute and the judge to 1,800. So the slowest model holds the sweep back during FollowBench and the
judge during EIFBench, and an ETA that counted pairs, or took the slowest endpoint alone, is far off.
Rate limits set the pace, not the CPU, so the check holds on a busy machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ifsweep import benchmarks
from ifsweep.runner.commands.cli import main
from ifsweep.runner.watch.progress import PLAIN_EVERY_S
from ifsweep.simulator import SimConfig, SimulatorThread

TOLERANCE = 0.25  # of the time left
RESOLUTION_S = 1.0  # the line prints whole seconds
STATUS_EVERY_S = 4.0


def eif_party(folder: Path, tasks: int, questions: int = 80) -> Path:
    """EIFBench party tasks of `questions` scoring questions each (8 sub-instructions), built from the
    fixture's first task: each question is one judge call."""
    base = json.loads((benchmarks.get("eifbench").fixture_dir() / "sorted_party2.json").read_text())[0]
    subs = 8
    out = []
    for k in range(tasks):
        out.append(
            base
            | {
                "main_id": 1000 + k,
                "sub_instructions": {
                    f"sub_instruction_{s}": {
                        "instruction": f"第{s}项任务（{k}）。",
                        "scoring_questions": [f"要求{s}-{q}（{k}）。" for q in range(questions // subs)],
                    }
                    for s in range(subs)
                },
            }
        )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sorted_party4.json").write_text(json.dumps(out, ensure_ascii=False), encoding="utf-8")
    return folder


def sweep_toml(out: Path, base: str, eif: Path) -> str:
    fb = benchmarks.get("followbench").fixture_dir()
    # File order: `limit = 30` is 30 instances, the shape the pace figures below are for.
    lines = ["[run]", f'output_dir = "{out}"', "concurrency = 32", 'order = "file"', ""]
    lines += ["[[benchmarks]]", 'name = "followbench"', f'data = "{fb}"', "limit = 30", ""]
    lines += ["[[benchmarks]]", 'name = "eifbench"', f'data = "{eif}"', ""]
    for label, rpm in (("m1", 240), ("m2", 120), ("m10", 60)):
        lines += ["[[models]]", f'id = "{label}"', f'model = "openai/sim-{label}"', f'api_base = "{base}"']
        lines += ["params = { max_tokens = 64 }", f"rpm = {rpm}", ""]
    lines += ["[judge]", 'id = "judge"', 'model = "openai/sim-judge"', f'api_base = "{base}"']
    lines += ["params = { max_tokens = 64 }", "rpm = 1800"]
    return "\n".join(lines)


def eta_seconds(line: str) -> float | None:
    """The overall ETA of a plain line or of status's totals, in seconds (None: unknown)."""
    totals = line.partition(" || ")[0]
    text = totals.rsplit("ETA ", 1)[1].strip()
    if text == "unknown":
        return None
    if text == "<1s":  # time left, under a second
        return 0.5
    minutes, _, seconds = text.rstrip("s").rpartition("m")
    return 60 * int(minutes or 0) + int(seconds)


def within(eta: float | None, left: float) -> bool:
    return eta is not None and abs(eta - left) <= max(TOLERANCE * left, RESOLUTION_S)


@pytest.mark.slow
def test_printed_eta_is_within_a_quarter_of_the_time_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    eif = eif_party(tmp_path / "eif", tasks=4)
    run = tmp_path / "run"
    lines: list[tuple[float, str]] = []
    statuses: list[tuple[float, str]] = []  # first line of `ifsweep status` (the totals), and when
    with SimulatorThread(SimConfig(latency_ms=50, seed=11)) as sim:
        cfg = tmp_path / "sweep.toml"
        cfg.write_text(sweep_toml(run, sim.base_url, eif))

        def status() -> None:
            if (run / "summary.json").is_file():
                capsys.readouterr()
                assert main(["status", str(run)]) == 0
                statuses.append((time.monotonic(), capsys.readouterr().out.splitlines()[0]))

        assert run_plain(cfg, lines, status, STATUS_EVERY_S) == 0, lines
    # The lines every PLAIN_EVERY_S, then the final board, whose first line is the totals (said once)
    final = next(((t, x) for t, x in lines if x.startswith("pairs 102/102 100%")), None)
    assert final is not None, lines
    progress = [(t, x) for t, x in lines if x.startswith("[ifsweep] pairs ")] + [final]
    assert len(progress) > 1, lines
    end = progress[-1][0]  # the final board comes as the last pair is done
    start = progress[0][0] - PLAIN_EVERY_S  # the first comes PLAIN_EVERY_S after the sweep starts
    checked = []
    for source, seen in (("run", progress[:-1]), ("status", statuses)):
        for t, line in seen:
            if t - start < 0.25 * (end - start) or t >= end:
                continue
            left, eta = end - t, eta_seconds(line)
            checked.append(f"{source:6s} {t - start:5.1f}s  ETA {eta}  left {left:5.1f}  {line}")
            assert within(eta, left), "\n".join(checked)
    assert sum(x.startswith("run") for x in checked) >= 4, "\n".join(checked)
    assert sum(x.startswith("status") for x in checked) >= 4, "\n".join(checked)
    if request.config.getoption("capture") == "no":  # with -s: the figures of this run
        with capsys.disabled():
            print("\n" + "\n".join(checked))
    # Once over, status says so, with the same totals
    capsys.readouterr()
    assert main(["status", str(run)]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("pairs 102/102 100% | calls 1,122/1,122")


def run_plain(
    cfg: Path, lines: list[tuple[float, str]], beside: Callable[[], None] = lambda: None, every_s: float = 1.0
) -> int:
    """`ifsweep run cfg --progress plain` in a process of its own, each line of its standard error into
    `lines` with the moment it arrived, and `beside` called every `every_s` while it runs: its exit code."""
    argv = [str(Path(sys.executable).with_name("ifsweep")), "run", str(cfg), "--progress", "plain"]
    with subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True) as proc:
        reader = threading.Thread(target=read_lines, args=(proc, lines))
        reader.start()
        while proc.poll() is None:
            time.sleep(every_s)
            beside()
        reader.join()
        return proc.wait()


def read_lines(proc: subprocess.Popen[str], into: list[tuple[float, str]]) -> None:
    """Each line of the process's standard error, with the moment it arrived."""
    assert proc.stderr is not None
    for line in proc.stderr:
        into.append((time.monotonic(), line.rstrip("\n")))
