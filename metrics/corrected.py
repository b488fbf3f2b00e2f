"""Leaderboards corrected for judge error with a gold sample (docs/metrics.md, "Corrected scores").

Any headline metric is a tree (metrics/components.py): leaf statistics sum(num) / sum(den) over their
units, parents the unweighted means of their children. Unfolding the tree, a model's "all" value is

    theta = sum over units i of  w_c(i) * num_i / D_c(i)

with w_c the weight of unit i's leaf statistic c in "all" (1 for a leaf that is "all"; a parent's
weight shared equally by its children) and D_c that statistic's sum of den over every unit. So
`headline_units` turns any metric, whatever its benchmark, into per-unit numerators x_i = w num / D and
denominators m_i = w den / D with theta = sum(x) / sum(m) (sum(m) = 1): the input of PPI++ for a ratio
(`metrics.audit.ppi_ratio`, which linearises per unit, so the constraints of one instance are never
taken as independent). InFoBench's DRFR is one leaf (x: satisfied rows, m: rows); CFBench's CSR a
mean of per-instance values (m: 1 each); FollowBench's HSR a mean over levels of means over
categories. The gold value of a unit is the same function of its rows with each judge verdict
replaced by its gold label; a unit is gold only when every judge row of it is labelled (a judge row
without gold is given status "error", so the metric's own rule for dropping an instance drops it).

`ppi`: per model, from that model's own gold units L among its judged units J (units decided by rules
alone, R, carry no judge error and are added as they are): theta = sum_R x + sum_J m * PPI++(L, J - L).
Refused without gold, under MIN_GOLD gold units (warned under WARN_GOLD), when the gold is not a
random sample, and for a metric whose den depends on the labels.

`rg`: Rogan-Gladen from the judge's sensitivity and specificity on the gold of every model of the
benchmark (pooled). It corrects a rate of constraints, so only a metric linear in the verdicts:
theta = B + C * q with q = sum(x - x0) / sum(x1 - x0) the weighted yes-rate of the judge (x1, x0: each
unit's value with every judge verdict yes, no; B = sum x0, C = sum(x1 - x0)), and then
theta_RG = B + C * RG(q). Linearity is checked on every unit (x(v) + x(not v) = x1 + x0, exactly so for
an affine function of the verdicts); HSR, ISR, PSR, GAcc and CSL fail it and are left uncorrected with
the reason. Flagged when Se or Sp does not hold across the models with gold (`homogeneous`); refused
when Youden's J <= MIN_YOUDEN.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from ifsweep.metrics.agreement import competition_ranks, kendall_tau_b
from ifsweep.metrics.audit import (
    GOLD_UNIT,
    Rate,
    Refused,
    homogeneous,
    ppi_ratio,
    ratio_rate,
    rogan_gladen,
)
from ifsweep.metrics.catalog import BenchmarkMetrics, Catalog
from ifsweep.metrics.instances import prepared

__all__ = [
    "CORRECTED_COLUMNS",
    "MIN_GOLD",
    "WARN_GOLD",
    "BenchCorrection",
    "Corrected",
    "Corrections",
    "corrected_scores",
    "corrections_frame",
    "headline_units",
]

MIN_GOLD = 30
WARN_GOLD = 100
CORRECTED_COLUMNS = (
    "value_ppi",
    "ci_low_ppi",
    "ci_high_ppi",
    "lambda",
    "n_gold",
    "value_rg",
    "ci_low_rg",
    "ci_high_rg",
    "correction_note",
)
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class Corrected:
    """One model's corrected headline metric on one benchmark (slice "all"). A method's value is None
    when it was not asked for or was refused; `ppi_note` / `rg_note` say why (or warn)."""

    benchmark: str
    model: str
    metric: str
    value: float | None  # the uncorrected value, from the same units
    value_ppi: float | None = None
    ci_low_ppi: float | None = None
    ci_high_ppi: float | None = None
    lam: float | None = None
    n_gold: int = 0
    ppi_note: str = ""
    value_rg: float | None = None
    ci_low_rg: float | None = None
    ci_high_rg: float | None = None
    rg_note: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "model": self.model,
            "metric": self.metric,
            "value": self.value,
            "value_ppi": self.value_ppi,
            "ci_low_ppi": self.ci_low_ppi,
            "ci_high_ppi": self.ci_high_ppi,
            "lambda": self.lam,
            "n_gold": self.n_gold,
            "ppi_note": self.ppi_note or None,
            "value_rg": self.value_rg,
            "ci_low_rg": self.ci_low_rg,
            "ci_high_rg": self.ci_high_rg,
            "rg_note": self.rg_note or None,
        }


@dataclass(frozen=True, slots=True)
class BenchCorrection:
    """Per benchmark: the judge's pooled sensitivity and specificity on gold (RG), whether they hold
    across the models with gold, and how the ranking by the primary metric moves under each method:
    Kendall's tau-b against the uncorrected ranking (None under two models) and the largest change."""

    benchmark: str
    metric: str
    sensitivity: float | None = None
    specificity: float | None = None
    models_with_gold: int = 0
    homogeneous: bool | None = None
    tau_ppi: float | None = None
    max_change_ppi: int = 0
    tau_rg: float | None = None
    max_change_rg: int = 0
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "metric": self.metric,
            "sensitivity": self.sensitivity,
            "specificity": self.specificity,
            "models_with_gold": self.models_with_gold,
            "se_sp_hold_across_models": self.homogeneous,
            "kendall_tau_b_ppi": self.tau_ppi,
            "max_rank_change_ppi": self.max_change_ppi,
            "kendall_tau_b_rg": self.tau_rg,
            "max_rank_change_rg": self.max_change_rg,
            "note": self.note or None,
        }


