"""A sweep that stops itself (issue 34, item 3): `[run] stop_when` checked after every unit with
anytime-valid confidence sequences; settled models send nothing more, the others go on; summary.json,
the final lines and `ifsweep status` say why it stopped, each model's interval, what it spent and
what the full plan would have cost; the budget cap binds first; a resume of a settled sweep sends
nothing. From outside: the CLI against the simulator, whose models have known, spread quality
(simulator/text.py, model_quality: chi 0.39, rho 0.55, eta 0.77, alpha 0.95)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from ifsweep.runner.commands.cli import main
from ifsweep.simulator import SimConfig, SimulatorThread

PRICE = "price = { input_per_mtok = 1.0, output_per_mtok = 2.0 }"
SPREAD = ("chi", "rho", "eta", "alpha")


def config(
    out: Path,
    base: str,
    data: Path,
    *,
    stop: str = "",
    limit: int = 300,
    extra: str = "",
    more: tuple[tuple[str, Path], ...] = (),
) -> str:
    lines = ["[run]", f'output_dir = "{out}"', 'progress = "off"', "concurrency = 8", stop, extra, ""]
    for name, where in (("cfbench", data), *more):
        lines += ["[[benchmarks]]", f'name = "{name}"', f'data = "{where}"', f"limit = {limit}", ""]
    for m in SPREAD:
        lines += ["[[models]]", f'id = "{m}"', f'model = "openai/sim-{m}"', f'api_base = "{base}"', PRICE, ""]
    lines += ["[judge]", 'id = "judge"', 'model = "openai/sim-judge"', f'api_base = "{base}"', PRICE, ""]
    return "\n".join(lines)


def run(path: Path, text: str) -> tuple[int, dict[str, Any]]:
    path.write_text(text)
    code = main(["run", str(path)])
    out = Path(text.split('output_dir = "', 1)[1].split('"', 1)[0])
    return code, json.loads((out / "summary.json").read_text())


def ranking(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    capsys.readouterr()
    assert main(["report", str(run_dir), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    psr = {r["model"]: r["value"] for r in rows if r["metric"] == "CSR" and r["slice"] == "all"}
    return sorted(psr, key=lambda m: -psr[m])


def test_ranking_stops_early_with_the_full_runs_ranking_and_a_resume_sends_nothing(
    tmp_path: Path, shared_benchmarks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = shared_benchmarks / "CFBench"
    with SimulatorThread(SimConfig(seed=2)) as sim:
        code, full = run(tmp_path / "full.toml", config(tmp_path / "full", sim.base_url, data))
        assert code == 0 and full["status"] == "complete"
        stop = "stop_when = { ranking = 0.95 }"
        capsys.readouterr()
        code, summary = run(tmp_path / "stop.toml", config(tmp_path / "stop", sim.base_url, data, stop=stop))
        err = capsys.readouterr().err
        assert code == 0 and summary["status"] == "settled", summary["message"]
        told = summary["stop_when"]
        assert [m["model"] for m in told["models"] if m["settled"]] == list(SPREAD)
        # Stopped well short of the plan, and it says what it spent against the full plan's cost.
        assert told["pairs_done"] < 0.6 * told["pairs_planned"] == 0.6 * 4 * 300
        assert 0 < told["spent_usd"] < 0.7 * told["full_plan_usd_estimate"]
        assert "stopped by stop_when (ranking 0.95): every model settled" in err
        assert "of the full plan's estimated $" in summary["message"]
        # Each model's interval, and the ranking of the full run, from what the stopped run did.
        for m in told["models"]:
            (b,) = m["benchmarks"]
            assert 0 <= b["low"] <= b["high"] <= 1 and 0 < b["units"] < b["planned"] == 300
        assert (
            ranking(tmp_path / "stop", capsys) == ranking(tmp_path / "full", capsys) == list(reversed(SPREAD))
        )

        assert main(["status", str(tmp_path / "stop")]) == 0
        status = capsys.readouterr().out
        assert (
            "stop_when ranking 0.95: 4 of 4 models settled" in status and "alpha settled: cfbench [" in status
        )

        # Run again: every verdict up to where each model settled is stored, so it settles again at
        # the same units (the rule is checked unit by unit of every model together, whatever answered
        # first); what it may send is what a model's workers start while the others' stored pairs are
        # read back: at most one pair per worker (concurrency 8), an answer and a judge call each.
        sent = sim.stats.requests
        code, again = run(tmp_path / "stop.toml", config(tmp_path / "stop", sim.base_url, data, stop=stop))
        assert code == 0 and again["status"] == "settled"
        assert sim.stats.requests - sent <= 2 * len(SPREAD) * 8, sim.stats.requests - sent
        assert [m["benchmarks"][0]["units"] for m in again["stop_when"]["models"]] == [
            m["benchmarks"][0]["units"] for m in told["models"]
        ]


def test_halfwidth_stops_every_model_once_its_interval_is_narrow_enough(
    tmp_path: Path, shared_benchmarks: Path
) -> None:
    data = shared_benchmarks / "CFBench"
    with SimulatorThread(SimConfig(seed=2)) as sim:
        stop = "stop_when = { halfwidth = 0.12 }"
        code, summary = run(
            tmp_path / "s.toml", config(tmp_path / "run", sim.base_url, data, stop=stop, limit=200)
        )
    assert code == 0 and summary["status"] == "settled", summary["message"]
    for m in summary["stop_when"]["models"]:
        (b,) = m["benchmarks"]
        assert m["settled"] and (b["high"] - b["low"]) / 2 <= 0.12 and b["units"] < 200


def test_the_budget_cap_binds_before_stop_when(tmp_path: Path, shared_benchmarks: Path) -> None:
    data = shared_benchmarks / "CFBench"
    with SimulatorThread(SimConfig(seed=2)) as sim:
        stop = "stop_when = { ranking = 0.95 }"
        text = config(tmp_path / "run", sim.base_url, data, stop=stop, extra="max_usd = 0.002")
        code, summary = run(tmp_path / "s.toml", text)
    assert code == 3 and summary["status"] == "budget_exhausted"
    assert summary["spent_usd"] <= 0.002 and not any(m["settled"] for m in summary["stop_when"]["models"])


def test_a_metric_is_watched_by_its_contribution_per_unit(
    tmp_path: Path, shared_benchmarks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A half-width no interval reaches before every unit is drawn (then it is a point): each lane
    # runs to the end, and its mean is the watched metric over the whole plan, which the report gives.
    data = shared_benchmarks / "CFBench"
    with SimulatorThread(SimConfig(seed=2)) as sim:
        for metric in ("ISR", "PSR"):
            stop = f'stop_when = {{ halfwidth = 1e-9, metric = "{metric}" }}'
            out = tmp_path / metric
            code, summary = run(
                tmp_path / f"{metric}.toml", config(out, sim.base_url, data, stop=stop, limit=40)
            )
            # Every pair was sent, so the run is complete (settled only at its last unit).
            assert code == 0 and summary["status"] == "complete", summary["message"]
            assert summary["stop_when"]["rule"] == f"halfwidth 1e-09 at 0.95, metric {metric}"
            capsys.readouterr()
            assert main(["report", str(out), "--format", "json"]) == 0
            rows = json.loads(capsys.readouterr().out)
            value = {(r["model"], r["metric"]): r["value"] for r in rows if r["slice"] == "all"}
            for m in summary["stop_when"]["models"]:
                (b,) = m["benchmarks"]
                assert b["units"] == b["planned"] == 40 and b["low"] == b["high"] == pytest.approx(b["mean"])
                assert b["mean"] == pytest.approx(value[(m["model"], metric)])
            # Not the default share of satisfied constraints (CSR) under another name.
            assert any(value[(m, metric)] != pytest.approx(value[(m, "CSR")]) for m in SPREAD)


@pytest.mark.parametrize(
    ("metric", "more", "words"),
    [
        ("HSR", ("followbench",), "'HSR' is not a metric of benchmark 'cfbench'"),
        ("CSL", ("followbench",), "'CSL' is not a metric of benchmark 'cfbench'"),
        ("NOPE", (), "unknown metric 'NOPE'; these benchmarks' headline metrics: CSR, ISR, PSR"),
    ],
)
def test_a_metric_some_benchmark_lacks_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], metric: str, more: tuple[str, ...], words: str
) -> None:
    from ifsweep import benchmarks

    fixtures = tuple((name, benchmarks.get(name).fixture_dir()) for name in more)
    stop = f'stop_when = {{ ranking = 0.9, metric = "{metric}" }}'
    text = config(
        tmp_path / "run",
        "http://127.0.0.1:9/v1",
        benchmarks.get("cfbench").fixture_dir(),
        stop=stop,
        more=fixtures,
    )
    (tmp_path / "s.toml").write_text(text)
    assert main(["run", str(tmp_path / "s.toml")]) == 2
    err = capsys.readouterr().err
    assert "run.stop_when.metric" in err and words in err, err
    assert not (tmp_path / "run").exists()


def test_a_metric_counted_over_levels_is_not_watched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ifsweep import benchmarks

    data = benchmarks.get("followbench").fixture_dir()
    stop = 'stop_when = { ranking = 0.9, metric = "CSL" }'
    text = config(tmp_path / "run", "http://127.0.0.1:9/v1", data, stop=stop).replace(
        '"cfbench"', '"followbench"'
    )
    (tmp_path / "s.toml").write_text(text)
    assert main(["run", str(tmp_path / "s.toml")]) == 2
    err = capsys.readouterr().err
    assert "run.stop_when.metric" in err and "'CSL' is not a per-unit score" in err and "HSR, SSR" in err, err


@pytest.mark.parametrize(
    ("stop", "key", "words"),
    [
        ("stop_when = { halfwidth = 0 }", "run.stop_when.halfwidth", ""),
        ("stop_when = { ranking = 1.5 }", "run.stop_when.ranking", ""),
        ("stop_when = { halfwidth = 0.1, confidence = 0 }", "run.stop_when.confidence", ""),
        ('stop_when = { ranking = 0.9, metric = "HSR" }', "run.stop_when.metric", "unknown metric 'HSR'"),
    ],
)
def test_bad_stop_when_is_a_config_error_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stop: str, key: str, words: str
) -> None:
    from ifsweep import benchmarks

    text = config(
        tmp_path / "run", "http://127.0.0.1:9/v1", benchmarks.get("cfbench").fixture_dir(), stop=stop
    )
    (tmp_path / "s.toml").write_text(text)
    assert main(["run", str(tmp_path / "s.toml")]) == 2
    err = capsys.readouterr().err
    assert key in err and words in err, err
    assert not (tmp_path / "run").exists()  # refused before the run directory was touched


def test_a_units_share_is_pooled_over_its_constraints_and_a_metric_is_averaged_over_its_instances() -> None:
    from ifsweep.benchmarks import Instance
    from ifsweep.runner.config import StopWhen
    from ifsweep.runner.engine.stopping import StopWatch, instance_score

    def verdict(*sat: bool) -> dict[str, Any]:
        return {"rows": [{"satisfied": s, "status": "ok"} for s in sat]}

    # One FollowBench-like group of two instances: 1 of 1 constraints, then 1 of 4.
    first, second = verdict(True), verdict(True, False, False, False)
    for metric, mean in ((None, 2 / 5), ("SSR", (1 + 1 / 4) / 2), ("HSR", 1 / 2)):
        watch = StopWatch(StopWhen(halfwidth=0.5, metric=metric), ["m"], {"fb": [("g1", 2), ("g2", 1)]})
        for i, record in enumerate((first, second)):
            inst = Instance(benchmark="fb", instance_id=str(i), group_id="g1", messages=(), constraints=())
            watch.done("m", "fb", inst, instance_score(record, metric))
        (lane,) = watch.view()["models"][0]["benchmarks"]
        assert lane["units"] == 1 and lane["mean"] == pytest.approx(mean), metric


def test_a_model_ahead_of_the_checked_step_is_held_until_the_step_moves_and_a_stall_opens_the_gate() -> None:
    """The scheduler asks StepGate.hold before each pair (runner/engine/scheduler.py): a model that runs
    ahead of the units the lockstep check has reached waits, so what a settled model sent past its stop
    stays within the lead; a step that stops moving (a pair in error) opens the gate, never a hang; the
    sweep's stop lets a held pair go at once."""
    import anyio

    from ifsweep.benchmarks import Instance
    from ifsweep.runner.config import StopWhen
    from ifsweep.runner.engine.stopping import StepGate, StopWatch

    units = [(f"u{i}", 1) for i in range(10)]
    watch = StopWatch(StopWhen(ranking=0.95), ["a", "b"], {"cf": units})
    gate = StepGate(watch, stall_s=0.2)

    def done(model: str, unit: int) -> None:
        inst = Instance(
            benchmark="cf", instance_id=str(unit), group_id=f"u{unit}", messages=(), constraints=()
        )
        gate.done(model, "cf", inst, (1.0 if model == "a" else 0.0, 1.0))

    async def main() -> list[tuple[str, bool]]:
        said: list[tuple[str, bool]] = []

        async def ask(unit: str) -> None:
            said.append((unit, await gate.hold("a", "cf", unit, lead=2)))

        for u in range(4):
            done("a", u)  # a is four units on; b has none, so the checked step is 0
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "u1")  # within the lead: sent at once
            tg.start_soon(ask, "u4")  # four past the step: held
            await anyio.sleep(0.05)
            assert said == [("u1", False)] and watch.step["cf"] == 0
            for u in range(3):
                done("b", u)  # the step moves to 3: u4 is now within the lead
            await anyio.sleep(0.05)
            assert said == [("u1", False), ("u4", False)]
            with anyio.fail_after(5):
                await ask("u9")  # b stops at unit 3 (a pair in error): the stall opens the gate
            await ask("u8")  # open until the step moves again: at once

            # The sweep's stop (Ctrl-C, a cap) lets a held pair go within a poll, not a stall.
            flag: list[bool] = []

            async def stop_soon() -> None:
                await anyio.sleep(0.1)
                flag.append(True)

            held = StepGate(watch, stall_s=60)
            tg.start_soon(stop_soon)
            with anyio.fail_after(5):
                said.append(("stopped", await held.hold("a", "cf", "u9", 2, lambda: bool(flag))))
        return said

    start = time.monotonic()
    said = anyio.run(main)
    assert said[2:] == [("u9", False), ("u8", False), ("stopped", False)]
    assert 0.3 <= time.monotonic() - start < 4
