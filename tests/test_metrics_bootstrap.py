"""Bootstrap intervals and paired differences."""

from __future__ import annotations

import math
import random

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_metrics import CATALOG, Row, as_dict, frame, metrics_of, row, verdict_rows

from ifsweep.metrics import Components, Leaf, paired_differences
from ifsweep.metrics.bootstrap import (
    CI_SCHEMA,
    bootstrap_intervals,
    build_structure,
    evaluate,
    percentile_interval,
    rng_for,
    unit_index,
    weight_batches,
)
from ifsweep.metrics.components import LEAF_SCHEMA, PARENT_SCHEMA, ROWS_PER_PART, STAT_KEY
from ifsweep.metrics.compute import all_components, components_of, validated


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(verdict_rows(), st.randoms(use_true_random=False))
def test_weighted_evaluation_equals_metrics_of_the_resampled_rows(
    rows: list[Row], rnd: random.Random
) -> None:
    """A resample is the data with unit i repeated w_i times: evaluating the structure under weights w must
    equal compute_metrics on rows physically repeated that way (instance-level statistics)."""
    leaves, parents = components_of(frame(rows), CATALOG)
    leaves = leaves.filter(pl.col("unit_kind") == "instance")
    for bench in leaves.get_column("benchmark").unique().to_list():
        part = leaves.filter(pl.col("benchmark") == bench)
        units = unit_index(part)
        weights = {u: rnd.randint(0, 3) for u in units.get_column("unit").to_list()}
        s = build_structure(part, parents, units)
        got = evaluate(s, np.array([[float(weights[u]) for u in units.get_column("unit").to_list()]]))[0]
        repeated = [
            {**r, "instance_id": f"{r['instance_id']}#{k}", "group_id": f"{r['group_id']}#{k}"}
            for r in rows
            if r["benchmark"] == bench
            for k in range(weights[r["instance_id"]])
        ]
        want = as_dict(metrics_of(frame(repeated))) if repeated else {}
        for j, key in enumerate(s.keys.iter_rows()):
            if key[2] == "CSL":
                continue
            if key in want:
                assert math.isclose(got[j], want[key][0], abs_tol=1e-9), (key, got[j], want[key])
            else:
                assert math.isnan(got[j]), key


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(verdict_rows())
def test_unit_weights_reproduce_point_estimates(rows: list[Row]) -> None:
    leaves, parents = components_of(frame(rows), CATALOG)
    want = as_dict(metrics_of(frame(rows)))
    for _, part in leaves.group_by(["benchmark", "unit_kind"]):
        units = unit_index(part)
        s = build_structure(part, parents, units)
        got = evaluate(s, np.ones((1, units.height)))[0]
        for j, key in enumerate(s.keys.iter_rows()):
            assert math.isclose(got[j], want[key][0], abs_tol=1e-9), key


def binomial_rows(model: str, p_true: float, n: int, bench: str = "cfbench") -> list[Row]:
    return [row(bench, model, f"i{i}", 0, i < p_true * n, split="easy") for i in range(n)]


def test_interval_width_matches_the_normal_approximation() -> None:
    out = metrics_of(frame(binomial_rows("m", 0.5, 400)), ci=True, resamples=2000, seed=1)
    r = out.filter((pl.col("metric") == "ISR") & (pl.col("slice") == "all")).row(0, named=True)
    assert r["value"] == 0.5
    assert r["ci_low"] < 0.5 < r["ci_high"]
    assert abs((r["ci_high"] - r["ci_low"]) - 2 * 1.96 * 0.025) < 0.012


def test_intervals_are_seeded_and_ordered() -> None:
    rows = frame(binomial_rows("a", 0.3, 60) + binomial_rows("b", 0.7, 60))
    one = metrics_of(rows, ci=True, resamples=300, seed=5)
    assert one.equals(metrics_of(rows, ci=True, resamples=300, seed=5))
    assert not one.equals(metrics_of(rows, ci=True, resamples=300, seed=6))
    assert (one["ci_low"] <= one["ci_high"]).all()
    assert one.columns == [
        "benchmark",
        "model",
        "judge",
        "metric",
        "slice",
        "value",
        "n",
        "ci_low",
        "ci_high",
    ]
    constant = one.filter(pl.col("metric") == "coverage")
    assert (constant["ci_low"] == 1.0).all() and (constant["ci_high"] == 1.0).all()


def test_followbench_intervals_cover_every_statistic() -> None:
    rows = []
    for g in range(8):
        for lv in range(1, 6):
            rows.append(
                row(
                    "followbench",
                    "m",
                    f"g{g}-{lv}",
                    0,
                    (g + lv) % 3 != 0,
                    group_id=f"g{g}",
                    level=lv,
                    category="content" if g % 2 else "style",
                )
            )
    out = metrics_of(frame(rows), ci=True, resamples=200)
    assert out["ci_low"].null_count() == 0
    inside = (out["ci_low"] <= out["value"] + 1e-12) & (out["value"] <= out["ci_high"] + 1e-12)
    assert inside.sum() >= out.height - 2