@dataclass(frozen=True, slots=True)
class Corrections:
    """Every corrected headline metric of a report (`method`: "ppi" or "rg") and each benchmark's
    summary."""

    method: str
    judge: str | None
    scores: tuple[Corrected, ...] = ()
    benchmarks: tuple[BenchCorrection, ...] = field(default=())

    def as_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "judge": self.judge,
            "scores": [c.as_json() for c in self.scores],
            "benchmarks": [b.as_json() for b in self.benchmarks],
        }

    def of(self, benchmark: str) -> list[Corrected]:
        return [c for c in self.scores if c.benchmark == benchmark]

    def summary(self, benchmark: str) -> BenchCorrection | None:
        return next((b for b in self.benchmarks if b.benchmark == benchmark), None)


# ------------------------------------------------------------------------------------ per-unit values


def _leaf_weights(edges: pl.DataFrame) -> dict[tuple[str, str], float]:
    """(model, slice) -> weight in the model's "all", down the parent edges of one metric: "all" has
    1, a parent's weight is shared equally by its children; a slice never reached weighs nothing."""
    weights: dict[tuple[str, str], float] = {}
    models = set(edges.get_column("model").to_list()) if edges.height else set()
    reached = {(m, "all"): 1.0 for m in models}
    for layer in sorted(set(edges.get_column("layer").to_list()), reverse=True):
        part = edges.filter(pl.col("layer") == layer)
        kids: dict[tuple[str, str], list[str]] = {}
        for m, s, c in part.select("model", "slice", "child").iter_rows():
            kids.setdefault((str(m), str(s)), []).append(str(c))
        for (m, s), children in kids.items():
            w = reached.pop((m, s), 0.0)
            for c in children:
                reached[(m, c)] = reached.get((m, c), 0.0) + w / len(children)
    weights.update(reached)
    return weights


