"""One reading of a run (issue 31): every reader — `report` (JSON, table, HTML), `ifsweep.scores`,
`ifsweep.verdicts`, the viewer's overview (what `--export` writes), `agreement`, `status` and
`status --json` — sees the same verdicts of the same plan, over real runs made by the CLI against the
built-in simulator and edited as users edit them. Items 1-4 and 6 reproduce the issue's reports."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import ifsweep
from ifsweep import benchmarks
from ifsweep.metrics.leaderboard import leaderboard, value_texts
from ifsweep.runner.commands.agreement import run_agreement
from ifsweep.runner.commands.cli import main
from ifsweep.runner.commands.rundir import metric_catalog
from ifsweep.runner.store.manifest import read_manifest
from ifsweep.runner.view.index import RunIndex
from ifsweep.runner.view.overview import Overview, leaderboards, overview
from ifsweep.simulator import SimConfig, SimulatorThread

CLOSED = "http://127.0.0.1:9/v1"  # nobody listens on port 9
SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "benchmarks"


def toml(
    out: Path,
    base: str,
    *,
    models: Sequence[str] = ("alpha", "beta"),
    judges: Sequence[tuple[str, str]] = (("j1", ""),),
    bench: Sequence[str] = ("followbench",),
    limit: int | None = 4,
    data: dict[str, Path] | None = None,
    batch: bool = False,
) -> str:
    """A sweep config a user could write: `judges` as (id, api_base or "" for the simulator's)."""
    lines = ["[run]", f'output_dir = "{out}"', 'progress = "off"', ""]
    for name in bench:
        d = (data or {}).get(name) or benchmarks.get(name).fixture_dir()
        lines += ["[[benchmarks]]", f'name = "{name}"', f'data = "{d}"']
        lines += [f"limit = {limit}"] if limit is not None else []
        lines.append("")
    batched = "batch = { poll_s = 0.05, poll_max_s = 0.2 }" if batch else ""
    for m in models:
        lines += ["[[models]]", f'id = "{m}"', f'model = "openai/sim-{m}"', f'api_base = "{base}"']
        lines += ["params = { temperature = 0, max_tokens = 128 }", batched, ""]
    for jid, where in judges:
        lines += [
            "[[judges]]",
            f'id = "{jid}"',
            'model = "openai/sim-judge"',
            f'api_base = "{where or base}"',
        ]
        lines += [batched, ""]
    return "\n".join(lines)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(args))
    return code, capsys.readouterr().out


def run(capsys: pytest.CaptureFixture[str], cfg: Path, text: str, *extra: str) -> int:
    cfg.write_text(text)
    return cli(capsys, "run", str(cfg), *extra)[0]


@dataclass
class Views:
    """What every reader says of one run directory."""

    report: list[dict[str, Any]]  # report --format json --judge all
    table: str  # report (the default judge)
    scores: pl.DataFrame  # ifsweep.scores (every judge)
    status: dict[str, Any]  # status --json
    status_text: str
    overview: Overview  # the viewer's overview (what --export writes)
    verdicts: pl.DataFrame


