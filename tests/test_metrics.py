"""Metric definitions against a slow, obvious pure-Python reference, plus hand-computed cases."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ifsweep import metrics
from ifsweep.metrics import VERDICT_SCHEMA, Catalog
from ifsweep.runner.commands.rundir import metric_catalog

Row = dict[str, Any]
Key = tuple[str, str, str, str]

# Every registered benchmark's definitions, as the runner hands them to the engine.
CATALOG: Catalog = metric_catalog()[0]


def metrics_of(rows: pl.DataFrame | pl.LazyFrame, **kw: Any) -> pl.DataFrame:
    """compute_metrics over the registry's catalog."""
    return metrics.compute_metrics(rows, CATALOG, **kw)


def row(benchmark: str, model: str, instance_id: str, idx: int, satisfied: bool | None, **kw: Any) -> Row:
    base: Row = {c: None for c in VERDICT_SCHEMA}
    base.update(
        run="r",
        benchmark=benchmark,
        model=model,
        judge="j",
        instance_id=instance_id,
        group_id=instance_id,
        constraint_idx=idx,
        satisfied=satisfied,
        source="judge",
        status="ok",
    )
    base.update(kw)
    if base["status"] != "ok":
        base["satisfied"] = None
    return base


def frame(rows: list[Row]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=VERDICT_SCHEMA)


def as_dict(df: pl.DataFrame) -> dict[Key, tuple[float, int]]:
    return {
        (r["benchmark"], r["model"], r["metric"], r["slice"]): (r["value"], r["n"])
        for r in df.iter_rows(named=True)
    }


# ---------------------------------------------------------------- slow reference (one loop per definition)


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def reference(rows: list[Row]) -> dict[Key, tuple[float, int]]:
    inst: dict[tuple[str, str, str], list[Row]] = defaultdict(list)
    for r in rows:
        inst[(r["benchmark"], r["model"], r["instance_id"])].append(r)
    out: dict[Key, tuple[float, int]] = {}
    seen: dict[tuple[str, str], list[bool]] = defaultdict(list)
    kept: dict[tuple[str, str], list[list[Row]]] = defaultdict(list)
    for (b, m, _), rs in inst.items():
        ok = all(r["status"] == "ok" for r in rs)
        seen[(b, m)].append(ok)
        if ok:
            kept[(b, m)].append(rs)
    for (b, m), oks in seen.items():
        out[(b, m, "coverage", "all")] = (sum(oks) / len(oks), len(oks))
    for (b, m), instances in kept.items():
        if b == "followbench":
            out.update(
                ref_followbench(m, instances, [rs for (bb, mm, _), rs in inst.items() if (bb, mm) == (b, m)])
            )
        elif b == "infobench":
            out.update(ref_infobench(m, instances))
        elif b == "cfbench":
            out.update(ref_cfbench(m, instances))
        else:
            out.update(ref_eifbench(m, instances))
    return out


def ref_followbench(m: str, kept: list[list[Row]], seen: list[list[Row]]) -> dict[Key, tuple[float, int]]:
    out: dict[Key, tuple[float, int]] = {}
    cells: dict[tuple[str, int], list[list[Row]]] = defaultdict(list)
    for rs in kept:
        cells[(rs[0]["category"], rs[0]["level"])].append(rs)
    fns: tuple[tuple[str, Callable[[list[Row]], float]], ...] = (
        ("HSR", lambda rs: float(all(r["satisfied"] for r in rs))),
        ("SSR", lambda rs: mean([float(r["satisfied"]) for r in rs])),
    )
    for metric, f in fns:
        by_level: dict[int, list[float]] = defaultdict(list)
        for (c, lv), group in cells.items():
            v = mean([f(rs) for rs in group])
            out[("followbench", m, metric, f"category={c},level={lv}")] = (v, len(group))
            by_level[lv].append(v)
        level_vals = []
        for lv, vals in by_level.items():
            out[("followbench", m, metric, f"level={lv}")] = (mean(vals), len(vals))
            level_vals.append(mean(vals))
        out[("followbench", m, metric, "all")] = (mean(level_vals), len(level_vals))
    groups: dict[tuple[str, str], list[list[Row]]] = defaultdict(list)
    for rs in seen:
        if rs[0]["level"] in (1, 2, 3, 4, 5):
            groups[(rs[0]["category"], rs[0]["group_id"])].append(rs)
    per_cat: dict[str, list[float]] = defaultdict(list)
    for (c, _), group in groups.items():
        if {rs[0]["level"] for rs in group} != {1, 2, 3, 4, 5}:
            continue
        if not all(r["status"] == "ok" for rs in group for r in rs):
            continue
        csl = 0
        for lv in (1, 2, 3, 4, 5):
            if all(r["satisfied"] for rs in group if rs[0]["level"] == lv for r in rs):
                csl = lv
            else:
                break
        per_cat[c].append(float(csl))
    for c, vals in per_cat.items():
        out[("followbench", m, "CSL", f"category={c}")] = (mean(vals), len(vals))
    if per_cat:
        cat_vals = [mean(v) for v in per_cat.values()]
        out[("followbench", m, "CSL", "all")] = (mean(cat_vals), len(cat_vals))
    return out


