"""A judge that copies its prompt back must never produce a verdict, and a re-ask must be a follow-up.

Real sweeps (TOML -> HTTP -> shards) against the simulator with `judge_echo` set: every judge reply is
then text copied out of the request (the whole prompt, its last line, its last lines, or one line), the
way SmolLM2-135M answered in issue 11. In paper mode each judge-scored row must be `unparsed`, never
satisfied or unsatisfied, in every benchmark. With half the replies echoed, re-asks must be follow-ups
(the unparsed reply, then the benchmark's format rule) that the simulator answers properly.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from answering import ChatServer
from sweeps import stored_records, toml_config

from ifsweep import benchmarks
from ifsweep.benchmarks.records import REASK_LEAD
from ifsweep.runner.commands.cli import main
from ifsweep.simulator import SimConfig, SimulatorThread

ALL = tuple(benchmarks.names())


@pytest.fixture
def echoing() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimConfig(seed=1, judge_echo=1.0)) as s:
        yield s


def _sweep(tmp_path: Path, base_url: str, *, reask: int, scoring: str = "paper") -> Path:
    out = tmp_path / "run"
    cfg = tmp_path / "sweep.toml"
    text = toml_config(out, base_url, models=("alpha",), bench=ALL, limit=6, extra_run=f"reask = {reask}")
    cfg.write_text(text.replace("[[benchmarks]]", f'[[benchmarks]]\nscoring = "{scoring}"'))
    assert main(["run", str(cfg)]) == 0
    return out


def _judge_rows(out: Path) -> list[tuple[str, dict[str, Any]]]:
    return [
        (v["benchmark"], row)
        for v in stored_records(out, {"verdict"})
        for row in v["rows"]
        if row["source"] == "judge"
    ]


def test_an_echoing_judge_gives_only_unparsed_verdicts(tmp_path: Path, echoing: SimulatorThread) -> None:
    out = _sweep(tmp_path, echoing.base_url, reask=1)
    rows = _judge_rows(out)
    assert {bench for bench, _ in rows} >= {"followbench", "infobench", "cfbench", "eifbench"}
    decided = [(bench, row) for bench, row in rows if row["status"] != "unparsed"]
    assert not decided, f"echoed prompt text counted as verdicts: {decided[:5]}"
    assert all(row["satisfied"] is None for _, row in rows)
    judgments = stored_records(out, {"judgment"})
    assert judgments and all(j["parse"] == "unparsed" for j in judgments)
    # every first ask was re-asked once, as a follow-up, so there are as many re-asks as first asks
    asks = Counter(j["ask"] for j in judgments)
    assert asks[1] == asks[0] > 0


def test_reference_mode_keeps_the_references_reading(tmp_path: Path, echoing: SimulatorThread) -> None:
    # Reference mode reproduces each reference, which an echo can fool: it must still decide every row
    # it scores (FollowBench/EIFBench never leave one undecided), so the difference is documented, not lost.
    out = _sweep(tmp_path, echoing.base_url, reask=0, scoring="reference")
    statuses = Counter(row["status"] for _, row in _judge_rows(out))
    assert statuses["ok"] > 0 and statuses["unparsed"] == 0


def test_reasks_are_follow_ups_that_recover_unparsed_replies(tmp_path: Path) -> None:
    with SimulatorThread(SimConfig(seed=2, judge_echo=0.5)) as sim:
        out = _sweep(tmp_path, sim.base_url, reask=2)
        sent = sim.stats.requests
        # resume is exact: every follow-up's key covers what it sent, so a rerun sends nothing
        assert main(["run", str(tmp_path / "sweep.toml")]) == 0
        assert sim.stats.requests == sent
    judgments = stored_records(out, {"judgment"})
    by_ask = Counter(j["ask"] for j in judgments)
    assert by_ask[0] > by_ask[1] > 0
    first_unparsed = sum(1 for j in judgments if j["ask"] == 0 and j["parse"] == "unparsed")
    recovered = sum(1 for j in judgments if j["ask"] > 0 and j["parse"] == "ok")
    # each re-ask is a new request (a fresh draw), so about half of them parse; a resend would not
    assert first_unparsed == by_ask[1]
    assert recovered >= by_ask[1] // 4, (recovered, by_ask)
    # no judge request was sent twice: a re-ask never repeats the request it follows
    assert all(n == 1 for n in sim.stats.bodies.values())
    rows = _judge_rows(out)
    assert Counter(row["status"] for _, row in rows)["ok"] > len(rows) // 2


def _echo_then_answer(body: dict[str, Any]) -> str:
    """A judge of our own: a model's request gets prose; a FollowBench judge prompt gets its own last
    line back (the echo of issue 11); a follow-up gets a list of the asked length."""
    last = body["messages"][-1]["content"]
    if last.startswith(REASK_LEAD):
        n = int(re.findall(r"LIST with (\d+) element", last)[-1])
        return "After checking again:\n" + repr(["NO"] * n)
    if "#System#" in last:
        return str(last.rstrip().splitlines()[-1])
    return "A plain answer."


def test_a_follow_up_quotes_the_reply_and_the_benchmarks_rule(tmp_path: Path) -> None:
    with ChatServer(_echo_then_answer) as server:
        out = tmp_path / "run"
        cfg = tmp_path / "sweep.toml"
        cfg.write_text(
            toml_config(
                out, server.base_url, models=("alpha",), bench=("followbench",), extra_run="reask = 1"
            )
        )
        assert main(["run", str(cfg)]) == 0
    judged = [b["messages"] for b in server.bodies if "#System#" in b["messages"][0]["content"]]
    firsts = [m for m in judged if len(m) == 1]
    follow_ups = [m for m in judged if len(m) == 3]
    assert firsts and len(follow_ups) == len(firsts) == len(judged) // 2
    for m in follow_ups:
        prompt_last_line = m[0]["content"].rstrip().splitlines()[-1]
        assert m[1] == {"role": "assistant", "content": prompt_last_line}  # the unparsed reply itself
        assert m[2]["role"] == "user"
        assert m[2]["content"] == f"{REASK_LEAD}\n\n{prompt_last_line}"  # the template's format rule
    # the echoed first replies decided nothing; the follow-ups' lists decided every judged row
    rows = _judge_rows(out)
    assert rows and all(row["status"] == "ok" and row["satisfied"] is False for _, row in rows)
    judgments = stored_records(out, {"judgment"})
    assert {(j["ask"], j["parse"]) for j in judgments} == {(0, "unparsed"), (1, "ok")}


def test_judge_echo_is_a_checked_rate_and_a_serve_mock_option(capsys: pytest.CaptureFixture[str]) -> None:
    from ifsweep.runner.commands.cli import main as cli
    from ifsweep.simulator.server import _parser, config_from_args

    assert config_from_args(_parser().parse_args(["--judge-echo", "0.25"])).judge_echo == 0.25
    for bad in (1.5, -0.1, float("nan")):
        with pytest.raises(ValueError, match="judge_echo"):
            SimConfig(judge_echo=bad)
    with pytest.raises(SystemExit) as done:
        cli(["serve-mock", "--judge-echo", "2"])
    assert done.value.code == 2
    assert "judge_echo" in capsys.readouterr().err


def test_eifbench_answers_holding_the_verdict_line_keep_every_honest_verdict(tmp_path: Path) -> None:
    """Issue 21.6's repro: EIFBench's 2 party tasks, a model whose answers hold "分析：…\\n答案：是", an
    honest judge (the simulator's). Before, the judge's "答案：是" was dropped as a copy of the answer:
    coverage 0-50%, and only the verdicts that differed from the answer's line were counted."""
    answer = "分析：每个子任务都已完成，并满足所有约束。\n答案：是"
    with ChatServer(lambda body: answer) as model, SimulatorThread(SimConfig(seed=4)) as judge:
        out = tmp_path / "run"
        cfg = tmp_path / "sweep.toml"
        text = toml_config(out, model.base_url, models=("alpha",), bench=("eifbench",), judge=False)
        text = text.replace('name = "eifbench"', 'name = "eifbench"\nscenario = "party"')
        judge_table = f'[judge]\nid = "judge"\nmodel = "openai/sim-judge"\napi_base = "{judge.base_url}"\n'
        cfg.write_text(text.replace('progress = "off"', 'progress = "off"\nreask = 0') + judge_table)
        assert main(["run", str(cfg)]) == 0
    rows = _judge_rows(out)
    assert {bench for bench, _ in rows} == {"eifbench"}
    assert len({row["constraint_idx"] for _, row in rows}) > 4
    statuses = Counter(row["status"] for _, row in rows)
    assert statuses == {"ok": len(rows)}, statuses  # coverage 100%
    # The honest judge said 是 and 否 both, and both were kept.
    assert {row["satisfied"] for _, row in rows} == {True, False}