def read_all(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> Views:
    code, out = cli(capsys, "report", str(run_dir), "--format", "json", "--judge", "all")
    assert code == 0, out
    report = json.loads(out)
    table = cli(capsys, "report", str(run_dir))[1]
    status = json.loads(cli(capsys, "status", str(run_dir), "--json")[1])
    status_text = cli(capsys, "status", str(run_dir))[1]
    manifest = read_manifest(run_dir)
    panel = manifest.judge_order if manifest is not None else ()
    ov = overview(RunIndex.build(run_dir), leaderboards(run_dir), panel)
    return Views(report, table, ifsweep.scores(run_dir), status, status_text, ov, ifsweep.verdicts(run_dir))


def assert_agree(v: Views) -> None:
    """Leaderboards, n, coverage, planned and done counts and the complete flags agree between readers."""
    frame = pl.DataFrame(v.report, infer_schema_length=None)
    # The report and the library: the same figures, row for row.
    key = ["benchmark", "model", "judge", "metric", "slice"]
    mine = v.scores.select(*key, "value", "n", "planned", "done").sort(key)
    assert frame.select(mine.columns).sort(key).equals(mine, null_equal=True)
    # The viewer's leaderboards print the report's figures, over the same instances.
    catalog, _ = metric_catalog()
    seen = 0
    for board in v.overview.boards:
        part = frame.filter(pl.col("benchmark") == board.benchmark)
        part = part.filter(
            pl.col("judge").is_null() if board.judge is None else pl.col("judge") == board.judge
        )
        if part.height == 0:
            continue
        names = (*catalog.headline(board.benchmark), "coverage")
        expected = {
            str(r["model"]): tuple(value_texts(r, catalog, board.benchmark, names))
            for r in leaderboard(part, catalog, board.benchmark).iter_rows(named=True)
        }
        shown = {r.model: r.values for r in board.rows if r.model in expected}
        assert shown == expected, (board.benchmark, board.judge)
        cover = part.filter((pl.col("metric") == "coverage") & (pl.col("slice") == "all"))
        for r in cover.iter_rows(named=True):
            row = next(b for b in board.rows if b.model == r["model"])
            assert (row.judged, row.planned, row.done) == (r["n"], r["planned"], r["done"]), (board, r)
            seen += 1
    assert seen, "the viewer showed no leaderboard"
    # Status counts what the report covers: planned and done per (model, benchmark).
    pairs = {(r["model"], r["benchmark"]): (r["planned"], r["done"]) for r in v.report}
    status = {(r["model"], r["benchmark"]): (r["planned"], r["done"]) for r in v.status["rows"]}
    assert {k: status[k] for k in pairs} == pairs
    # The rows `ifsweep.verdicts` hands out are the ones scored: the same instances per pair.
    inst = v.verdicts.group_by("benchmark", "model", "judge").agg(pl.col("instance_id").n_unique().alias("n"))
    judged = {(r["benchmark"], r["model"], r["judge"]): r["n"] for r in inst.iter_rows(named=True)}
    coverage = frame.filter((pl.col("metric") == "coverage") & (pl.col("slice") == "all"))
    assert judged == {
        (r["benchmark"], r["model"], r["judge"]): r["n"] for r in coverage.iter_rows(named=True)
    }
    # The pairs in error, by kind: the viewer's summary is status's.
    assert v.overview.errors_by_kind == v.status["errors_by_kind"]
    # One complete flag: status --json, status's text, the report's partial lines, the viewer.
    complete = v.status["complete"]
    assert complete == all(r["planned"] == r["done"] for r in v.status["rows"])
    assert ("partial run:" in v.table) == (not all(p == d for p, d in pairs.values()))
    assert ("incomplete" in v.status_text) == (not complete)
    assert v.overview.state != "complete" or complete


# --------------------------------------------------------------------------------- the items


def test_item1_an_import_keeps_its_scores_after_a_run_into_its_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cf = SHARED / "CFBench"
    run_dir = tmp_path / "run"
    code, said = cli(
        capsys,
        "import",
        "cfbench",
        str(cf / "output" / "judge" / "moonshot_eval.json"),
        "--out",
        str(run_dir),
        "--data",
        str(cf / "data" / "cfbench_data.json"),
    )
    assert code == 0, said
    before = json.loads(cli(capsys, "report", str(run_dir), "--format", "json")[1])
    with SimulatorThread(SimConfig(seed=3)) as sim:
        text = toml(
            run_dir, sim.base_url, models=("alpha",), bench=("cfbench",), data={"cfbench": cf / "data"}
        )
        assert run(capsys, tmp_path / "s.toml", text) == 0
    v = read_all(run_dir, capsys)

    def psr(rows: list[dict[str, Any]]) -> tuple[float, int]:
        r = next(r for r in rows if (r["model"], r["metric"], r["slice"]) == ("moonshot", "PSR", "all"))
        return r["value"], r["n"]

    # The reference's own scores.xlsx figure for moonshot, before and after the run.
    assert psr(before) == pytest.approx((0.60, 20)) and psr(v.report) == pytest.approx((0.60, 20))
    splits = {r["slice"] for r in v.report if r["model"] == "moonshot" and r["metric"] == "PSR"}
    assert {r["slice"] for r in before if r["metric"] == "PSR"} == splits and "split=easy" in splits
    assert "left out" not in v.table and v.status["complete"]
    assert_agree(v)


def test_item2_the_viewer_follows_a_lowered_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    with SimulatorThread(SimConfig(seed=4)) as sim:
        three = (("j1", ""), ("j2", ""), ("j3", ""))
        assert run(capsys, tmp_path / "s.toml", toml(run_dir, sim.base_url, judges=three, limit=10)) == 0
        sent = sim.stats.requests
        assert run(capsys, tmp_path / "s.toml", toml(run_dir, sim.base_url, judges=three, limit=5)) == 0
        assert sim.stats.requests == sent  # a resume that sends nothing
    v = read_all(run_dir, capsys)
    # `limit` counts sampling units of the seeded order (issue 34): 5 FollowBench groups of 5 levels.
    assert {(r["planned"], r["done"]) for r in v.status["rows"]} == {(25, 25)}
    assert all(r.judged == 25 for b in v.overview.boards for r in b.rows)
    assert_agree(v)
    # And the export file the viewer writes carries those figures.
    out = tmp_path / "export.html"
    assert cli(capsys, "view", str(run_dir), "--export", str(out))[0] == 0
    first = next(b for b in v.overview.boards if b.rows)
    assert all(f'<span class="num">{t}</span>' in out.read_text() for t in first.rows[0].values)


def test_item3_agreement_counts_the_planned_instances(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, fresh = tmp_path / "run", tmp_path / "fresh"
    two = (("j1", ""), ("j2", ""))
    with SimulatorThread(SimConfig(seed=5)) as sim:
        # CFBench: every constraint is the judges' (FollowBench's later samples are rule-checked only).
        cf = ("cfbench",)
        assert (
            run(capsys, tmp_path / "s.toml", toml(run_dir, sim.base_url, judges=two, bench=cf, limit=8)) == 0
        )
        assert (
            run(capsys, tmp_path / "s.toml", toml(run_dir, sim.base_url, judges=two, bench=cf, limit=4)) == 0
        )
        assert run(capsys, tmp_path / "f.toml", toml(fresh, sim.base_url, judges=two, bench=cf, limit=4)) == 0
    lowered, planned = run_agreement(run_dir, resamples=50), run_agreement(fresh, resamples=50)
    assert lowered.stats and [(s.statistic, s.units, s.value) for s in lowered.stats] == [
        (s.statistic, s.units, s.value) for s in planned.stats
    ]
    # The HTML report's judge section is the same reading: it is the fresh run's.
    assert judge_section(run_dir, capsys) == judge_section(fresh, capsys)


def judge_section(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> str:
    html = cli(capsys, "report", str(run_dir), "--format", "html")[1]
    start = html.index('<section id="judges">')
    return html[start : html.index("</section>", start)]


def test_item4_status_agrees_with_the_summary_after_a_judge_is_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    with SimulatorThread(SimConfig(seed=6)) as sim:
        broken = (("j1", ""), ("j2", CLOSED))
        assert run(capsys, tmp_path / "s.toml", toml(run_dir, sim.base_url, judges=broken, limit=3)) == 1
        assert (
            run(capsys, tmp_path / "s.toml", toml(run_dir, sim.base_url, judges=(("j1", ""),), limit=3)) == 0
        )
    summary = json.loads((run_dir / "summary.json").read_text())
    v = read_all(run_dir, capsys)
    assert summary["complete"] and v.status["complete"]
    assert v.status["errors_by_kind"] == summary["errors_by_kind"] == {}
    assert "incomplete" not in v.status_text
    assert_agree(v)
    # The dropped judge's verdicts stay readable when asked for by name.
    assert cli(capsys, "report", str(run_dir), "--judge", "j2")[0] == 0


def test_item6_a_partial_run_says_how_far_it_reaches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    with SimulatorThread(SimConfig(seed=8)) as sim:
        # One partition of two: the other never ran, as a sweep stopped part way.
        text = toml(run_dir, sim.base_url, judges=(("j1", ""), ("j2", "")), limit=8)
        assert run(capsys, tmp_path / "s.toml", text, "--partition", "0/2") == 0
    v = read_all(run_dir, capsys)
    assert not v.status["complete"]
    rows = {(r["model"], r["benchmark"]): (r["done"], r["planned"]) for r in v.status["rows"]}
    # 8 FollowBench groups of 5 levels: `limit` counts sampling units (issue 34).
    assert all(p == 40 and 0 < d < 40 for d, p in rows.values()), rows
    for (model, _), (done, planned) in rows.items():
        assert f"{model} {done} of {planned} planned instances" in v.table
    assert {(r["planned"], r["done"]) for r in v.report} == {(p, d) for d, p in rows.values()}
    csv = pl.read_csv(cli(capsys, "report", str(run_dir), "--format", "csv")[1].encode())
    assert {"planned", "done"} <= set(csv.columns)
    assert "partial run:" in cli(capsys, "report", str(run_dir), "--format", "md")[1]
    html = cli(capsys, "report", str(run_dir), "--format", "html")[1]
    assert '<p class="partial" role="status">partial run:' in html
    assert_agree(v)
    assert any(b.partial for b in v.overview.boards)


def test_the_html_headline_spend_counts_every_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    price = "price = { input_per_mtok = 1.0, output_per_mtok = 4.0 }"
    with SimulatorThread(SimConfig(seed=9)) as sim:
        text = toml(run_dir, sim.base_url, judges=(("j1", ""), ("j2", "")), limit=3)
        text = text.replace('model = "openai/sim-', f'{price}\nmodel = "openai/sim-')
        assert run(capsys, tmp_path / "s.toml", text) == 0
    status = json.loads(cli(capsys, "status", str(run_dir), "--json")[1])
    html = cli(capsys, "report", str(run_dir), "--format", "html")[1]
    total = sum(r["spent_usd"] for r in status["rows"])
    assert total > 0 and f"<b>${total:,.2f}</b><span>spent: answers and every judge</span>" in html
    # The viewer's per-pair spend is status's figure too.
    ov = overview(RunIndex.build(run_dir), leaderboards(run_dir), ("j1", "j2"))
    spent = {(r["benchmark"], r["model"]): r["spent_usd"] for r in status["rows"]}
    for board in ov.boards:
        for row in board.rows:
            assert row.cost_usd == pytest.approx(spent[(board.benchmark, row.model)])


def test_status_names_a_torn_last_line_in_text_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36 item 11: a torn last shard line hides a record: `status` and `status --json` both say
    the run is not complete and name the line."""
    run_dir = tmp_path / "run"
    with SimulatorThread(SimConfig(seed=5)) as sim:
        assert run(capsys, tmp_path / "s.toml", toml(run_dir, sim.base_url, limit=3)) == 0
    shard = sorted((run_dir / "shards").glob("*.jsonl"))[-1]
    data = shard.read_bytes()
    last = data.rstrip(b"\n").rfind(b"\n") + 1
    shard.write_bytes(data[: last + (len(data) - last) // 2])  # the last line cut in half
    lines = data[:last].count(b"\n") + 1
    status = json.loads(cli(capsys, "status", str(run_dir), "--json")[1])
    text = cli(capsys, "status", str(run_dir))[1]
    assert not status["complete"]
    assert len(status["damaged"]) == 1 and status["damaged"][0].startswith(f"{shard}:{lines}: torn tail")
    assert status["damaged"][0] in text and "incomplete" in text and "| complete" not in text


# ------------------------------------------------------------------------------ the cross-reader matrix


def _limit_lowered(sim: SimulatorThread, tmp: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    run_dir = tmp / "run"
    assert run(capsys, tmp / "s.toml", toml(run_dir, sim.base_url, limit=5)) == 0
    assert run(capsys, tmp / "s.toml", toml(run_dir, sim.base_url, limit=2)) == 0
    return run_dir


def _limit_raised(sim: SimulatorThread, tmp: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    run_dir = tmp / "run"
    assert run(capsys, tmp / "s.toml", toml(run_dir, sim.base_url, limit=2)) == 0
    assert run(capsys, tmp / "s.toml", toml(run_dir, sim.base_url, limit=5)) == 0
    return run_dir


def _judge_dropped(sim: SimulatorThread, tmp: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    run_dir = tmp / "run"
    assert run(capsys, tmp / "s.toml", toml(run_dir, sim.base_url, judges=(("j1", ""), ("j2", "")))) == 0
    assert run(capsys, tmp / "s.toml", toml(run_dir, sim.base_url, judges=(("j2", ""),), limit=3)) == 0
    return run_dir


def _judge_added(sim: SimulatorThread, tmp: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    run_dir = tmp / "run"
    assert run(capsys, tmp / "s.toml", toml(run_dir, sim.base_url)) == 0
    assert run(capsys, tmp / "s.toml", toml(run_dir, sim.base_url, judges=(("j1", ""), ("j2", "")))) == 0
    return run_dir


def _model_dropped(sim: SimulatorThread, tmp: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    run_dir = tmp / "run"
    assert run(capsys, tmp / "s.toml", toml(run_dir, sim.base_url, limit=4)) == 0
    assert run(capsys, tmp / "s.toml", toml(run_dir, sim.base_url, models=("alpha",), limit=2)) == 0
    return run_dir


def _import_then_run(sim: SimulatorThread, tmp: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    run_dir, cf = tmp / "run", SHARED / "CFBench"
    data = ["--data", str(cf / "data" / "cfbench_data.json")]
    moonshot = str(cf / "output" / "judge" / "moonshot_eval.json")
    assert cli(capsys, "import", "cfbench", moonshot, "--out", str(run_dir), *data)[0] == 0
    text = toml(run_dir, sim.base_url, models=("alpha",), bench=("cfbench",), data={"cfbench": cf / "data"})
    assert run(capsys, tmp / "s.toml", text) == 0
    return run_dir


def _partitions(sim: SimulatorThread, tmp: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    run_dir = tmp / "run"
    for i in range(2):
        assert run(capsys, tmp / "s.toml", toml(run_dir, sim.base_url, limit=6), "--partition", f"{i}/2") == 0
    return run_dir


def _one_partition_of_two(sim: SimulatorThread, tmp: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    run_dir = tmp / "run"
    assert run(capsys, tmp / "s.toml", toml(run_dir, sim.base_url, limit=6), "--partition", "1/2") == 0
    return run_dir


def _compact_then_resume(sim: SimulatorThread, tmp: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    run_dir = tmp / "run"
    assert run(capsys, tmp / "s.toml", toml(run_dir, sim.base_url, limit=2)) == 0
    assert cli(capsys, "compact", str(run_dir))[0] == 0
    assert run(capsys, tmp / "s.toml", toml(run_dir, sim.base_url, limit=4)) == 0
    assert cli(capsys, "compact", str(run_dir))[0] == 0  # the readers then read the Parquet
    return run_dir


def _batch_with_a_panel(sim: SimulatorThread, tmp: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    run_dir = tmp / "run"
    text = toml(run_dir, sim.base_url, judges=(("j1", ""), ("j2", "")), limit=3, batch=True)
    assert run(capsys, tmp / "s.toml", text) == 0
    return run_dir


def _judge_unreachable(sim: SimulatorThread, tmp: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    run_dir = tmp / "run"
    text = toml(run_dir, sim.base_url, judges=(("j1", ""), ("j2", CLOSED)), limit=3)
    assert run(capsys, tmp / "s.toml", text) == 1  # pairs in error: exit 1
    return run_dir


MATRIX = {
    "limit lowered": (_limit_lowered, True),
    "limit raised": (_limit_raised, True),
    "judge dropped": (_judge_dropped, True),
    "judge added": (_judge_added, True),
    "model dropped": (_model_dropped, True),
    "import then run": (_import_then_run, True),
    "partitions": (_partitions, True),
    "one partition of two": (_one_partition_of_two, False),
    "compact then resume": (_compact_then_resume, True),
    "batch with a panel": (_batch_with_a_panel, True),
    "a judge unreachable": (_judge_unreachable, False),
}


@pytest.mark.parametrize("edit", list(MATRIX))
def test_every_reader_agrees_over_edited_runs(
    edit: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, complete = MATRIX[edit]
    with SimulatorThread(SimConfig(seed=11)) as sim:
        run_dir = make(sim, tmp_path, capsys)
    v = read_all(run_dir, capsys)
    assert_agree(v)
    # `ifsweep metrics` on the run directory is the same reading.
    assert json.loads(cli(capsys, "metrics", str(run_dir), "--format", "json")[1]) == v.report
    assert v.status["complete"] is complete
    summary = (
        json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").exists() else None
    )
    if summary is not None:  # the last sweep's own word agrees when it ran the whole plan
        assert summary["complete"] is complete