def ref_infobench(m: str, kept: list[list[Row]]) -> dict[Key, tuple[float, int]]:
    buckets: dict[str, list[bool]] = defaultdict(list)
    for rs in kept:
        for r in rs:
            buckets["all"].append(r["satisfied"])
            if rs[0]["split"] is not None:
                buckets[f"split={rs[0]['split']}"].append(r["satisfied"])
            if r["constraint_type"] is not None:
                for label in {x.strip() for x in r["constraint_type"].split("|")} - {""}:
                    buckets[f"constraint_type={label}"].append(r["satisfied"])
    return {("infobench", m, "DRFR", s): (sum(v) / len(v), len(v)) for s, v in buckets.items()}


def ref_psr(rs: list[Row]) -> float:
    primary = [r["satisfied"] for r in rs if r["priority"] == "primary"]
    secondary = [r["satisfied"] for r in rs if r["priority"] == "secondary"]
    csr = mean([float(r["satisfied"]) for r in rs])
    if not all(primary):
        return 0.0
    if not secondary:
        return 1.0
    if not primary:
        return float(csr > 0.8)
    return float(0.5 + 0.5 * mean([float(s) for s in secondary]) > 0.8)


def per_instance_means(
    bench: str, m: str, kept: list[list[Row]], fns: dict[str, Any]
) -> dict[Key, tuple[float, int]]:
    out: dict[Key, tuple[float, int]] = {}
    for metric, f in fns.items():
        buckets: dict[str, list[float]] = defaultdict(list)
        for rs in kept:
            buckets["all"].append(f(rs))
            if rs[0]["split"] is not None:
                buckets[f"split={rs[0]['split']}"].append(f(rs))
        out.update({(bench, m, metric, s): (mean(v), len(v)) for s, v in buckets.items()})
    return out


def ref_cfbench(m: str, kept: list[list[Row]]) -> dict[Key, tuple[float, int]]:
    return per_instance_means(
        "cfbench",
        m,
        kept,
        {
            "CSR": lambda rs: mean([float(r["satisfied"]) for r in rs]),
            "ISR": lambda rs: float(all(r["satisfied"] for r in rs)),
            "PSR": ref_psr,
        },
    )


def ref_ilacc(rs: list[Row]) -> float:
    subs: dict[Any, list[bool]] = defaultdict(list)
    for r in rs:
        subs[r["instruction_idx"]].append(r["satisfied"])
    return mean([float(all(v)) for v in subs.values()])


def ref_eifbench(m: str, kept: list[list[Row]]) -> dict[Key, tuple[float, int]]:
    return per_instance_means(
        "eifbench",
        m,
        kept,
        {
            "GAcc": lambda rs: float(all(r["satisfied"] for r in rs)),
            "ILAcc": ref_ilacc,
            "CLAcc": lambda rs: mean([float(r["satisfied"]) for r in rs]),
        },
    )


# ---------------------------------------------------------------- random rows

# The benchmarks `reference` above re-implements, one loop per definition.
BENCHES = ("followbench", "infobench", "cfbench", "eifbench")