def headline_units(rows: pl.LazyFrame, bench: BenchmarkMetrics, metrics: Sequence[str]) -> pl.DataFrame:
    """Each of `metrics`' "all" value of each model of `bench` as per-unit sums (module docstring): one
    row per (metric, model, unit) with the unit's num and den and its factor f = w / D, so a model's
    value is sum(f num) / sum(f den) (sum(f den) = 1). `rows`: verdict rows (`prepared`)."""
    c = bench.components(rows)
    per, edges = pl.collect_all(
        [
            c.per_unit().filter(pl.col("metric").is_in(list(metrics))),
            c.parent_edges().filter(pl.col("metric").is_in(list(metrics))),
        ]
    )
    parts = []
    for metric in metrics:
        mine = per.filter(pl.col("metric") == metric)
        tree = edges.filter(pl.col("metric") == metric)
        weights = _leaf_weights(tree)
        if not tree.height:  # the metric's "all" is a leaf of its own
            weights = {(str(m), "all"): 1.0 for m in mine.get_column("model").unique().to_list()}
        w = pl.DataFrame(
            [(m, s, v) for (m, s), v in weights.items() if v > 0],
            schema={"model": pl.String, "slice": pl.String, "w": pl.Float64},
            orient="row",
        )
        total = pl.col("den").sum().over("model", "slice")
        parts.append(
            mine.join(w, on=["model", "slice"], how="inner").select(
                "metric",
                "model",
                (pl.col("unit_kind") + ":" + pl.col("unit")).alias("unit"),
                "num",
                "den",
                (pl.col("w") / total).alias("f"),
            )
        )
    schema: dict[str, Any] = {"metric": pl.String, "model": pl.String, "unit": pl.String}
    schema |= {"num": pl.Float64, "den": pl.Float64, "f": pl.Float64}
    return pl.concat([pl.DataFrame(schema=schema), *parts]).sort("metric", "model", "unit")


def _labelled(rows: pl.LazyFrame, gold: pl.DataFrame) -> pl.LazyFrame:
    """`rows` with each judge verdict replaced by its gold label, and status "error" on a judge row
    without one (its unit is then no gold unit)."""
    labels = gold.lazy().select(
        *(pl.col(c).cast(rows.collect_schema()[c]) for c in GOLD_UNIT),
        pl.col("gold").cast(pl.Boolean).alias("_gold"),
    )
    joined = rows.join(labels, on=list(GOLD_UNIT), how="left", nulls_equal=True)
    judged = pl.col("source") == "judge"
    return joined.with_columns(
        pl.when(judged).then(pl.col("_gold")).otherwise(pl.col("satisfied")).alias("satisfied"),
        pl.when(judged & pl.col("_gold").is_null())
        .then(pl.lit("error"))
        .otherwise(pl.col("status"))
        .alias("status"),
    ).drop("_gold")


def _judge_verdicts(rows: pl.LazyFrame, value: pl.Expr | None, *, drop: bool = False) -> pl.LazyFrame:
    """`rows` with every judge verdict set to `value` (None: left), or with `drop` every judge row
    given status "error" (what is left are the units rules alone decide)."""
    judged = pl.col("source") == "judge"
    if drop:
        return rows.with_columns(
            pl.when(judged).then(pl.lit("error")).otherwise(pl.col("status")).alias("status")
        )
    if value is None:
        return rows
    return rows.with_columns(pl.when(judged).then(value).otherwise(pl.col("satisfied")).alias("satisfied"))


# ------------------------------------------------------------------------------------------- PPI++


