"""The cap holds when the server misbehaves (issue 21 item 1): a call never settles more than it holds.
Answers that may have been billed (malformed, cut, reset) are retried only under another worst case held
first, and an answer without usage is charged at most max_tokens of output. Checked through `ifsweep run`
against the simulator, whose own bill (SimStats.billed_usd: every request that reached the model, in
full) must stay under the cap as well as what summary.json says was spent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis_server import redis_server

from ifsweep import benchmarks
from ifsweep.runner.commands.cli import main
from ifsweep.simulator import FaultRates, SimConfig, SimulatorThread


def config(
    out: Path, base: str, *, cap: float, price: tuple[float, float], max_tokens: int, extra: str
) -> str:
    data = benchmarks.get("cfbench").fixture_dir()
    price_line = f"price = {{ input_per_mtok = {price[0]!r}, output_per_mtok = {price[1]!r} }}"
    lines = ["[run]", f'output_dir = "{out}"', 'progress = "off"', "concurrency = 8", f"max_usd = {cap!r}"]
    lines += [extra, "", "[[benchmarks]]", 'name = "cfbench"', f'data = "{data}"', ""]
    for m in ("a", "b", "c"):
        lines += ["[[models]]", f'id = "{m}"', f'model = "openai/sim-{m}"', f'api_base = "{base}"']
        lines += [f"params = {{ temperature = 0, max_tokens = {max_tokens} }}", price_line, ""]
    lines += ["[judge]", 'id = "judge"', 'model = "openai/sim-judge"', f'api_base = "{base}"', price_line]
    lines += [f"params = {{ temperature = 0, max_tokens = {max_tokens} }}", ""]
    return "\n".join(lines)


def run(tmp_path: Path, text: str) -> tuple[int, dict[str, Any]]:
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(text)
    code = main(["run", str(cfg)])
    summary: dict[str, Any] = json.loads((tmp_path / "run" / "summary.json").read_text())
    return code, summary


@pytest.fixture(params=["alone", "coordinated"])
def coordinator(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """No coordinator, or a real redis-server holding the ledger."""
    if request.param == "alone":
        yield ""
        return
    with redis_server(tmp_path / "redis") as server:
        yield f'coordinator = "{server.url}"'


@pytest.mark.parametrize(
    ("faults", "price", "max_tokens"),
    [
        # Issue 21's first repro: 30% malformed bodies, a dear prompt, free output.
        (FaultRates(malformed=0.3), (10.0, 0.0), 100),
        # Its second: no usage in any answer, a dear output, a short max_tokens.
        (FaultRates(missing_usage=1.0), (0.0, 1000.0), 20),
    ],
    ids=["malformed", "missing_usage"],
)
def test_spend_and_the_providers_bill_stay_under_the_cap_when_answers_may_be_billed(
    tmp_path: Path, coordinator: str, faults: FaultRates, price: tuple[float, float], max_tokens: int
) -> None:
    cap = 0.05
    with SimulatorThread(SimConfig(faults=faults, seed=3)) as sim:
        text = config(
            tmp_path / "run", sim.base_url, cap=cap, price=price, max_tokens=max_tokens, extra=coordinator
        )
        code, summary = run(tmp_path, text)
        billed = sim.stats.billed_usd(*price)
    assert code == 3 and summary["status"] == "budget_exhausted", summary["message"]
    assert billed > cap / 2  # the cap bound: the sweep spent most of it
    assert billed <= cap, f"the provider billed ${billed:.6f} over the ${cap} cap"
    assert summary["spent_usd"] <= cap + 1e-12
    # What we count is never below what was billed: the worst case covers what we cannot know.
    assert summary["spent_usd"] >= billed - 1e-12
