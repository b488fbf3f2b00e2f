"""How right each judge is, measured against gold labels (docs/metrics.md, "Judge audit").

Pure functions of verdict rows and gold rows. A *unit* is one constraint of one (benchmark, model,
instance) that gold labels and the judge decided (its row's status ok; an unparsed or failed verdict
says nothing and is left out, as in agreement). With judge verdict v and gold g, over a cell's units:

- accuracy = share of units with v = g;
- kappa_gold = Cohen's kappa of the judge against gold (agreement.py's, gold as the second rater);
- false_yes = units with v = 1, g = 0 / units with g = 0 (1 - specificity);
- false_no = units with v = 0, g = 1 / units with g = 1 (1 - sensitivity);
- net_bias = mean(v - g): the judge's yes-rate minus gold's, what an uncorrected score is off by.

Each is a ratio of per-instance sums, so its 95% interval is agreement.py's percentile bootstrap over
the gold instances ((model, instance) clusters: the constraints of one answer are judged in one reply
and their errors move together). A statistic whose own units (gold-no units for false_yes, gold-yes
for false_no, all for the rest) number fewer than MIN_UNITS has no value ("n/a").

Corrections for judge error with a gold sample (docs/metrics.md, "Corrected scores"), pure functions
of per-instance arrays; the caller picks the instances.

"Corrected scores"). Pure functions of per-instance arrays; the caller picks the instances.

PPI++ (Angelopoulos, Duchi, Zrnic 2023) for a ratio of per-instance sums theta = E[s] / E[m], with
gold instances L (n of them: gold sums s, judge sums shat, sizes m) and instances without gold U (N):

    theta = lam * sum_U(shat) / sum_U(m) + sum_L(s - lam * shat) / sum_L(m)
    Var   = lam^2 * var(e) / (N * mean_U(m)^2) + var(r) / (n * mean_L(m)^2)
            e_i = shat_i - R_U * m_i (i in U),  r_i = d_i - R_d * m_i,  d_i = s_i - lam * shat_i (i in L)
    lam   = cov_L(f, ehat) / ((1 + n / N) * var_{L+U}(ehat)), clipped to [0, 1]
            f_i = s_i - R_L(s) m_i,  ehat_i = shat_i - R(shat) m_i

Each residual is an instance's linearised contribution, so constraints of one instance are never taken
as independent. With every m_i = 1 it is the PPI++ mean, with ppi_py's conventions (covariance over L
and the variances divided by n, the pooled variance of the judge's values by n + N - 1); a mean of
per-instance values (CSR, HSR, ISR, GAcc, ...) is that case. lam = 0 is the gold-only estimate.

Rogan-Gladen (1978): pi = (p + Sp - 1) / (Se + Sp - 1) from the judge's yes-rate p and its sensitivity
and specificity on gold, clipped to [0, 1], with the delta-method variance
(Var(p) + pi^2 Var(Se) + (1 - pi)^2 Var(Sp)) / J^2, J = Se + Sp - 1 (Youden's J), each rate's variance
its cluster-linearised one (`ratio_rate`). Refused when J <= MIN_YOUDEN: the correction divides by J.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from ifsweep.metrics.agreement import ALL_TYPES, _Benchmark, _cohen, _instance_codes, _raw
from ifsweep.metrics.bootstrap import rng_for
from ifsweep.metrics.instances import as_lazy
from ifsweep.metrics.schema import CONSTRAINT_KEY

__all__ = [
    "AUDIT_STATISTICS",
    "GOLD_UNIT",
    "MIN_UNITS",
    "MIN_YOUDEN",
    "AuditStat",
    "Estimate",
    "Rate",
    "Refused",
    "audit_stats",
    "audit_units",
    "homogeneous",
    "ppi_mean",
    "ppi_ratio",
    "ratio_rate",
    "rogan_gladen",
]

AUDIT_STATISTICS = ("accuracy", "kappa_gold", "false_yes", "false_no", "net_bias")
GOLD_UNIT = ("benchmark", "model", "instance_id", *CONSTRAINT_KEY)
MIN_UNITS = 5


@dataclass(frozen=True, slots=True)
class AuditStat:
    """One statistic of one judge on one benchmark's constraint type (or "all"), pooled over models
    (`model` None) or for one model. `value` and the interval are None under MIN_UNITS units or where
    the statistic is undefined (kappa with no variation)."""

    benchmark: str
    judge: str
    constraint_type: str
    model: str | None
    statistic: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    units: int
    instances: int

    def as_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "judge": self.judge,
            "constraint_type": self.constraint_type,
            "model": self.model,
            "statistic": self.statistic,
            "value": self.value,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "units": self.units,
            "instances": self.instances,
        }


def audit_units(
    verdicts: pl.LazyFrame | pl.DataFrame, gold: pl.DataFrame, judges: Sequence[str]
) -> pl.DataFrame:
    """One row per (judge, unit) both the judge (ok) and gold decided: the unit's columns, its
    constraint type, the judge, v and g (0 or 1). `gold`: GOLD_UNIT columns and `gold` (bool), one row
    per unit (gold_file.py reduces annotators to that)."""
    lf = as_lazy(verdicts)
    present = lf.collect_schema().names()
    lf = lf.with_columns(pl.lit(None, pl.Int64).alias(c) for c in CONSTRAINT_KEY if c not in present)
    judged = lf.filter(
        (pl.col("source") == "judge") & (pl.col("status") == "ok") & pl.col("judge").is_in(list(judges))
    ).select(
        *GOLD_UNIT,
        pl.col("constraint_type").fill_null("(none)"),
        "judge",
        pl.col("satisfied").cast(pl.Int8).alias("v"),
    )
    gold_lf = gold.lazy()
    if "instruction_idx" not in gold.columns:
        gold_lf = gold_lf.with_columns(pl.lit(None, pl.Int64).alias("instruction_idx"))
    labels = gold_lf.select(
        pl.col("benchmark").cast(pl.String),
        pl.col("model").cast(pl.String),
        pl.col("instance_id").cast(pl.String),
        pl.col("instruction_idx").cast(pl.Int64),
        pl.col("constraint_idx").cast(pl.Int64),
        pl.col("gold").cast(pl.Int8).alias("g"),
    )
    joined = judged.join(labels, on=list(GOLD_UNIT), how="inner", nulls_equal=True)
    return joined.collect().sort(["judge", *GOLD_UNIT], nulls_last=False)


def audit_stats(
    verdicts: pl.LazyFrame | pl.DataFrame,
    gold: pl.DataFrame,
    judges: Sequence[str],
    *,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> list[AuditStat]:
    """Every audit statistic of each of `judges` against `gold`, per benchmark and constraint type
    (and "all"), pooled over models and, where gold covers two or more models of a benchmark, per
    model. Each (benchmark, judge, model) cell draws its own seeded bootstrap stream."""
    units = audit_units(verdicts, gold, judges)
    out: list[AuditStat] = []
    for (bench, judge), part in sorted(units.partition_by(["benchmark", "judge"], as_dict=True).items()):
        models = sorted(set(part.get_column("model").to_list()))
        scopes: list[str | None] = [None, *models] if len(models) > 1 else [None]
        for model in scopes:
            cell = part if model is None else part.filter(pl.col("model") == model)
            rng = rng_for(seed, str(bench), f"audit\0{judge}\0{model or ''}")
            out += _cell_stats(cell, str(bench), str(judge), model, rng, resamples, confidence)
    return out


def _cell_stats(
    part: pl.DataFrame,
    bench: str,
    judge: str,
    model: str | None,
    rng: np.random.Generator,
    resamples: int,
    confidence: float,
) -> list[AuditStat]:
    inst, n_inst = _instance_codes(part)
    b = _Benchmark(bench, inst, n_inst)
    v = part.get_column("v").to_numpy().astype(np.float64)
    g = part.get_column("g").to_numpy().astype(np.float64)
    one = np.ones_like(v)
    types = part.get_column("constraint_type").to_numpy()
    for ctype in [ALL_TYPES, *sorted(set(types.tolist()))]:
        group = np.ones(len(types), dtype=bool) if ctype == ALL_TYPES else types == ctype
        who = (judge,)
        b.add(ctype, "accuracy", who, group, [(v == g).astype(np.float64), one], _raw)
        b.add(ctype, "kappa_gold", who, group, [v * g, v * (1 - g), (1 - v) * g, (1 - v) * (1 - g)], _cohen)
        b.add(ctype, "false_yes", who, group & (g == 0), [v, one], _raw)
        b.add(ctype, "false_no", who, group & (g == 1), [1 - v, one], _raw)
        b.add(ctype, "net_bias", who, group, [v - g, one], _raw)
    found = b.finish(rng, resamples, confidence)
    return [
        AuditStat(
            bench,
            judge,
            s.constraint_type,
            model,
            s.statistic,
            *((s.value, s.ci_low, s.ci_high) if s.units >= MIN_UNITS else (None, None, None)),
            s.units,
            s.instances,
        )
        for s in found
    ]


# ------------------------------------------------------------------------------ corrected scores

FloatArray = npt.NDArray[np.float64]
ArrayLike = Sequence[float] | FloatArray
MIN_YOUDEN = 0.1


class Refused(ValueError):
    """A correction that cannot be made; the message says why."""


@dataclass(frozen=True, slots=True)
class Estimate:
    """A corrected score with its normal-theory interval. `lam`: PPI++'s lambda (None for RG)."""

    value: float
    ci_low: float
    ci_high: float
    se: float
    lam: float | None = None