def _ppi_model(
    bench: str, judged: pl.DataFrame, gold: pl.DataFrame, rule: set[str], sample: str
) -> Corrected:
    """PPI++ of one model's metric: `judged` and `gold` its units (headline_units rows: the judge's,
    and the gold units' with their gold num); `rule` the units no judge row decides."""
    metric, model = str(judged["metric"][0]), str(judged["model"][0])
    base = Corrected(bench, model, metric, float((judged["f"] * judged["num"]).sum()))
    is_rule = pl.col("unit").is_in(list(rule))
    mine = judged.filter(~is_rule)
    labelled = mine.join(
        gold.select("unit", pl.col("num").alias("g"), pl.col("den").alias("gden")), on="unit"
    )
    n = labelled.height
    groups = mine.height > 0 and str(mine["unit"][0]).startswith("group:")
    what = "groups" if groups else "instances"  # a unit of CSL is a group of five levels
    note = ""
    if n == 0 and groups:
        note = f"no gold for model {model} on a whole group ({metric} is scored per group of instances)"
    elif n == 0:
        note = f"no gold for model {model}"
    elif sample == "stratified":
        note = f"the gold of model {model} is a stratified sample: PPI++ needs a random one"
    elif n < MIN_GOLD:
        note = f"{n} gold {what} of model {model}: PPI++ needs {MIN_GOLD} or more"
    elif ((labelled["gden"] - labelled["den"]).abs() > _EPS).any():
        note = f"{metric}'s denominator depends on the labels: PPI++ cannot correct it"
    if note:
        return replace(base, n_gold=n, ppi_note=note)
    rest = mine.join(labelled.select("unit"), on="unit", how="anti")
    fixed = float(judged.filter(is_rule).select((pl.col("f") * pl.col("num")).sum()).item())
    share = float((mine["f"] * mine["den"]).sum())  # the judged units' part of the value
    f = labelled["f"].to_numpy()
    try:
        est = ppi_ratio(
            f * labelled["g"].to_numpy(),
            f * labelled["num"].to_numpy(),
            f * labelled["den"].to_numpy(),
            (rest["f"] * rest["num"]).to_numpy(),
            (rest["f"] * rest["den"]).to_numpy(),
        )
    except Refused as e:
        return replace(base, n_gold=n, ppi_note=str(e))
    warn = f"{n} gold {what} of model {model}: under {WARN_GOLD} the interval may cover less than 95%"
    return replace(
        base,
        value_ppi=fixed + share * est.value,
        ci_low_ppi=fixed + share * est.ci_low,
        ci_high_ppi=fixed + share * est.ci_high,
        lam=est.lam,
        n_gold=n,
        ppi_note=warn if n < WARN_GOLD else "",
    )


def _samples(gold: pl.DataFrame) -> dict[str, str]:
    """Per model, "stratified" when any of its gold rows says so, else "random"."""
    if "sample" not in gold.columns:
        return {}
    strat = gold.filter(pl.col("sample") == "stratified").get_column("model").unique().to_list()
    return {str(m): "stratified" for m in strat}


def _ppi_bench(bench: str, rows: pl.LazyFrame, b: BenchmarkMetrics, gold: pl.DataFrame) -> list[Corrected]:
    judged = headline_units(rows, b, b.headline)
    golden = headline_units(_labelled(rows, gold), b, b.headline)
    rule_only = headline_units(_judge_verdicts(rows, None, drop=True), b, b.headline)
    samples = _samples(gold)
    out = []
    for (metric, model), part in sorted(judged.partition_by(["metric", "model"], as_dict=True).items()):
        mine = golden.filter((pl.col("metric") == metric) & (pl.col("model") == model))
        rule = rule_only.filter((pl.col("metric") == metric) & (pl.col("model") == model))
        out.append(_ppi_model(bench, part, mine, set(rule["unit"].to_list()), samples.get(str(model), "")))
    return out


# ------------------------------------------------------------------------------------ Rogan-Gladen


def _se_sp(rows: pl.LazyFrame, gold: pl.DataFrame) -> tuple[Rate, Rate, dict[str, Rate], dict[str, Rate]]:
    """The judge's sensitivity and specificity on gold units, pooled and per model, each a ratio of
    per-instance sums with its cluster-linearised variance."""
    from ifsweep.metrics.audit import audit_units

    judges = [j for j in rows.select(pl.col("judge").unique()).collect().get_column("judge").to_list() if j]
    units = audit_units(rows, gold, judges)
    inst = units.group_by("model", "instance_id").agg(
        (pl.col("v") * pl.col("g")).sum().alias("tp"),
        pl.col("g").sum().alias("pos"),
        ((1 - pl.col("v")) * (1 - pl.col("g"))).sum().alias("tn"),
        (1 - pl.col("g")).sum().alias("neg"),
    )

    def rates(part: pl.DataFrame) -> tuple[Rate, Rate]:
        return ratio_rate(part["tp"].to_numpy(), part["pos"].to_numpy()), ratio_rate(
            part["tn"].to_numpy(), part["neg"].to_numpy()
        )

    se, sp = rates(inst)
    by = {str(m): rates(p) for (m,), p in inst.partition_by("model", as_dict=True).items()}
    return se, sp, {m: r[0] for m, r in by.items()}, {m: r[1] for m, r in by.items()}