@st.composite
def verdict_rows(draw: st.DrawFn) -> list[Row]:
    rows: list[Row] = []
    for model in ("m<1>", "m&2"):
        for bench in draw(st.sets(st.sampled_from(BENCHES), min_size=1)):
            for k in draw(st.sets(st.integers(0, 24), min_size=1, max_size=14)):
                group = k // 5
                meta = {
                    "level": draw(st.integers(1, 5))
                    if bench != "followbench" or draw(st.booleans())
                    else k % 5 + 1,
                    "category": f"c{group % 2}",
                    "group_id": f"g{group}",
                    "split": draw(st.sampled_from(["easy", "hard", None])),
                }
                broken = draw(st.integers(0, 9)) == 0
                for idx in range(draw(st.integers(1, 5))):
                    status = draw(st.sampled_from(["unparsed", "error"])) if broken and idx == 0 else "ok"
                    rows.append(
                        row(
                            bench,
                            model,
                            f"{bench}-{k}",
                            idx,
                            draw(st.booleans()),
                            status=status,
                            constraint_type=draw(
                                st.sampled_from(["fmt", "len", "fmt|len", "len | tone", None])
                            ),
                            priority=draw(st.sampled_from(["primary", "secondary", None])),
                            instruction_idx=draw(st.sampled_from([0, 1, 2, None])),
                            **meta,
                        )
                    )
    return rows


def assert_matches(got: dict[Key, tuple[float, int]], want: dict[Key, tuple[float, int]]) -> None:
    assert set(got) == set(want)
    for k, (v, n) in want.items():
        assert got[k][1] == n, k
        assert math.isclose(got[k][0], v, rel_tol=0, abs_tol=1e-9), (k, got[k], v)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(verdict_rows())
def test_every_definition_matches_the_reference(rows: list[Row]) -> None:
    assert_matches(as_dict(metrics_of(frame(rows))), reference(rows))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(verdict_rows())
def test_per_benchmark_functions_agree_with_compute_metrics(rows: list[Row]) -> None:
    df = frame(rows)
    whole = metrics_of(df).filter(pl.col("metric") != "coverage")
    parts = pl.concat([metrics.benchmark_metrics(df, b) for b in CATALOG.benchmarks]).sort(
        ["benchmark", "model", "judge", "metric", "slice"]
    )
    assert parts.equals(whole)
    assert metrics.coverage_metrics(df).equals(metrics_of(df).filter(pl.col("metric") == "coverage"))


# ---------------------------------------------------------------- hand-computed cases


def test_followbench_hand_computed() -> None:
    rows = []
    # Group g1 (content): levels 1-3 pass, level 4 fails one of four -> CSL 3.
    # Group g2 (content): level 1 fails -> CSL 0. Group g3 (style) has no level 5 -> not in CSL.
    for g, fail_at in (("g1", 4), ("g2", 1)):
        for lv in range(1, 6):
            for c in range(lv):
                rows.append(
                    row(
                        "followbench",
                        "m",
                        f"{g}-{lv}",
                        c,
                        not (lv == fail_at and c == 0),
                        group_id=g,
                        level=lv,
                        category="content",
                    )
                )
    for lv in range(1, 5):
        rows.append(
            row("followbench", "m", f"g3-{lv}", 0, lv != 2, group_id="g3", level=lv, category="style")
        )
    got = as_dict(metrics_of(frame(rows)))
    assert got[("followbench", "m", "CSL", "category=content")] == (1.5, 2)
    assert got[("followbench", "m", "CSL", "all")] == (1.5, 1)
    assert ("followbench", "m", "CSL", "category=style") not in got
    # level 1: content cell = 1/2 (g2 fails), style cell = 1 -> level value 0.75 over 2 categories.
    assert got[("followbench", "m", "HSR", "category=content,level=1")] == (0.5, 2)
    assert got[("followbench", "m", "HSR", "level=1")] == (0.75, 2)
    assert got[("followbench", "m", "HSR", "level=2")] == (0.5, 2)  # content 1, style 0
    # level 4: content g1 fails (3/4 SSR), g2 passes; style passes.
    assert got[("followbench", "m", "SSR", "category=content,level=4")] == ((0.75 + 1) / 2, 2)
    assert got[("followbench", "m", "HSR", "level=5")] == (1.0, 1)
    hsr_levels = [0.75, 0.5, 1.0, (0.5 + 1) / 2, 1.0]
    assert got[("followbench", "m", "HSR", "all")][1] == 5
    assert math.isclose(got[("followbench", "m", "HSR", "all")][0], sum(hsr_levels) / 5)