@dataclass(frozen=True, slots=True)
class Rate:
    """A ratio of per-instance sums and its cluster-linearised variance."""

    value: float
    var: float
    instances: int


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def _arr(x: ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


def ratio_rate(num: ArrayLike, den: ArrayLike) -> Rate:
    """sum(num) / sum(den) over instances, with variance sum((num_i - R den_i)^2) / sum(den)^2 (the
    linearised variance of a ratio of cluster totals). NaN value where sum(den) is 0."""
    a, b = _arr(num), _arr(den)
    total = float(b.sum())
    if total <= 0:
        return Rate(math.nan, math.nan, int(a.size))
    r = float(a.sum()) / total
    return Rate(r, float(np.sum((a - r * b) ** 2)) / total**2, int(a.size))


def _power_lambda(
    s: FloatArray, shat: FloatArray, m: FloatArray, shat_u: FloatArray, m_u: FloatArray
) -> float:
    """PPI++'s variance-minimising lambda, clipped to [0, 1] (0 when the judge's values do not vary)."""
    n, big_n = s.size, shat_u.size
    f = s - s.sum() / m.sum() * m
    r_all = (shat.sum() + shat_u.sum()) / (m.sum() + m_u.sum())
    e_l, e_u = shat - r_all * m, shat_u - r_all * m_u
    cov = float(np.mean((f - f.mean()) * (e_l - e_l.mean())))
    var = float(np.var(np.concatenate([e_l, e_u]), ddof=1))
    if not var > 0:
        return 0.0
    return float(np.clip(cov / ((1.0 + n / big_n) * var), 0.0, 1.0))


def ppi_ratio(
    s: ArrayLike,
    shat: ArrayLike,
    m: ArrayLike,
    shat_unlabeled: ArrayLike,
    m_unlabeled: ArrayLike,
    *,
    lam: float | None = None,
    confidence: float = 0.95,
) -> Estimate:
    """PPI++ of sum(s) / sum(m) (module docstring). `s`, `shat`, `m`: per gold instance, the gold
    sum, the judge's sum and the units; `shat_unlabeled`, `m_unlabeled`: per instance without gold.
    `lam` None: power-tuned; a number: that lambda (0: gold only; 1: PPI)."""
    sl, hl, ml = _arr(s), _arr(shat), _arr(m)
    hu, mu = _arr(shat_unlabeled), _arr(m_unlabeled)
    if not (sl.size == hl.size == ml.size) or hu.size != mu.size:
        raise ValueError("ppi_ratio: gold arrays (and unlabeled arrays) must have one value per instance")
    if sl.size < 2 or hu.size < 1:
        raise Refused(
            f"PPI++ needs two or more gold instances and one without gold, got {sl.size} and {hu.size}"
        )
    lam_ = _power_lambda(sl, hl, ml, hu, mu) if lam is None else float(lam)
    r_u = hu.sum() / mu.sum()
    d = sl - lam_ * hl
    r_d = d.sum() / ml.sum()
    value = float(lam_ * r_u + r_d)
    var_u = lam_**2 * float(np.var(hu - r_u * mu)) / (hu.size * float(mu.mean()) ** 2)
    var_l = float(np.var(d - r_d * ml)) / (sl.size * float(ml.mean()) ** 2)
    se = math.sqrt(var_u + var_l)
    z = _z(confidence)
    return Estimate(value, value - z * se, value + z * se, se, lam_)


def ppi_mean(
    y: ArrayLike,
    yhat: ArrayLike,
    yhat_unlabeled: ArrayLike,
    *,
    lam: float | None = None,
    confidence: float = 0.95,
) -> Estimate:
    """PPI++ of a mean of per-instance values: `ppi_ratio` with one unit per instance."""
    yl = _arr(y)
    hu = _arr(yhat_unlabeled)
    return ppi_ratio(yl, yhat, np.ones_like(yl), hu, np.ones_like(hu), lam=lam, confidence=confidence)


def rogan_gladen(p: Rate, se: Rate, sp: Rate, *, confidence: float = 0.95) -> Estimate:
    """The prevalence behind a judge's yes-rate `p`, given its sensitivity `se` and specificity `sp`
    (module docstring). Refused when Youden's J = Se + Sp - 1 is MIN_YOUDEN or less, or undefined."""
    j = se.value + sp.value - 1.0
    if not math.isfinite(j) or j <= MIN_YOUDEN:
        shown = "undefined" if not math.isfinite(j) else f"{j:.3f}"
        raise Refused(f"Rogan-Gladen needs Youden's J > {MIN_YOUDEN}: the judge's J on gold is {shown}")
    pi = min(1.0, max(0.0, (p.value + sp.value - 1.0) / j))
    var = (p.var + pi**2 * se.var + (1.0 - pi) ** 2 * sp.var) / j**2
    half = _z(confidence) * math.sqrt(var)
    return Estimate(pi, max(0.0, pi - half), min(1.0, pi + half), math.sqrt(var))


def homogeneous(rates: Mapping[str, Rate], *, level: float = 0.05) -> bool:
    """Whether a rate (a judge's Se or Sp) holds across models: the Wald test of equal rates,
    sum_k (r_k - r_w)^2 / var_k against chi-square with K - 1 degrees of freedom (r_w the
    inverse-variance weighted mean; the quantile by Wilson-Hilferty). A model whose rate has no
    variance (all its units alike) is given the largest binomial one, 1/4 per instance, so it is not
    taken for certain. True for fewer than two models: nothing to compare."""
    usable = [r for r in rates.values() if math.isfinite(r.value)]
    if len(usable) < 2:
        return True
    w = np.array([1.0 / (r.var if r.var > 0 else 0.25 / max(r.instances, 1)) for r in usable])
    vals = np.array([r.value for r in usable])
    mean = float(np.sum(w * vals) / np.sum(w))
    stat = float(np.sum(w * (vals - mean) ** 2))
    k = len(usable) - 1
    z = _z(1.0 - 2.0 * level)  # the one-sided 1 - level quantile
    critical = k * (1.0 - 2.0 / (9.0 * k) + z * math.sqrt(2.0 / (9.0 * k))) ** 3
    return stat <= critical
