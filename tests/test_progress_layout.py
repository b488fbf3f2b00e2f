"""The progress board at 3, 40 and 200 models: real sweeps against the simulator, the plain lines a log
gets, and the live table as a terminal of 30 x 120 shows it (a pseudo-terminal read back through a
terminal emulator). Also the board's ordering and fitting on their own."""

from __future__ import annotations

import fcntl
import math
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pyte
import pytest

from ifsweep import benchmarks
from ifsweep.runner.commands.cli import main
from ifsweep.runner.watch.board import (
    LEARNED_NOTE,
    PLAIN_WIDTH,
    Board,
    EndpointRow,
    Limits,
    Pace,
    Totals,
    fit,
    natural_key,
    ordered,
    plain_line,
    table_lines,
)
from ifsweep.simulator import SimConfig, SimulatorThread

ROWS, COLS = 30, 120
PAIRS = 4  # per model; at 30 rpm a model's last pair starts 6 s in, past the first plain line (5 s)


def sweep_toml(out: Path, base: str, models: int) -> str:
    data = benchmarks.get("cfbench").fixture_dir()  # one judge call per pair
    lines = ["[run]", f'output_dir = "{out}"', "concurrency = 64", ""]
    lines += ["[[benchmarks]]", 'name = "cfbench"', f'data = "{data}"', f"limit = {PAIRS}", ""]
    for i in range(1, models + 1):
        lines += ["[[models]]", f'id = "m{i}"', f'model = "openai/sim-m{i}"', f'api_base = "{base}"']
        lines += ["params = { max_tokens = 64 }", "rpm = 30", ""]
    lines += ["[judge]", 'id = "judge"', 'model = "openai/sim-judge"', f'api_base = "{base}"']
    return "\n".join(lines)


def labels(models: int) -> list[str]:
    return [f"m{i}" for i in range(1, models + 1)]


# --- plain -----------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("models", [3, 40, 200])
def test_plain_lines_stay_short_and_the_end_shows_every_endpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], models: int
) -> None:
    with SimulatorThread(SimConfig(latency_ms=20, seed=1)) as sim:
        cfg = tmp_path / "sweep.toml"
        cfg.write_text(sweep_toml(tmp_path / "run", sim.base_url, models))
        assert main(["run", str(cfg), "--progress", "plain"]) == 0
    err = capsys.readouterr().err.splitlines()
    lines = [x for x in err if x.startswith("[ifsweep] pairs ")]
    assert len(lines) >= 1, err  # at least one interval line (the final totals open the table below)
    for line in lines:
        assert len(line) <= PLAIN_WIDTH, line
        totals, _, named = line.partition(" || ")
        assert totals.split(" | ")[1].startswith("calls "), line  # totals first: pairs, then calls
        assert len(named.split("; ")) <= 3 if named else True, line
    # then the whole table, every model and the judge, in natural order once all are done; its first
    # line is the final totals, said once (not also as a last "[ifsweep] pairs" line before it)
    head = err.index(next(x for x in err if x.startswith("endpoint ")))
    assert err[head - 2].startswith(f"pairs {models * PAIRS}/{models * PAIRS} 100%"), err
    assert not any(f"pairs {models * PAIRS}/{models * PAIRS} 100%" in x for x in lines), lines
    body = err[head + 2 : head + 2 + models + 1]
    assert [row.split()[0] for row in body] == sorted(["judge", *labels(models)], key=natural_key)
    assert all(row.split()[1] == "(judge)" for row in body if row.startswith("judge "))


# --- rich, in a pseudo-terminal ------------------------------------------------------------------------


