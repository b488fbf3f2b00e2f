"""How `ifsweep report` lists models and how `ifsweep agreement` lays out its table (issue 21, item 9).

Models come in the run's config order (m10, m2, m1 here: neither string nor natural order), or in
natural order (m2 before m10) when the config is not known. Leaderboards rank by score; models with
equal scores (three ids on one served model give the same answers) keep that order. CFBench's
constraint types are Chinese: the agreement table's columns line up by display width.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ifsweep
from ifsweep import benchmarks
from ifsweep.runner.commands.cli import main
from ifsweep.runner.commands.textwidth import width
from ifsweep.simulator import SimConfig, SimulatorThread

CONFIG_ORDER = ["m10", "m2", "m1"]
NATURAL_ORDER = ["m1", "m2", "m10"]


@pytest.fixture(scope="module")
def sim() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimConfig(seed=5)) as s:
        yield s


def config(out: Path, base: str, judges: list[str]) -> dict[str, Any]:
    """CFBench's sample; every model id on one served model, so their scores are equal."""
    endpoint = {"api_base": base, "params": {"max_tokens": 64}}
    return {
        "run": {"output_dir": str(out), "progress": "off"},
        "benchmarks": [{"name": "cfbench", "data": str(benchmarks.get("cfbench").fixture_dir()), "limit": 6}],
        "models": [{"id": m, "model": "openai/sim-same", **endpoint} for m in CONFIG_ORDER],
        "judges": [{"id": f"j{i}", "model": f"openai/{name}", **endpoint} for i, name in enumerate(judges)],
    }


def report(run: Path, capsys: pytest.CaptureFixture[str], fmt: str) -> str:
    capsys.readouterr()
    assert main(["report", str(run), "--format", fmt]) == 0
    return capsys.readouterr().out


def table_models(text: str) -> list[str]:
    """The model column of the terminal leaderboard (above a partial run's estimate section)."""
    board = text.split("Estimates for the planned population")[0]
    return [
        line.split()[0] for line in board.splitlines() if line.split() and line.split()[0] in CONFIG_ORDER
    ]