def _linear(passes: Mapping[str, pl.DataFrame]) -> bool:
    """Whether every unit's value is affine in its judge verdicts, by x(v) + x(not v) = x(yes) + x(no)."""
    joined = passes["v"].select("metric", "model", "unit", pl.col("num").alias("v"))
    for name in ("not", "yes", "no"):
        joined = joined.join(
            passes[name].select("metric", "model", "unit", pl.col("num").alias(name)),
            on=["metric", "model", "unit"],
            how="full",
            coalesce=True,
        )
    if joined.select(pl.any_horizontal(pl.all().is_null()).any()).item():
        return False
    gap = (pl.col("v") + pl.col("not") - pl.col("yes") - pl.col("no")).abs()
    return bool(joined.select((gap <= _EPS).all()).item())


def _rg_model(bench: str, passes: Mapping[str, pl.DataFrame], se: Rate, sp: Rate) -> Corrected:
    """Rogan-Gladen of one model's metric (`passes`: its units under the judge's verdicts "v" and
    with every judge verdict "yes" and "no")."""
    v = passes["v"]
    keyed = (
        v.select("unit", "f", "num")
        .join(passes["yes"].select("unit", pl.col("num").alias("x1")), on="unit")
        .join(passes["no"].select("unit", pl.col("num").alias("x0")), on="unit")
    )
    f = keyed["f"].to_numpy()
    a = f * (keyed["num"].to_numpy() - keyed["x0"].to_numpy())
    b = f * (keyed["x1"].to_numpy() - keyed["x0"].to_numpy())
    base = Corrected(
        bench, str(v["model"][0]), str(v["metric"][0]), float(np.sum(f * keyed["num"].to_numpy()))
    )
    floor, span = float(np.sum(f * keyed["x0"].to_numpy())), float(b.sum())
    if not span > 0:
        return replace(base, rg_note="no judge-decided constraint: nothing to correct")
    try:
        est = rogan_gladen(ratio_rate(a, b), se, sp)
    except Refused as e:
        return replace(base, rg_note=str(e))
    return replace(
        base,
        value_rg=floor + span * est.value,
        ci_low_rg=floor + span * est.ci_low,
        ci_high_rg=floor + span * est.ci_high,
    )


def _rg_bench(
    bench: str, rows: pl.LazyFrame, b: BenchmarkMetrics, gold: pl.DataFrame
) -> tuple[list[Corrected], BenchCorrection]:
    sat = pl.col("satisfied")
    passes = {
        "v": headline_units(rows, b, b.headline),
        "not": headline_units(_judge_verdicts(rows, ~sat), b, b.headline),
        "yes": headline_units(_judge_verdicts(rows, pl.lit(True)), b, b.headline),
        "no": headline_units(_judge_verdicts(rows, pl.lit(False)), b, b.headline),
    }
    se, sp, se_by, sp_by = _se_sp(rows, gold)
    holds = homogeneous(se_by) and homogeneous(sp_by)
    summary = BenchCorrection(
        bench,
        b.primary,
        se.value if math.isfinite(se.value) else None,
        sp.value if math.isfinite(sp.value) else None,
        len(se_by),
        holds if len(se_by) > 1 else None,
        note="" if holds else "the judge's sensitivity or specificity differs between models: RG assumes not",
    )
    out = []
    for metric in b.headline:
        mine = {k: p.filter(pl.col("metric") == metric) for k, p in passes.items()}
        linear = _linear(mine)
        for (model,), part in sorted(mine["v"].partition_by("model", as_dict=True).items()):
            one = {k: p.filter(pl.col("model") == model) for k, p in mine.items()}
            one["v"] = part
            if not se_by:
                c = Corrected(bench, str(model), metric, float((part["f"] * part["num"]).sum()))
                out.append(replace(c, rg_note=f"no gold on {bench}: RG needs the judge's error rates"))
            elif not linear:
                c = Corrected(bench, str(model), metric, float((part["f"] * part["num"]).sum()))
                out.append(
                    replace(
                        c,
                        rg_note=f"{metric} is not linear in the verdicts: RG corrects a rate of constraints",
                    )
                )
            else:
                out.append(_rg_model(bench, one, se, sp))
    if not holds:  # the values stand, flagged on each row (JSON's correction_note) and in the summary
        out = [replace(c, rg_note=f"flagged: {summary.note}") if c.value_rg is not None else c for c in out]
    return out, summary


