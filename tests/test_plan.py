"""`ifsweep plan`: planned calls, tokens, cost range and time implied by limits, from the fixtures' counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from ifsweep import benchmarks
from ifsweep.runner.commands.cli import main
from ifsweep.runner.commands.planning import DEFAULT_MAX_TOKENS, estimate
from ifsweep.runner.config import load_config
from ifsweep.runner.engine.sweep import load_work
from ifsweep.runner.watch.workload import JUDGE_REPLY_LOW

PRICE = "price = { input_per_mtok = 1.0, output_per_mtok = 4.0 }"


def write(tmp_path: Path, bench: str, *, alpha: str = PRICE, judge_price: str = PRICE) -> Path:
    data = benchmarks.get(bench).fixture_dir()
    text = f"""
[run]
output_dir = "{tmp_path / "run"}"

[[benchmarks]]
name = "{bench}"
data = "{data}"

[[models]]
id = "alpha"
model = "openai/sim-alpha"
api_base = "http://127.0.0.1:9/v1"
params = {{ max_tokens = 200 }}
rpm = 6
{alpha}

[[models]]
id = "beta"
model = "openai/sim-beta"
api_base = "http://127.0.0.1:9/v1"
tpm = 100000
{PRICE}

[judge]
model = "openai/sim-judge"
api_base = "http://127.0.0.1:9/v1"
params = {{ max_tokens = 100 }}
{judge_price}
"""
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    return path


def test_cfbench_plans_one_judge_call_per_instance(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, "cfbench"))
    rows = estimate(cfg, load_work(cfg))
    assert [(r.model, r.benchmark, r.calls, r.judge_calls) for r in rows] == [
        ("alpha", "cfbench", 12, 12),
        ("beta", "cfbench", 12, 12),
    ]
    alpha, beta = rows
    # Outputs run from a quarter of max_tokens to all of it; judge replies from a short verdict to max.
    assert alpha.output_low == 12 * 200 // 4 + 12 * JUDGE_REPLY_LOW
    assert alpha.output_high == 12 * 200 + 12 * 100
    assert beta.output_high == 12 * DEFAULT_MAX_TOKENS + 12 * 100  # no max_tokens: the default
    # Same prompts; a judge prompt counts the judged answer as half of the model's max_tokens.
    assert beta.input_tokens - alpha.input_tokens == 12 * (DEFAULT_MAX_TOKENS // 2 - 200 // 2)
    assert alpha.input_tokens > 12 * 100
    # Only output tokens differ between low and high, at $4 per million.
    assert alpha.cost_low is not None and alpha.cost_high is not None
    assert alpha.cost_high - alpha.cost_low == pytest.approx((alpha.output_high - alpha.output_low) * 4e-6)
    assert alpha.minutes_by_limits == pytest.approx(12 / 6)  # 12 calls at 6 per minute
    assert beta.minutes_by_limits is not None and 0 < beta.minutes_by_limits < 1


def test_rule_scored_benchmark_plans_no_judge_calls(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, "followbench"))
    work = load_work(cfg)
    ((job, instances),) = work.jobs
    judged = sum(1 for inst in instances if job.bench.plan(inst, "", "paper").judge_tasks)
    rows = estimate(cfg, work)
    assert all(r.calls == len(instances) == 45 for r in rows)
    assert 0 < judged < 45
    assert all(r.judge_calls >= judged for r in rows)


def test_plan_command_prints_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(write(tmp_path, "cfbench"))]) == 0
    out = capsys.readouterr().out
    lines = [line.split() for line in out.splitlines()]
    alpha = next(parts for parts in lines if parts and parts[0] == "alpha")
    assert alpha[1:4] == ["cfbench", "12", "12"]
    assert alpha[-1] == "2.0"  # minutes at rpm 6
    assert "total cost $" in out and "unknown" not in out
    assert not (tmp_path / "run").exists()  # planning writes nothing


def test_plan_shows_unknown_prices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(write(tmp_path, "cfbench", alpha=""))]) == 0
    out = capsys.readouterr().out
    alpha = next(line for line in out.splitlines() if line.startswith("alpha"))
    assert "unknown price" in alpha
    assert "(plus models with unknown prices)" in out


def test_plan_says_that_run_will_refuse_a_model_without_a_price_under_a_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36, item 11: a cap and a model without a price is a config `run` refuses; `plan` says so
    (exit 2, the fix named) instead of a total of $0 and exit 0. Without a cap it is a note."""
    path = write(tmp_path, "cfbench", alpha="")
    path.write_text(path.read_text().replace("[run]\n", "[run]\nmax_usd = 5.0\n", 1))
    capsys.readouterr()
    assert main(["plan", str(path)]) == 2
    said = capsys.readouterr()
    assert "total cost" in said.out  # the estimate is still shown
    assert "`ifsweep run` will refuse this config" in said.err
    assert "alpha (openai/sim-alpha)" in said.err and "price = { input_per_mtok" in said.err
    assert main(["run", str(path)]) == 2  # and it does, with the same words
    assert "alpha (openai/sim-alpha)" in capsys.readouterr().err

    uncapped = write(tmp_path, "cfbench", alpha="")
    assert main(["plan", str(uncapped)]) == 0
    err = capsys.readouterr().err
    assert "no price is known for alpha (openai/sim-alpha)" in err and "price = {" in err
    assert main(["plan", str(write(tmp_path, "cfbench"))]) == 0
    assert "no price" not in capsys.readouterr().err