def test_report_lists_models_in_config_order_else_natural_order(
    sim: SimulatorThread, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert ifsweep.run(config(run, sim.base_url, ["sim-judge"])).status == "complete"
    doc = json.loads(report(run, capsys, "json"))
    assert list(dict.fromkeys(r["model"] for r in doc)) == CONFIG_ORDER
    assert table_models(report(run, capsys, "table")) == CONFIG_ORDER  # equal scores: config order
    csv_models = [r["model"] for r in csv.DictReader(io.StringIO(report(run, capsys, "csv")))]
    assert list(dict.fromkeys(csv_models)) == CONFIG_ORDER
    # A run whose config is not known (written before the order was kept, or imported): natural order
    manifest = run / "manifest.json"
    raw = json.loads(manifest.read_text())
    del raw["model_order"]
    manifest.write_text(json.dumps(raw))
    assert list(dict.fromkeys(r["model"] for r in json.loads(report(run, capsys, "json")))) == NATURAL_ORDER
    assert table_models(report(run, capsys, "table")) == NATURAL_ORDER


def test_agreement_table_aligns_chinese_constraint_types(
    sim: SimulatorThread, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert ifsweep.run(config(run, sim.base_url, ["sim-judge", "sim-judge-flip0.3"])).status == "complete"
    capsys.readouterr()
    assert main(["agreement", str(run), "--resamples", "20"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("benchmark ") and "statistic" in line)
    rows = lines[head + 2 : lines.index("", head)]
    wide = [r for r in rows if width(r) != len(r)]
    assert wide, rows  # CFBench's constraint types are Chinese
    judges_at = width(lines[head][: lines[head].index("judges")])
    for r in rows:
        assert width(r) == width(lines[head]), f"misaligned by display width:\n{lines[head]}\n{r}"
        assert from_column(r, judges_at).startswith(("j0 & j1 ", "panel ")), r


def from_column(text: str, column: int) -> str:
    """What `text` shows from terminal column `column` on."""
    for i in range(len(text) + 1):
        if width(text[:i]) >= column:
            return text[i:]
    return ""


def test_scores_and_the_viewer_list_equal_models_in_config_order(
    sim: SimulatorThread, tmp_path: Path
) -> None:
    """Equal scores on every headline metric: `ifsweep.scores` and the viewer's boards keep the config's
    order, as `report` does (issue 36, item 9)."""
    from ifsweep.runner.view.index import RunIndex
    from ifsweep.runner.view.overview import leaderboards, overview

    run = tmp_path / "run"
    assert ifsweep.run(config(run, sim.base_url, ["sim-judge"])).status == "complete"
    scores = ifsweep.scores(run, judge=None)
    assert list(dict.fromkeys(scores.get_column("model").to_list())) == CONFIG_ORDER
    index = RunIndex.build(run)
    board = overview(index, leaderboards(run)).boards[0]
    assert [r.model for r in board.rows] == CONFIG_ORDER


def test_a_tie_on_the_primary_metric_goes_to_the_next_headline_metric(
    sim: SimulatorThread, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """CFBench ranks by PSR, then CSR, then ISR. Verdict rows (a real run's, rewritten) where a1 and b1
    pass the same instances (PSR equal) but b1 satisfies more constraints (CSR higher): b1 first, in
    `ifsweep metrics`, `ifsweep.scores` and the leaderboard every report renders."""
    import polars as pl

    from ifsweep.metrics.leaderboard import leaderboard
    from ifsweep.runner.commands.rundir import metric_catalog

    run = tmp_path / "run"
    assert ifsweep.run(config(run, sim.base_url, ["sim-judge"])).status == "complete"
    rows = ifsweep.verdicts(run).filter(pl.col("model") == "m1")
    counts = rows.group_by("instance_id").agg(
        pl.len().alias("n"), (pl.col("priority") == "primary").sum().alias("primary")
    )
    passing, failing = sorted(counts.filter((pl.col("n") > 1) & (pl.col("primary") > 0))["instance_id"])[:2]
    rows = rows.filter(pl.col("instance_id").is_in([passing, failing]))
    first_primary = rows.with_row_index("i").filter(
        (pl.col("instance_id") == failing) & (pl.col("priority") == "primary")
    )["i"][0]

    def as_model(name: str, failing_satisfied: pl.Expr) -> pl.DataFrame:
        sat = pl.when(pl.col("instance_id") == passing).then(True).otherwise(failing_satisfied)
        return (
            rows.with_row_index("i")
            .with_columns(pl.lit(name).alias("model"), sat.alias("satisfied"), pl.lit("ok").alias("status"))
            .drop("i")
        )

    a1 = as_model("a1", pl.lit(False))  # the failing instance: every constraint failed
    b1 = as_model("b1", pl.col("i") != first_primary)  # only one primary requirement failed
    both = pl.concat([a1, b1])
    path = tmp_path / "rows.jsonl"
    both.write_ndjson(path)

    capsys.readouterr()
    assert main(["metrics", str(path), "--format", "table"]) == 0
    listed = [
        line.split()[0]
        for line in capsys.readouterr().out.splitlines()
        if line.split()[:1] in (["a1"], ["b1"])
    ]
    assert listed == ["b1", "a1"], listed
    scores = ifsweep.scores(path)
    psr = {
        r["model"]: r["value"]
        for r in scores.filter((pl.col("metric") == "PSR") & (pl.col("slice") == "all")).iter_rows(named=True)
    }
    assert psr["a1"] == psr["b1"] == 0.5
    board = leaderboard(scores, metric_catalog()[0], "cfbench")
    assert board["model"].to_list() == ["b1", "a1"]
    assert board["CSR"][0] > board["CSR"][1]
