"""Metrics stream (issue 25): the rows stay a lazy plan that Polars' streaming engine reads in batches,
and the figures equal those of the rows held in memory, on every benchmark's fixtures and on generated
rows; peak memory does not grow with the rows."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_metrics import CATALOG, row

from ifsweep import benchmarks, metrics
from ifsweep.metrics import VERDICT_SCHEMA


def fixture_rows(seed: int) -> pl.DataFrame:
    """Verdict rows for every instance and constraint of every benchmark's fixtures, two models, with
    seeded verdicts and a few unparsed or error rows: the fixtures' own shapes (levels, categories,
    groups, splits, types, priorities, sub-instructions)."""
    rnd = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for name in benchmarks.names():
        bench = benchmarks.get(name)
        report = bench.report_name(bench.fixture_dir(), {})
        for inst in bench.load(bench.fixture_dir(), {}):
            for model in ("m-a", "m-b"):
                for con in inst.constraints:
                    status = rnd.choices(["ok", "unparsed", "error"], [0.95, 0.03, 0.02])[0]
                    rows.append(
                        {
                            "run": "r",
                            "benchmark": report,
                            "model": model,
                            "judge": "j",
                            "scoring": rnd.choice(["paper", "reference"]) if name == "cfbench" else "paper",
                            "instance_id": inst.instance_id,
                            "group_id": inst.group_id,
                            "level": inst.level,
                            "category": inst.category,
                            "split": inst.split,
                            "instruction_idx": con.instruction_idx,
                            "constraint_idx": con.idx,
                            "constraint_type": con.type,
                            "priority": con.priority,
                            "satisfied": rnd.random() < 0.7 if status == "ok" else None,
                            "source": rnd.choice(["rule", "judge"]),
                            "status": status,
                        }
                    )
    return pl.DataFrame(rows, schema=VERDICT_SCHEMA)


def as_scanned(frame: pl.DataFrame, path: Path, seed: int) -> pl.LazyFrame:
    """`frame` shuffled and written as Parquet in row groups of 7 rows, then scanned: the streaming
    engine reads it in many small batches, in another order than the frame's."""
    frame.sample(fraction=1.0, shuffle=True, seed=seed).write_parquet(path, row_group_size=7)
    return pl.scan_parquet(path)


def test_every_benchmarks_fixtures_stream_to_the_in_memory_figures(tmp_path: Path) -> None:
    frame = fixture_rows(seed=3)
    assert set(frame.get_column("benchmark")) >= {"followbench", "infobench", "cfbench", "eifbench"}
    eager = metrics.compute_metrics(frame, CATALOG, ci=True, resamples=200)
    streamed = metrics.compute_metrics(
        as_scanned(frame, tmp_path / "v.parquet", 1), CATALOG, ci=True, resamples=200
    )
    assert eager.height > 100
    assert streamed.equals(eager)
    for bench in ("followbench", "infobench", "cfbench", "eifbench"):
        primary = CATALOG.primary(bench)
        lazy = metrics.paired_differences(pl.scan_parquet(tmp_path / "v.parquet"), CATALOG, bench, primary)
        assert lazy.equals(metrics.paired_differences(frame, CATALOG, bench, primary))


_BENCHES = ("followbench", "infobench", "cfbench", "eifbench")
_TYPES = ("Content", "Format|Style", " Style |Style", "Number", "|", "Linguistic")


@st.composite
def verdict_rows(draw: st.DrawFn) -> pl.DataFrame:
    n_inst = draw(st.integers(1, 25))
    rows = []
    for i in range(n_inst):
        bench = draw(st.sampled_from(_BENCHES))
        model = draw(st.sampled_from(("m0", "m1", "m2")))
        judge = draw(st.sampled_from(("j0", "j1")))
        # What describes an instance is the same on each of its rows, as a verdict record writes it.
        level, category = draw(st.integers(1, 5)), draw(st.sampled_from(("content", "format")))
        split = draw(st.sampled_from(("easy", "hard")))
        for c in range(draw(st.integers(1, 6))):
            status = draw(st.sampled_from(("ok", "ok", "ok", "ok", "unparsed", "error")))
            rows.append(
                row(
                    bench,
                    model,
                    f"i{i}",
                    c,
                    draw(st.booleans()) if status == "ok" else None,
                    status=status,
                    judge=judge,
                    group_id=f"g{i % 3}",
                    level=level,
                    category=category,
                    split=split,
                    constraint_type=draw(st.sampled_from(_TYPES)),
                    priority=draw(st.sampled_from(("primary", "secondary"))),
                    instruction_idx=draw(st.sampled_from((None, 0, 1))),
                )
            )
    return pl.DataFrame(rows, schema=VERDICT_SCHEMA)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frame=verdict_rows(), seed=st.integers(0, 99))
def test_generated_rows_stream_to_the_in_memory_figures(
    tmp_path: Path, frame: pl.DataFrame, seed: int
) -> None:
    path = tmp_path / f"gen-{seed}.parquet"
    eager = metrics.compute_metrics(frame, CATALOG, ci=True, resamples=50, seed=seed)
    assert metrics.compute_metrics(
        as_scanned(frame, path, seed), CATALOG, ci=True, resamples=50, seed=seed
    ).equals(eager)
    assert metrics.coverage_metrics(pl.scan_parquet(path)).equals(metrics.coverage_metrics(frame))


def test_a_bad_row_in_a_scanned_file_is_still_named(tmp_path: Path) -> None:
    frame = fixture_rows(seed=5)
    bad = frame.with_columns(
        pl.when(pl.int_range(pl.len()) == 123)
        .then(pl.lit("oracle"))
        .otherwise(pl.col("source"))
        .alias("source")
    )
    bad.write_parquet(tmp_path / "bad.parquet", row_group_size=100)
    with pytest.raises(metrics.VerdictError, match=r"row 123 .*field 'source': 'oracle'"):
        metrics.compute_metrics(pl.scan_parquet(tmp_path / "bad.parquet"), CATALOG)


def test_per_instance_keys_on_categories_of_its_own_freed_with_its_summaries() -> None:
    """per_instance keys instances on categorical codes (a string key held far more per instance while
    streaming): of categories private to the call, which Polars frees with the summaries, so a
    long-lived process accumulates no instance ids and no other frame's categories are touched."""
    rows = fixture_rows(seed=7).lazy()
    aggs = [metrics.kept_expr(), pl.col("split").first()]
    inst = metrics.per_instance(rows, "cfbench", aggs).collect()
    model, instance_id, split = (inst.schema[c] for c in ("model", "instance_id", "split"))
    assert isinstance(model, pl.Categorical) and model == instance_id == split
    categories = model.categories
    assert not categories.is_global()
    assert {"m-a", "m-b"} <= set(categories.to_series())
    assert sorted(inst.get_column("model").cast(pl.String).unique()) == ["m-a", "m-b"]
    del inst
    assert "m-a" not in categories
