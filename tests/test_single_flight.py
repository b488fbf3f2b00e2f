"""Single flight for every kind of call (issue 21 item 4): a call whose key is in flight is awaited,
never sent again. Two model ids on one endpoint share their generation, and so ask their judge the very
same questions, re-asks included: each is sent once. Counted by the simulator, over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sweeps import stored_records

from ifsweep import benchmarks
from ifsweep.runner.commands.cli import main
from ifsweep.simulator import SimConfig, SimulatorThread


def config(out: Path, base: str, bench: str, reask: int) -> str:
    data = benchmarks.get(bench).fixture_dir()
    lines = ["[run]", f"output_dir = {json.dumps(str(out))}", 'progress = "off"', f"reask = {reask}", ""]
    lines += ["[[benchmarks]]", f'name = "{bench}"', f"data = {json.dumps(str(data))}", "limit = 4", ""]
    for mid in ("first", "second"):
        lines += ["[[models]]", f'id = "{mid}"', 'model = "openai/sim-same"', f'api_base = "{base}"']
        lines += ["params = { temperature = 0, max_tokens = 64 }", ""]
    lines += ["[judge]", 'id = "judge"', 'model = "openai/sim-judge"', f'api_base = "{base}"', ""]
    return "\n".join(lines)


@pytest.mark.parametrize(
    ("bench", "echo", "reask"),
    [("cfbench", 0.0, 0), ("infobench", 0.5, 2)],
    ids=["judge-calls", "judge-calls-and-re-asks"],
)
def test_identical_calls_in_flight_are_sent_once(tmp_path: Path, bench: str, echo: float, reask: int) -> None:
    # Latency keeps the two ids' calls in flight together; an echoing judge forces re-asks.
    with SimulatorThread(SimConfig(latency_ms=60, seed=5, judge_echo=echo)) as sim:
        cfg = tmp_path / "sweep.toml"
        cfg.write_text(config(tmp_path / "run", sim.base_url, bench, reask))
        assert main(["run", str(cfg)]) == 0
        stats = sim.stats
    judgments = stored_records(tmp_path / "run", {"judgment"})
    assert max(stats.bodies.values()) == 1, "a request was sent twice"
    assert stats.by_model["sim-same"] == 4  # one answer per instance, read by both ids
    assert stats.by_model["sim-judge"] == len({j["key"] for j in judgments}) == len(judgments)
    if reask:
        assert any(j["ask"] > 0 for j in judgments), "no re-ask was exercised"
    verdicts = stored_records(tmp_path / "run", {"verdict"})
    assert sorted(v["model"] for v in verdicts) == ["first"] * 4 + ["second"] * 4
    # Both ids' verdicts read the same replies: equal rows.
    rows = {(v["model"], v["instance_id"]): v["rows"] for v in verdicts}
    for (model, inst), r in rows.items():
        if model == "first":
            assert rows[("second", inst)] == r