def test_cfbench_psr_branches() -> None:
    cases: dict[str, Sequence[tuple[str | None, bool]]] = {
        "primary-fails": [("primary", False), ("secondary", True)],  # 0
        "no-secondary": [("primary", True), (None, False)],  # 1
        "no-primary-high": [("secondary", True)] * 5,  # CSR 1 > 0.8 -> 1
        "no-primary-low": [("secondary", True)] * 4 + [("secondary", False)],  # CSR 0.8, not > 0.8 -> 0
        "both-high": [
            ("primary", True),
            ("secondary", True),
            ("secondary", True),
            ("secondary", False),
        ],  # 0.5+1/3 -> 1
        "both-low": [("primary", True), ("secondary", True), ("secondary", False)],  # 0.75 -> 0
    }
    expected = {
        "primary-fails": 0,
        "no-secondary": 1,
        "no-primary-high": 1,
        "no-primary-low": 0,
        "both-high": 1,
        "both-low": 0,
    }
    for name, items in cases.items():
        rows = [row("cfbench", "m", name, i, s, priority=p, split="hard") for i, (p, s) in enumerate(items)]
        got = as_dict(metrics_of(frame(rows)))
        assert got[("cfbench", "m", "PSR", "all")] == (expected[name], 1), name
        assert got[("cfbench", "m", "PSR", "split=hard")] == (expected[name], 1), name


def test_infobench_micro_average_and_labels() -> None:
    rows = [
        row("infobench", "m", "a", 0, True, constraint_type="Format|Content", split="easy"),
        row("infobench", "m", "a", 1, False, constraint_type="Content", split="easy"),
        row("infobench", "m", "b", 0, True, constraint_type="Style", split="hard"),
        row("infobench", "m", "b", 1, True, constraint_type=None, split="hard"),
        row("infobench", "m", "b", 2, True, constraint_type="Style", split="hard"),
        # One unparsed verdict drops instance c entirely (coverage 2/3).
        row("infobench", "m", "c", 0, True, split="hard"),
        row("infobench", "m", "c", 1, None, status="unparsed", split="hard"),
    ]
    got = as_dict(metrics_of(frame(rows)))
    assert got[("infobench", "m", "DRFR", "all")] == (4 / 5, 5)  # micro: rows, not instance means
    assert got[("infobench", "m", "DRFR", "split=easy")] == (0.5, 2)
    assert got[("infobench", "m", "DRFR", "split=hard")] == (1.0, 3)
    assert got[("infobench", "m", "DRFR", "constraint_type=Content")] == (0.5, 2)
    assert got[("infobench", "m", "DRFR", "constraint_type=Format")] == (1.0, 1)
    assert got[("infobench", "m", "DRFR", "constraint_type=Style")] == (1.0, 2)
    assert got[("infobench", "m", "coverage", "all")] == (2 / 3, 3)


def test_eifbench_levels() -> None:
    rows = [
        row("eifbench", "m", "t1", 0, True, instruction_idx=0, split="party"),
        row("eifbench", "m", "t1", 1, False, instruction_idx=0, split="party"),
        row("eifbench", "m", "t1", 2, True, instruction_idx=1, split="party"),
        row("eifbench", "m", "t2", 0, True, instruction_idx=0, split="work"),
    ]
    got = as_dict(metrics_of(frame(rows)))
    assert got[("eifbench", "m", "GAcc", "all")] == (0.5, 2)
    assert got[("eifbench", "m", "ILAcc", "all")] == ((0.5 + 1) / 2, 2)
    assert math.isclose(got[("eifbench", "m", "CLAcc", "all")][0], (2 / 3 + 1) / 2)
    assert got[("eifbench", "m", "GAcc", "split=party")] == (0.0, 1)
    assert got[("eifbench", "m", "CLAcc", "split=work")] == (1.0, 1)


