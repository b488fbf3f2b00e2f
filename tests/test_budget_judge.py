"""The budget running out inside an instance's concurrent judge tasks stops the sweep cleanly (exit 3),
just as it does between generations: the pair's other judge calls in flight finish and are kept."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from sweeps import stored_records, toml_config

from ifsweep.runner.commands.cli import main
from ifsweep.simulator import FaultRates, SimConfig, SimulatorThread

PRICE = "price = { input_per_mtok = 1.0, output_per_mtok = 4.0 }"


def test_budget_exhausted_during_judging_exits_3_and_resumes(tmp_path: Path) -> None:
    with SimulatorThread(SimConfig(seed=5, latency_ms=5)) as sim:
        out = tmp_path / "run"
        cfg = tmp_path / "sweep.toml"
        text = toml_config(
            out, sim.base_url, models=("alpha",), bench=("eifbench",), extra_run="max_usd = 0.008"
        )
        text = text.replace(
            'model = "openai/sim-judge"',
            f'model = "openai/sim-judge"\n{PRICE}\nparams = {{ max_tokens = 64 }}',
        )
        text = text.replace(
            "params = { temperature = 0, max_tokens = 128 }", f"params = {{ max_tokens = 128 }}\n{PRICE}"
        )
        cfg.write_text(text)
        assert main(["run", str(cfg)]) == 3
        summary = json.loads((out / "summary.json").read_text())
        assert summary["status"] == "budget_exhausted"
        assert 0 < summary["spent_usd"] <= 0.008
        assert summary["done"] < summary["planned"]

        cfg.write_text(text.replace("max_usd = 0.008", "max_usd = 50.0"))
        sent = sim.stats.requests
        assert main(["run", str(cfg)]) == 0
        final = json.loads((out / "summary.json").read_text())
        assert final["status"] == "complete" and final["done"] == final["planned"]
        # Nothing already paid for is bought again: the resumed run sends only what was missing.
        assert sum(c - 1 for c in sim.stats.bodies.values() if c > 1) == 0, sim.stats.requests - sent


def panel_toml(
    out: Path, model_base: str, judges: dict[str, str], max_usd: float, bench: str = "cfbench"
) -> str:
    """One instance of `bench`, a cheap model and a panel of `judges` (id: base URL), each with a dear
    worst case (max_tokens 1000 at $100/Mtok out: about $0.1 a call)."""
    judge_price = "price = { input_per_mtok = 1.0, output_per_mtok = 100.0 }"
    text = toml_config(
        out, model_base, models=("alpha",), bench=(bench,), limit=1, judge=False,
        # File order: the first instance as listed, whose judge tasks the tests count on.
        extra_run=f'max_usd = {max_usd}\norder = "file"',
        extra_model="price = { input_per_mtok = 0.01, output_per_mtok = 0.01 }",
    )  # fmt: skip
    for ident, base in judges.items():
        text += "\n".join(
            [
                "[[judges]]",
                f'id = "{ident}"',
                f'model = "openai/sim-{ident}"',
                f'api_base = "{base}"',
                judge_price,
                "params = { temperature = 0, max_tokens = 1000 }",
                "",
            ]
        )
    return text


def test_a_budget_stop_lets_the_other_judges_call_in_flight_finish(tmp_path: Path) -> None:
    """Chaos seed 2009: the panel's `fast` judge gets a malformed answer (it may have been billed), and
    the retry's second worst case does not fit the sweep's cap. BudgetExhausted used to cancel the
    `slow` judge's call, in flight and already billed by its provider: its answer was lost, and the
    resume with a raised cap bought it again. Now the stop waits for it and keeps its answer."""
    out, cfg = tmp_path / "run", tmp_path / "sweep.toml"
    with (
        SimulatorThread(SimConfig(seed=5, faults=FaultRates(malformed=1.0))) as fast,
        SimulatorThread(SimConfig(seed=5, latency_ms=1500)) as slow,
    ):
        # Room for the answer and one worst case (about $0.1) per judge, not for the fast one's retry.
        panel = {"fast": fast.base_url, "slow": slow.base_url}
        cfg.write_text(panel_toml(out, slow.base_url, panel, max_usd=0.25))
        assert main(["run", str(cfg)]) == 3
        slow_judged = [
            r for r in stored_records(out, {"judgment"}) if r["judge"] == "slow" and r["status"] == "ok"
        ]
        assert slow_judged, "the slow judge's answer, billed in flight at the stop, was not kept"

        fast.set_config(SimConfig(seed=5))
        cfg.write_text(panel_toml(out, slow.base_url, panel, max_usd=50.0))
        assert main(["run", str(cfg)]) == 0
        billed = Counter(b.body for b in slow.stats.ledger.bills)
        assert max(billed.values()) == 1, "a request the slow judge's provider answered was bought again"


def test_a_budget_stop_lets_the_same_judges_other_tasks_in_flight_finish(tmp_path: Path) -> None:
    """The same within one judge (chaos seed 2009 had one): an EIFBench instance's five judge tasks go
    at once; the judge's provider answers the seeded draws malformed, trickled (2-5 s), trickled,
    malformed, malformed. A malformed one's retry does not fit the cap: the trickled calls, billed in
    flight, used to be cancelled with it and bought again by the resume."""
    out, cfg = tmp_path / "run", tmp_path / "sweep.toml"
    faults = FaultRates(malformed=0.5, trickle=0.5)
    with (
        SimulatorThread(SimConfig(seed=1, faults=faults)) as judge,
        SimulatorThread(SimConfig(seed=1)) as models,
    ):
        # Room for five worst cases, not for a retry's sixth.
        cfg.write_text(panel_toml(out, models.base_url, {"j": judge.base_url}, 0.55, bench="eifbench"))
        assert main(["run", str(cfg)]) == 3
        judge.set_config(SimConfig(seed=1))
        cfg.write_text(panel_toml(out, models.base_url, {"j": judge.base_url}, 50.0, bench="eifbench"))
        assert main(["run", str(cfg)]) == 0
        bills: dict[str, list[bool]] = {}
        for b in judge.stats.ledger.bills:
            bills.setdefault(b.body, []).append(b.delivered)
        again = [body for body, delivered in bills.items() if len(delivered) > 1 and delivered[0]]
        assert len(bills) == 5 and not again, f"{len(again)} answers bought again: {bills}"
