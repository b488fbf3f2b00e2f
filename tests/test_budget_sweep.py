"""Dollar caps through a whole `ifsweep run`: the cap binds mid-run (exit 3, spent <= cap and close to
it), a higher cap resumes to completion without buying anything twice, a model's own cap stops only that
model, and a cap with an unknown price refuses to start."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sweeps import stored_records

from ifsweep import benchmarks
from ifsweep.runner.commands.cli import main
from ifsweep.simulator import SimConfig, SimulatorThread

PRICE = "price = { input_per_mtok = 1.0, output_per_mtok = 2.0 }"


@pytest.fixture
def sim() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimConfig(latency_ms=5, seed=11)) as s:
        yield s


def sweep(out: Path, base: str, *, max_usd: float | None, model_extra: dict[str, str] | None = None) -> str:
    data = benchmarks.get("cfbench").fixture_dir()
    run = ["[run]", f'output_dir = "{out}"', 'progress = "off"', "concurrency = 8"]
    if max_usd is not None:
        run.append(f"max_usd = {max_usd!r}")
    lines = [*run, "", "[[benchmarks]]", 'name = "cfbench"', f'data = "{data}"', ""]
    for m in ("a", "b"):
        lines += [
            "[[models]]",
            f'id = "{m}"',
            f'model = "openai/sim-{m}"',
            f'api_base = "{base}"',
            "params = { temperature = 0, max_tokens = 256 }",
            (model_extra or {}).get(m, PRICE),
            "",
        ]
    lines += ["[judge]", 'id = "judge"', 'model = "openai/sim-judge"', f'api_base = "{base}"', PRICE]
    lines += ["params = { temperature = 0, max_tokens = 256 }", ""]
    return "\n".join(lines)


def run(cfg: Path, text: str) -> tuple[int, dict[str, Any]]:
    cfg.write_text(text)
    code = main(["run", str(cfg)])
    out = Path(text.split('output_dir = "', 1)[1].split('"', 1)[0])
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return code, summary


def test_cap_binds_mid_run_then_a_higher_cap_resumes_without_rebuying(
    tmp_path: Path, sim: SimulatorThread, capsys: pytest.CaptureFixture[str]
) -> None:
    code, full = run(tmp_path / "full.toml", sweep(tmp_path / "full", sim.base_url, max_usd=100.0))
    assert code == 0 and full["status"] == "complete"
    total = full["spent_usd"]
    assert total > 0
    sim.stats.reset()

    cap = total / 2
    out = tmp_path / "capped"
    code, half = run(tmp_path / "capped.toml", sweep(out, sim.base_url, max_usd=cap))
    assert code == 3
    assert half["status"] == "budget_exhausted"
    assert 0 < half["done"] < half["planned"] == 24
    assert half["spent_usd"] <= cap
    # Refusals wait for in-flight holds to settle, so the run stops at most one worst case short of the
    # cap. A worst case (estimated prompt + max_tokens) is a few times the dearest actual call here: the
    # estimate counts 1.5 tokens per Chinese character, the simulator a quarter of one.
    dearest = max(r["cost_usd"] for r in stored_records(tmp_path / "full", {"generation", "judgment"}))
    assert cap - half["spent_usd"] <= 4 * dearest, (half["spent_usd"], cap, dearest)
    assert "raise max_usd and run the same command again" in capsys.readouterr().err

    code, done = run(tmp_path / "capped.toml", sweep(out, sim.base_url, max_usd=2 * total))
    assert code == 0 and done["status"] == "complete"
    assert done["done"] == done["planned"] == 24 and done["errors"] == 0
    assert max(sim.stats.bodies.values()) == 1, "a call was bought twice"
    assert sim.stats.requests == 48  # 24 generations + 24 judge calls, over both runs
    assert done["spent_usd"] == pytest.approx(total, rel=1e-9)


def test_a_models_own_cap_stops_only_that_model(tmp_path: Path, sim: SimulatorThread) -> None:
    code, full = run(tmp_path / "full.toml", sweep(tmp_path / "full", sim.base_url, max_usd=None))
    assert code == 0
    # A model's cap counts its own answers; each row's spent_usd adds the judge's calls on them.
    spent_a = sum(r["spent_usd"] - r["judge_usd"] for r in full["by_model"] if r["model"] == "a")
    assert spent_a > 0
    cap_a = spent_a / 3
    extra = {"a": f"{PRICE}\nmax_usd = {cap_a!r}"}
    code, s = run(
        tmp_path / "capped.toml", sweep(tmp_path / "capped", sim.base_url, max_usd=None, model_extra=extra)
    )
    assert code == 3 and s["status"] == "budget_exhausted"
    assert "a" in s["message"]
    rows = {r["model"]: r for r in s["by_model"]}
    assert rows["b"]["done"] == rows["b"]["planned"] == 12  # the other model ran to the end
    assert 0 < rows["a"]["done"] < 12
    assert rows["a"]["spent_usd"] - rows["a"]["judge_usd"] <= cap_a


def test_a_cap_without_a_known_price_refuses_to_start(
    tmp_path: Path, sim: SimulatorThread, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(sweep(tmp_path / "run", sim.base_url, max_usd=1.0, model_extra={"b": ""}))
    assert main(["run", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "b (openai/sim-b)" in err and "price = { input_per_mtok" in err
    assert "a (openai/sim-a)" not in err
    assert sim.stats.requests == 0
    assert not (tmp_path / "run").exists()  # refused before the run directory was touched