def test_output_is_sorted_and_typed() -> None:
    rows = [row(b, m, "i", 0, True, level=1, category="c") for b in BENCHES for m in ("z", "a")]
    out = metrics_of(frame(rows))
    assert out.columns == ["benchmark", "model", "judge", "metric", "slice", "value", "n"]
    assert out.dtypes == [pl.String, pl.String, pl.String, pl.String, pl.String, pl.Float64, pl.Int64]
    assert out.equals(out.sort(["benchmark", "model", "judge", "metric", "slice"]))
    assert metrics_of(frame(rows).reverse().lazy()).equals(out)


def test_bad_rows_are_named() -> None:
    bad = [row("cfbench", "m", "i7", 3, True, status="okay")]
    with pytest.raises(metrics.VerdictError, match=r"instance_id='i7'.*field 'status': 'okay'"):
        metrics_of(frame(bad))
    with pytest.raises(metrics.VerdictError, match="field 'level'"):
        metrics_of(frame([row("followbench", "m", "i", 0, True, category="c")]))
    with pytest.raises(metrics.VerdictError, match="field 'satisfied'"):
        metrics_of(frame([{**row("cfbench", "m", "i", 0, True), "satisfied": None}]))


def test_read_verdicts_jsonl_and_parquet(tmp_path: Path) -> None:
    rows = [row("cfbench", "m", f"i{i}", 0, i % 2 == 0, split="easy", priority="primary") for i in range(6)]
    df = frame(rows)
    df[:3].write_ndjson(tmp_path / "a.jsonl")
    df[3:].with_columns(pl.col("model").cast(pl.Categorical)).write_parquet(tmp_path / "b.parquet")
    lf = metrics.read_verdicts([tmp_path / "a.jsonl", tmp_path / "b.parquet"])
    assert lf.collect_schema() == pl.Schema(VERDICT_SCHEMA)
    assert lf.collect().equals(df)
    assert metrics_of(lf).equals(metrics_of(df))
    metrics.validate_verdicts([tmp_path / "a.jsonl", tmp_path / "b.parquet"], CATALOG)
    some = metrics.read_verdicts(
        [tmp_path / "a.jsonl", tmp_path / "b.parquet"], columns=metrics.METRIC_COLUMNS
    )
    assert some.collect_schema().names() == list(metrics.METRIC_COLUMNS)
    assert metrics_of(some).equals(metrics_of(df))
    with pytest.raises(metrics.VerdictError, match="field 'colour'"):
        metrics.read_verdicts(tmp_path / "a.jsonl", columns=["colour"])


def test_validate_names_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "v.jsonl"
    rows = [row("cfbench", "m", f"i{i}", 0, True) for i in range(3)]
    rows[2]["source"] = "oracle"
    frame(rows).write_ndjson(path)
    with pytest.raises(metrics.VerdictError, match=r"v\.jsonl: line 3 .*field 'source'"):
        metrics.validate_verdicts(path, CATALOG)
    with pytest.raises(metrics.VerdictError, match="no such verdict file"):
        metrics.read_verdicts(tmp_path / "missing.jsonl")
    (tmp_path / "x.csv").write_text("a\n")
    with pytest.raises(metrics.VerdictError, match="unknown verdict file type"):
        metrics.read_verdicts(tmp_path / "x.csv")
    frame(rows).drop("status").write_parquet(tmp_path / "p.parquet")
    with pytest.raises(metrics.VerdictError, match=r"p\.parquet: field 'status'"):
        metrics.read_verdicts(tmp_path / "p.parquet")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(verdict_rows())
def test_bit_for_bit_deterministic_under_row_order(rows: list[Row]) -> None:
    df = frame(rows)
    want = metrics_of(df)
    for seed in range(3):
        assert metrics_of(df.sample(fraction=1.0, shuffle=True, seed=seed)).equals(want)