def run_in_pty(argv: list[str], env: dict[str, str], timeout_s: float = 120.0) -> tuple[int, list[list[str]]]:
    """Run `argv` on a pseudo-terminal of ROWS x COLS; the screen each time the output pauses (a
    frame comes in several reads: the screen between two of them is half drawn)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    screen = pyte.Screen(COLS, ROWS)
    stream = pyte.ByteStream(screen)
    screens: list[list[str]] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            stream.feed(data)
            if not select.select([master], [], [], 0.05)[0]:
                screens.append(list(screen.display))
        return proc.wait(timeout=30), screens
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


def board_on(screen: list[str]) -> tuple[int, int, int] | None:
    """(totals line, header line, last row) of the board on a screen, None if it shows none."""
    header = next((i for i, x in enumerate(screen) if x.startswith("endpoint ")), None)
    if header is None:
        return None
    assert screen[header + 1].startswith("-----"), "\n".join(screen)
    last = header + 1
    while last + 1 < len(screen) and screen[last + 1].strip():
        last += 1
    return header - 1, header, last


@pytest.mark.slow
@pytest.mark.parametrize("models", [3, 40, 200])
def test_live_table_fits_the_terminal(tmp_path: Path, models: int) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")} | {"TERM": "xterm-256color"}
    ifsweep = str(Path(sys.executable).with_name("ifsweep"))
    with SimulatorThread(SimConfig(latency_ms=20, seed=1)) as sim:
        cfg = tmp_path / "sweep.toml"
        cfg.write_text(sweep_toml(tmp_path / "run", sim.base_url, models))
        code, screens = run_in_pty([ifsweep, "run", str(cfg), "--progress", "rich"], env)
    assert code == 0, "\n".join(screens[-1] if screens else [])
    seen = 0
    for screen in screens[:-1]:  # the last one has the closing message under the table
        found = board_on(screen)
        if found is None:
            continue
        seen += 1
        totals, header, last = found
        assert totals == 0 and screen[totals].startswith("pairs "), "\n".join(screen)  # totals on top
        assert last < ROWS - 1  # the cursor's line is left free
        assert not any(x.strip() == "..." for x in screen)  # nothing cropped by rich
        rows = [
            " ".join(x.split()[:2]) if "(judge)" in x else x.split()[0] for x in screen[header + 2 : last + 1]
        ]
        if models == 3:
            assert sorted(rows, key=natural_key) == ["judge (judge)", "m1", "m2", "m3"], rows
        else:
            more = rows[-1]
            assert more.startswith("+") and screen[last].split()[1] == "more", rows
            assert len(rows) - 1 + int(more[1:]) == models + 1, rows
            assert last == ROWS - 2, rows  # every line the terminal has
    assert seen >= 3, "the live table was never drawn"


# --- ordering and fitting ---------------------------------------------------------------------------------


def row(
    label: str, eta: float | None, held_by: str = "", errors: int = 0, role: str = "model"
) -> EndpointRow:
    return EndpointRow(label, role, 10, 20.0, Pace(60), Limits(60, errors=errors), eta_s=eta, held_by=held_by)


def test_what_holds_the_sweep_back_comes_first_then_natural_order() -> None:
    rows = [
        row("m10", 0.0),
        row("m2", 0.0),
        row("m3", 50.0, "judge"),
        row("judge", 50.0, "rpm", role="judge"),
        row("m1", 20.0, "rpm"),
        row("m11", 50.0, "rpm"),
        row("m4", None),
        row("m5", math.inf),
    ]
    assert [r.label for r in ordered(rows)] == ["m5", "judge", "m11", "m3", "m1", "m2", "m10", "m4"]
    assert sorted(["m10", "m2", "m1", "m20", "a"], key=natural_key) == ["a", "m1", "m2", "m10", "m20"]


def test_fit_keeps_the_slowest_the_failing_and_the_judge_and_sums_the_rest() -> None:
    rows = [row(f"m{i}", 100.0 - i, "rpm", errors=int(i in (30, 31))) for i in range(1, 41)]
    rows = list(ordered([*rows, row("judge", 10.0, role="judge")]))
    shown, rest = fit(rows, 10)
    assert [r.label for r in shown] == ["m1", "m2", "m3", "m4", "m5", "m6", "m30", "m31", "judge"]
    assert rest is not None and rest.label == "+32 more" and rest.calls == 320 and rest.limits.errors == 0
    assert fit(rows[:5], 10) == (list(rows[:5]), None)


def test_plain_line_is_short_whatever_the_names() -> None:
    rows = tuple(
        row("a-very-long-model-name/with-a-provider-prefix-" + str(i), 100.0, "rpm") for i in range(200)
    )
    totals = Totals(123_456, 2_000_000, 8_123_456, 9e7, 1712.3, 2.1e6, 3.21, 50.0, 12, 3723.0)
    line = plain_line(Board(totals, rows))
    assert len(line) <= PLAIN_WIDTH and line.startswith(
        "[ifsweep] pairs 123.5k/2.00M 6% | calls 8.12M/90.00M"
    )
    assert "ETA 1h02m" in line
    table = table_lines(Board(totals, rows))
    assert len(table) == 200 + 4 and table[0].startswith("pairs ")


def test_the_learned_note_is_printed_only_under_a_cell_with_its_star() -> None:
    """The footnote explains a "*": without a limit learned from the headers, no "*" and no note."""
    totals = Totals(10, 20, 10, 20, 1.0, 100.0, 0.1, None, 0, 10.0)
    plain = [row("m1", 5.0), row("m2", 5.0)]
    table = table_lines(Board(totals, tuple(plain)))
    assert not any("*" in x for x in table), table
    learned = EndpointRow("m3", "model", 10, 20.0, Pace(60), Limits(60, rpm_learned=True), eta_s=5.0)
    table = table_lines(Board(totals, (*plain, learned)))
    assert table[-1] == LEARNED_NOTE
    assert "60/60*" in next(x for x in table if x.startswith("m3 "))