# ------------------------------------------------------------------------------------------ driver


def _value(c: Corrected, method: str) -> float | None:
    v: float | None = c.value_ppi if method == "ppi" else c.value_rg
    return v


def _rank_moves(scores: Sequence[Corrected], metric: str, method: str) -> tuple[float | None, int]:
    """Kendall's tau-b of the corrected against the uncorrected values of `metric`, and the largest
    rank change, over the models with both."""
    pairs: dict[str, tuple[float, float]] = {}
    for c in scores:
        fixed = _value(c, method)
        if c.metric == metric and c.value is not None and fixed is not None:
            pairs[c.model] = (c.value, fixed)
    if len(pairs) < 2:
        return None, 0
    before = competition_ranks({m: p[0] for m, p in pairs.items()})
    after = competition_ranks({m: p[1] for m, p in pairs.items()})
    tau = kendall_tau_b([p[0] for p in pairs.values()], [p[1] for p in pairs.values()])
    return tau, max(abs(before[m] - after[m]) for m in pairs)


def corrected_scores(
    rows: pl.LazyFrame | pl.DataFrame, catalog: Catalog, gold: pl.DataFrame, method: str
) -> Corrections:
    """Every headline metric of each benchmark in `rows` (one judge's verdict rows, or the majority's)
    corrected by `method` ("ppi" or "rg") with `gold` (GOLD_UNIT columns and `gold`; optional `sample`)."""
    if method not in ("ppi", "rg"):
        raise ValueError(f"correct: expected ppi or rg, got {method!r}")
    lf = prepared(rows)
    present = lf.select(pl.col("benchmark").unique()).collect().get_column("benchmark").to_list()
    judges = lf.filter(pl.col("source") == "judge").select(pl.col("judge").unique()).collect()["judge"]
    scores: list[Corrected] = []
    summaries: list[BenchCorrection] = []
    for name in catalog.ordered(present):
        b = catalog.get(name)
        if b is None:
            continue
        mine, labels = lf.filter(pl.col("benchmark") == name), gold.filter(pl.col("benchmark") == name)
        if method == "ppi":
            found = _ppi_bench(name, mine, b, labels)
            summary = BenchCorrection(
                name, b.primary, models_with_gold=len({c.model for c in found if c.n_gold})
            )
        else:
            found, summary = _rg_bench(name, mine, b, labels)
        # Ranked by the primary metric, or by the first headline metric the method corrects (RG
        # leaves HSR, ISR, PSR and GAcc alone).
        fixed = [m for m in b.headline if any(c.metric == m and _value(c, method) is not None for c in found)]
        metric = b.primary if b.primary in fixed or not fixed else fixed[0]
        tau, moved = _rank_moves(found, metric, method)
        summary = replace(summary, metric=metric)
        if method == "ppi":
            summary = replace(summary, tau_ppi=tau, max_change_ppi=moved)
        else:
            summary = replace(summary, tau_rg=tau, max_change_rg=moved)
        scores += found
        summaries.append(summary)
    judge = next((str(j) for j in judges.to_list() if j is not None), None)
    return Corrections(method, judge, tuple(scores), tuple(summaries))


def corrections_frame(found: Corrections) -> pl.DataFrame:
    """The corrected columns keyed as a metrics table is (benchmark, model, judge, metric, slice "all"),
    to join onto it."""
    schema: dict[str, Any] = {"benchmark": pl.String, "model": pl.String, "judge": pl.String}
    schema |= {"metric": pl.String, "slice": pl.String}
    schema |= {c: pl.Float64 for c in CORRECTED_COLUMNS}
    schema |= {"n_gold": pl.Int64, "correction_note": pl.String}
    rows = [
        {
            "benchmark": c.benchmark,
            "model": c.model,
            "judge": found.judge,
            "metric": c.metric,
            "slice": "all",
            **{k: v for k, v in c.as_json().items() if k in CORRECTED_COLUMNS},
            "correction_note": (c.ppi_note if found.method == "ppi" else c.rg_note) or None,
        }
        for c in found.scores
    ]
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)