def test_paired_differences() -> None:
    rows = (
        binomial_rows("strong", 0.9, 200) + binomial_rows("weak", 0.5, 200) + binomial_rows("twin", 0.5, 200)
    )
    out = paired_differences(frame(rows), CATALOG, "cfbench", "ISR", resamples=500, seed=3)
    assert out.columns == [
        "benchmark",
        "metric",
        "slice",
        "model_a",
        "model_b",
        "diff",
        "ci_low",
        "ci_high",
        "significant",
        "n",
    ]
    got = {(r["model_a"], r["model_b"]): r for r in out.iter_rows(named=True)}
    assert set(got) == {("strong", "twin"), ("strong", "weak"), ("twin", "weak")}
    assert math.isclose(got[("strong", "weak")]["diff"], 0.4)
    assert got[("strong", "weak")]["significant"] and got[("strong", "weak")]["ci_low"] > 0.3
    # Same answers on the same instances: the paired interval collapses to exactly 0.
    assert got[("twin", "weak")]["diff"] == 0.0
    assert (got[("twin", "weak")]["ci_low"], got[("twin", "weak")]["ci_high"]) == (0.0, 0.0)
    assert not got[("twin", "weak")]["significant"]


def test_paired_uses_only_instances_kept_for_both() -> None:
    a = [row("cfbench", "a", f"i{i}", 0, True) for i in range(10)]
    b = [row("cfbench", "b", f"i{i}", 0, i >= 5) for i in range(10)]
    b[0] = row("cfbench", "b", "i0", 0, None, status="error")  # b lost i0: the pair is scored on i1..i9
    out = paired_differences(frame(a + b), CATALOG, "cfbench", "CSR", resamples=200).row(0, named=True)
    assert out["n"] == 9
    assert math.isclose(out["diff"], 1 - 5 / 9)
    fb = paired_differences(frame(a + b), CATALOG, "cfbench", "CSR", models=["a"], resamples=10)
    assert fb.height == 0


def frame_route(leaves: pl.DataFrame, parents: pl.DataFrame, resamples: int, seed: int) -> pl.DataFrame:
    """Intervals the way they were computed before the bootstrap read codes: from the per-unit frame
    (six strings a row), each (benchmark, unit kind) through `build_structure`, which paired
    differences still use."""
    out = []
    for (bench, kind), part in sorted(leaves.group_by(["benchmark", "unit_kind"]), key=lambda g: str(g[0])):
        units = unit_index(part)
        s = build_structure(part, parents, units)
        rng = rng_for(seed, str(bench), str(kind))
        samples = np.vstack([evaluate(s, w) for w in weight_batches(rng, units.height, resamples)])
        lo, hi = percentile_interval(samples, 0.95)
        out.append(s.keys.with_columns(pl.Series("ci_low", lo), pl.Series("ci_high", hi)))
    got = pl.concat(out) if out else pl.DataFrame(schema=CI_SCHEMA)
    return got.with_columns(pl.col("ci_low", "ci_high").fill_nan(None)).cast(pl.Schema(CI_SCHEMA))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(verdict_rows(), st.integers(0, 2**31))
def test_intervals_from_codes_equal_the_per_unit_frame_route(rows: list[Row], seed: int) -> None:
    """compute_metrics(ci=True) builds its matrices from codes; every bound is bit for bit the one the
    per-unit frame gives, on every benchmark's statistics and coverage."""
    leaves, parents = components_of(frame(rows), CATALOG)
    want = frame_route(leaves, parents, 50, seed).sort(list(STAT_KEY))
    got = metrics_of(frame(rows), ci=True, resamples=50, seed=seed).select(list(CI_SCHEMA))
    assert got.equals(want)


def _two_slices_one_name() -> Components:
    """A plugin-style leaf whose slice ignores the column it is grouped by: a unit's two split values
    land in one statistic, so that statistic has two cells on the unit, which are summed."""
    units = pl.LazyFrame(
        {
            "benchmark": ["b"] * 6,
            "model": ["m", "m", "m", "n", "n", "n"],
            "instance_id": ["i1", "i1", "i2", "i1", "i2", "i3"],
            "split": ["x", "y", "x", "x", "y", "y"],
            "v": [0.25, 0.5, 1.0, 0.125, 0.75, 0.375],
        }
    )
    leaf = Leaf(units, "M", pl.lit("all"), ("split",), "instance", "instance_id", pl.col("v"))
    by_split = Leaf(
        units, "M", pl.format("split={}", "split"), ("split",), "instance", "instance_id", pl.col("v")
    )
    return Components((leaf, by_split))


def test_cells_a_slice_names_twice_are_summed_as_in_the_frame() -> None:
    c = _two_slices_one_name()
    parents = pl.DataFrame(schema=PARENT_SCHEMA)
    got = bootstrap_intervals(c.unit_cells(), parents, resamples=200, seed=4).sort(list(STAT_KEY))
    want = frame_route(c.per_unit().collect(), parents, 200, 4).sort(list(STAT_KEY))
    assert got.height == 6 and got.equals(want)


@pytest.mark.parametrize("rows_per_part", [ROWS_PER_PART, 7])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=verdict_rows())
def test_unit_cells_decode_to_the_per_unit_rows(rows: list[Row], rows_per_part: int) -> None:
    """Each cell's codes name the statistic and unit of a per-unit row, with its num and den, for every
    leaf family of every benchmark and coverage; units made of rows (InFoBench's per type) summed in
    one part or in parts of 7 rows."""
    c = all_components(validated(frame(rows), CATALOG)[0], CATALOG)
    for leaf in c.leaves:
        cells = leaf.unit_cells(rows_per_part)
        decoded = (
            cells.cells.join(cells.stats, on="s")
            .join(cells.units.drop("benchmark"), on="c")
            .select(*STAT_KEY, pl.lit(cells.unit_kind).alias("unit_kind"), "unit", "num", "den")
            .sort(list(LEAF_SCHEMA))
        )
        want = leaf.per_unit().collect().cast(pl.Schema(LEAF_SCHEMA)).sort(list(LEAF_SCHEMA))
        assert decoded.equals(want)
