"""The shortcuts metrics takes for speed keep results exact: ordered float sums (plain ones only where
no order can change them), categorical keys, per-type sums expanded to InFoBench labels, and errors on
bad rows."""

from __future__ import annotations

import math
import random
from pathlib import Path

import polars as pl
import pytest
from test_metrics import CATALOG, Row, as_dict, frame, metrics_of, row

from ifsweep import metrics
from ifsweep.metrics import VERDICT_SCHEMA
from ifsweep.metrics.components import Components, Leaf, point_estimates
from ifsweep.metrics.compute import components_of


def fractional_rows(instances: int, seed: int = 0) -> list[Row]:
    """CFBench and EIFBench instances with 1-9 constraints each: their per-instance CSR / CLAcc / ILAcc
    are fractions like 1/3 and 5/7, whose float sum depends on the order of additions."""
    rnd = random.Random(seed)
    rows: list[Row] = []
    for i in range(instances):
        for bench in ("cfbench", "eifbench"):
            for c in range(rnd.randint(1, 9)):
                rows.append(
                    row(
                        bench,
                        f"m{i % 3}",
                        f"i{i}",
                        c,
                        rnd.random() < 0.6,
                        split=("easy", "hard")[i % 2],
                        priority=("primary", "secondary")[c % 2],
                        instruction_idx=c // 2,
                    )
                )
    return rows


def test_float_sums_are_bit_for_bit_the_same_under_any_row_order() -> None:
    # Large enough that a plain group-by sum over shuffled rows differs in the last bits (checked by
    # replacing ordered_sum with a plain sum: this test then fails).
    df = frame(fractional_rows(6000))
    want = metrics_of(df)
    assert want.filter(pl.col("metric") == "CSR").height > 0
    for seed in range(3):
        assert metrics_of(df.sample(fraction=1.0, shuffle=True, seed=seed)).equals(want)
    parts = pl.concat(
        [*(metrics.benchmark_metrics(df, b) for b in CATALOG.benchmarks if b.name in ("cfbench", "eifbench"))]
    )
    assert parts.sort(["benchmark", "model", "judge", "metric", "slice"]).equals(
        want.filter(pl.col("metric") != "coverage")
    )


def test_float_sums_match_exact_fractions() -> None:
    rows = fractional_rows(900, seed=4)
    got = as_dict(metrics_of(frame(rows)))
    per: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        if r["benchmark"] == "cfbench":
            per.setdefault((r["model"], r["instance_id"]), []).append(float(r["satisfied"]))
    for model in ("m0", "m1", "m2"):
        csr = [math.fsum(v) / len(v) for (m, _), v in per.items() if m == model]
        value, n = got[("cfbench", model, "CSR", "all")]
        assert n == len(csr) == 300
        assert math.isclose(value, math.fsum(csr) / len(csr), rel_tol=0, abs_tol=1e-12)


BIG = 2.0**53  # from here on a float no longer holds every whole number


@pytest.mark.parametrize(
    ("values", "want"),
    [
        # In this order plain float additions give 2^53 (2^53 + 1 rounds to even); ascending, 2^53 + 2.
        ((BIG, 1.0, 1.0), (BIG + 2) / 3),
        # Whole numbers summing to 1, but 2^53 + 1 on the way: not a plain sum, for a negative value.
        ((BIG, 1.0, -BIG), 1 / 3),
        # No unit with a value: no value (a plain sum would say 0).
        ((None, None), None),
    ],
)
def test_sums_a_plain_float_sum_could_get_wrong_are_summed_in_order(
    values: tuple[float | None, ...], want: float | None
) -> None:
    """Sums of whole numbers stream as plain sums (`components._ordered_sums`), which only stays exact
    below 2^53, with no negative value and no null: anything else is summed in ascending order."""
    units = pl.LazyFrame(
        {"benchmark": "b", "model": "m", "instance_id": [str(i) for i in range(len(values))], "x": values},
        schema_overrides={"x": pl.Float64},
    )
    leaf = Leaf(units, "X", pl.lit("all"), (), "instance", "instance_id", pl.col("x"))
    got = point_estimates(Components((leaf,)))
    assert got.select("value", "n").rows() == [(want, len(values))]


def test_categorical_and_enum_inputs_give_the_same_metrics(tmp_path: Path) -> None:
    rows = [
        *fractional_rows(200, seed=2),
        row("infobench", "m0", "q1", 0, True, constraint_type="Format | Style", split="easy"),
        row("infobench", "m0", "q1", 1, False, constraint_type="Style", split="easy"),
        row("followbench", "m1", "f1", 0, True, group_id="g", level=1, category="c"),
    ]
    plain = frame(rows)
    want = metrics_of(plain)
    typed = plain.with_columns(
        pl.col("model", "instance_id", "status", "constraint_type").cast(pl.Categorical),
        pl.col("benchmark").cast(pl.Enum(CATALOG.names())),
    )
    assert metrics_of(typed).equals(want)
    typed.write_parquet(tmp_path / "typed.parquet")
    assert metrics_of(metrics.read_verdicts(tmp_path / "typed.parquet")).equals(want)
    assert want.schema == pl.Schema(
        {
            "benchmark": pl.String,
            "model": pl.String,
            "judge": pl.String,
            "metric": pl.String,
            "slice": pl.String,
        }
        | {"value": pl.Float64, "n": pl.Int64}
    )


def test_infobench_labels_count_once_per_row_in_sums_and_in_units() -> None:
    rows = [
        row("infobench", "m", "a", 0, True, constraint_type="Format|Style", split="s"),
        row("infobench", "m", "a", 1, False, constraint_type=" Style |Style", split="s"),
        row("infobench", "m", "a", 2, True, constraint_type="Content", split="s"),
        row("infobench", "m", "b", 0, False, constraint_type="Format", split="s"),
        row("infobench", "m", "b", 1, True, constraint_type="|", split="s"),
        row("infobench", "m", "c", 0, True, constraint_type="Format", status="error", split="s"),
    ]
    got = as_dict(metrics_of(frame(rows)))
    assert got[("infobench", "m", "DRFR", "constraint_type=Style")] == (0.5, 2)
    assert got[("infobench", "m", "DRFR", "constraint_type=Format")] == (0.5, 2)
    assert got[("infobench", "m", "DRFR", "constraint_type=Content")] == (1.0, 1)
    assert got[("infobench", "m", "DRFR", "all")] == (0.6, 5)
    assert ("infobench", "m", "DRFR", "constraint_type=") not in got
    leaves, _ = components_of(frame(rows), CATALOG)
    style = leaves.filter(pl.col("slice") == "constraint_type=Style").sort("unit")
    # Unit a has two Style rows (one per type string): one leaf row for (statistic, unit), summed.
    assert style.select("unit", "num", "den").rows() == [("a", 1.0, 2.0)]
    fmt = leaves.filter(pl.col("slice") == "constraint_type=Format").sort("unit")
    assert fmt.select("unit", "num", "den").rows() == [("a", 1.0, 1.0), ("b", 0.0, 1.0)]


def test_bad_rows_are_still_named_with_categorical_keys() -> None:
    rows = fractional_rows(50)
    rows[17] = {**rows[17], "source": "oracle"}
    with pytest.raises(metrics.VerdictError, match=r"row 17 .*instance_id='i\d+'.*field 'source': 'oracle'"):
        metrics_of(frame(rows))
    rows = fractional_rows(50)
    rows[5] = {**rows[5], "instance_id": None}
    with pytest.raises(metrics.VerdictError, match=r"row 5 .*field 'instance_id': missing"):
        metrics_of(pl.DataFrame(rows, schema=VERDICT_SCHEMA))
