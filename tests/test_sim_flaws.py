"""The simulator's one-sided judge flaws (issue 33, item 6): `-fyes` says YES on a share of the plain
judge's NOs and never turns a YES over, `-fno` the reverse, so a test knows each judge's true error
rates against the plain judge. Checked on verdicts a sweep stored, over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl
import pytest
from sweeps import panel_sweep

import ifsweep
from ifsweep.runner.store.compact import load_verdict_rows
from ifsweep.simulator import SimConfig, SimulatorThread
from ifsweep.simulator.judges import judge_flaws

JUDGES = (("gold", "sim-judge"), ("lenient", "sim-judge-fyes0.3"), ("strict", "sim-judge-fno0.3"))


@pytest.fixture(scope="module")
def votes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pl.DataFrame]:
    out = tmp_path_factory.mktemp("flaws") / "run"
    with SimulatorThread(SimConfig(seed=3)) as sim:
        assert ifsweep.run(panel_sweep(out, sim.base_url, JUDGES, limit=10)).status == "complete"
    rows = load_verdict_rows(out).filter((pl.col("source") == "judge") & (pl.col("status") == "ok"))
    yield rows.pivot(
        on="judge", index=["benchmark", "model", "instance_id", "constraint_idx"], values="satisfied"
    ).drop_nulls()


def test_names_parse() -> None:
    assert judge_flaws("sim-judge-fyes0.1-fno0.05") == (0.0, 0.0, 0.1, 0.05)
    assert judge_flaws("sim-judge-flip0.2").flip == 0.2
    assert judge_flaws("sim-judge") == (0.0, 0.0, 0.0, 0.0)


def share(df: pl.DataFrame, judge: str, gold: bool) -> tuple[int, int]:
    """(units where `judge` differs from gold, units) among those whose gold is `gold`."""
    part = df.filter(pl.col("gold") == gold)
    return int((part.get_column(judge) != gold).sum()), part.height


def test_lenient_judge_says_yes_on_a_share_of_true_no_only(votes: pl.DataFrame) -> None:
    wrong_no, n_yes = share(votes, "lenient", True)
    wrong_yes, n_no = share(votes, "lenient", False)
    assert n_yes > 50 and n_no > 50, (n_yes, n_no)
    assert wrong_no == 0  # it never turns a YES over
    # 0.3 of the true NOs, within four binomial standard errors
    se = (0.3 * 0.7 / n_no) ** 0.5
    assert abs(wrong_yes / n_no - 0.3) < 4 * se, (wrong_yes, n_no)


def test_strict_judge_says_no_on_a_share_of_true_yes_only(votes: pl.DataFrame) -> None:
    wrong_no, n_yes = share(votes, "strict", True)
    wrong_yes, _ = share(votes, "strict", False)
    assert wrong_yes == 0
    se = (0.3 * 0.7 / n_yes) ** 0.5
    assert abs(wrong_no / n_yes - 0.3) < 4 * se, (wrong_no, n_yes)
