"""How much a panel of judges agrees, and whether the leaderboard survives a change of judge.

Pure functions of verdict rows. A *unit* is one judge-decided constraint of one (benchmark, model,
instance); a judge's value on it is its `satisfied` where its row's status is ok, else missing (an
unparsed or failed verdict says nothing either way). Rule-decided rows are no judge's and are left out.

- raw agreement of a pair: the share of units both judged on which they agree;
- Cohen's kappa of a pair: (p_o - p_e) / (1 - p_e) over those units, p_e from each judge's own rate;
- Fleiss' kappa of three or more judges: over the units every judge of the panel judged;
- Krippendorff's alpha (nominal): 1 - D_o / D_e over every unit with two or more values, missing ones
  left out (so a judge that failed on a unit does not drop the others' values);
- each with a percentile bootstrap interval over instances (the units of one instance move together),
  seeded.

Every statistic is a ratio of sums over instances, so the bootstrap weighs per-instance sums with
multinomial counts: one matrix product per statistic, whatever the number of resamples.

Leaderboard sensitivity: Kendall's tau-b (ties counted as Kendall's tau-b counts them) between two
judges' scores of the same models, and the largest change of any model's rank (competition ranks:
equal scores share the better rank).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from ifsweep.metrics.instances import as_lazy
from ifsweep.metrics.schema import CONSTRAINT_KEY

__all__ = [
    "Agreement",
    "AgreementStat",
    "RankChange",
    "agreement_stats",
    "competition_ranks",
    "kendall_tau_b",
    "rank_changes",
]

FloatArray = npt.NDArray[np.float64]
ALL_TYPES = "all"  # the constraint_type of the statistics over every type of a benchmark
_UNIT = ["benchmark", "model", "instance_id", *CONSTRAINT_KEY]


@dataclass(frozen=True, slots=True)
class AgreementStat:
    """One statistic of one benchmark (and constraint type, or "all") for a pair or the whole panel.
    `statistic`: raw | cohen_kappa | fleiss_kappa | krippendorff_alpha. `value` and the interval are
    None where the statistic is undefined (no units, or no variation to agree beyond chance on)."""

    benchmark: str
    constraint_type: str
    statistic: str
    judges: tuple[str, ...]
    value: float | None
    ci_low: float | None
    ci_high: float | None
    units: int  # units the statistic is computed over
    instances: int  # instances those units belong to (what the bootstrap resamples)

    def as_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "constraint_type": self.constraint_type,
            "statistic": self.statistic,
            "judges": list(self.judges),
            "value": self.value,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "units": self.units,
            "instances": self.instances,
        }


@dataclass(frozen=True, slots=True)
class RankChange:
    """Two judges' rankings of the models on one benchmark's ranking metric (slice "all")."""

    benchmark: str
    metric: str
    judge_a: str
    judge_b: str
    models: int  # models both judges scored
    tau: float | None  # Kendall's tau-b; None with fewer than two models or no order at all
    max_change: int  # the largest |rank under a - rank under b| of any model
    moved: tuple[str, ...]  # the models that change rank by max_change (none when it is 0)

    def as_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "metric": self.metric,
            "judge_a": self.judge_a,
            "judge_b": self.judge_b,
            "models": self.models,
            "kendall_tau_b": self.tau,
            "max_rank_change": self.max_change,
            "moved": list(self.moved),
        }


@dataclass(frozen=True, slots=True)
class Agreement:
    """A run's panel: its judges, every agreement statistic, and the rank changes between judges."""

    judges: tuple[str, ...]
    stats: tuple[AgreementStat, ...]
    ranks: tuple[RankChange, ...]
    resamples: int = 0
    seed: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "judges": list(self.judges),
            "resamples": self.resamples,
            "seed": self.seed,
            "agreement": [s.as_json() for s in self.stats],
            "rank_changes": [r.as_json() for r in self.ranks],
        }

    def kappa(self, benchmark: str, a: str, b: str) -> float | None:
        """Cohen's kappa of judges a and b on `benchmark` over every constraint type."""
        for s in self.stats:
            if (
                s.benchmark == benchmark
                and s.constraint_type == ALL_TYPES
                and s.statistic == "cohen_kappa"
                and set(s.judges) == {a, b}
            ):
                return s.value
        return None


# ---------------------------------------------------------------------------------------- statistics


def _units(rows: pl.LazyFrame | pl.DataFrame, judges: Sequence[str]) -> pl.DataFrame:
    """One row per unit: its instance, constraint type, and a column per judge (1, 0 or null)."""
    lf = (
        as_lazy(rows)
        .filter((pl.col("source") == "judge") & pl.col("judge").is_in(list(judges)))
        .select(
            *_UNIT,
            pl.col("constraint_type").fill_null("(none)"),
            pl.col("judge"),
            pl.when(pl.col("status") == "ok").then(pl.col("satisfied").cast(pl.Int8)).alias("v"),
        )
    )
    df = lf.collect()
    if df.height == 0:
        return pl.DataFrame(
            schema={c: pl.String for c in ("benchmark", "model", "instance_id")}
            | {"instruction_idx": pl.Int64, "constraint_idx": pl.Int64, "constraint_type": pl.String}
            | {j: pl.Int8 for j in judges}
        )
    wide = df.pivot(on="judge", index=[*_UNIT, "constraint_type"], values="v", aggregate_function="first")
    for j in judges:
        if j not in wide.columns:
            wide = wide.with_columns(pl.lit(None, pl.Int8).alias(j))
    return wide.sort(_UNIT)


def _instance_codes(part: pl.DataFrame) -> tuple[npt.NDArray[np.int64], int]:
    codes = part.select(pl.struct("model", "instance_id").rank("dense").cast(pl.Int64) - 1).to_series()
    arr = codes.to_numpy().astype(np.int64)
    return arr, int(arr.max()) + 1 if arr.size else 0


def _cohen(s: FloatArray) -> FloatArray:
    """kappa from summed (n11, n10, n01, n00) columns; NaN where undefined."""
    n11, n10, n01, n00 = s[..., 0], s[..., 1], s[..., 2], s[..., 3]
    n = n11 + n10 + n01 + n00
    with np.errstate(divide="ignore", invalid="ignore"):
        po = (n11 + n00) / n
        pe = ((n11 + n10) * (n11 + n01) + (n01 + n00) * (n10 + n00)) / (n * n)
        out: FloatArray = (po - pe) / (1.0 - pe)
    return np.where(np.isclose(pe, 1.0), np.nan, out)


def _raw(s: FloatArray) -> FloatArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out: FloatArray = s[..., 0] / s[..., 1]
    return out


def _fleiss(k: int) -> Callable[[FloatArray], FloatArray]:
    def stat(s: FloatArray) -> FloatArray:
        """From summed (P_i, units, yes votes) columns."""
        p_i, n, yes = s[..., 0], s[..., 1], s[..., 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            p_bar = p_i / n
            p = yes / (n * k)
            pe = p * p + (1 - p) * (1 - p)
            out: FloatArray = (p_bar - pe) / (1 - pe)
        return np.where(np.isclose(pe, 1.0), np.nan, out)

    return stat


def _alpha(s: FloatArray) -> FloatArray:
    """Nominal alpha from summed coincidences (o00, o01, o11): 1 - (n - 1) o01 / (n0 n1)."""
    o00, o01, o11 = s[..., 0], s[..., 1], s[..., 2]
    n0, n1 = o00 + o01, o11 + o01
    n = n0 + n1
    with np.errstate(divide="ignore", invalid="ignore"):
        out: FloatArray = 1.0 - (n - 1.0) * o01 / (n0 * n1)
    return np.where((n0 == 0) | (n1 == 0), np.nan, out)


def _finite(v: float) -> float | None:
    return None if not math.isfinite(v) else float(v)


@dataclass(slots=True)
class _Pending:
    """One statistic of one benchmark waiting for its bootstrap: its per-instance sums."""

    benchmark: str
    constraint_type: str
    statistic: str
    judges: tuple[str, ...]
    sums: FloatArray  # instances x columns
    f: Callable[[FloatArray], FloatArray]
    units: int
    instances: int
    draws: list[FloatArray] = field(default_factory=list)


BLOCK = 100  # resamples drawn at once: their weights are BLOCK x instances floats


@dataclass(slots=True)
class _Benchmark:
    """The statistics of one benchmark, all bootstrapped over the same resamples of its instances (a
    constraint type's statistics too: its units are those of the resampled instances)."""

    benchmark: str
    inst: npt.NDArray[np.int64]  # each unit's instance code
    n_inst: int
    pending: list[_Pending] = field(default_factory=list)

    def add(
        self,
        constraint_type: str,
        statistic: str,
        who: tuple[str, ...],
        mask: npt.NDArray[np.bool_],
        cols: Sequence[FloatArray],
        f: Callable[[FloatArray], FloatArray],
    ) -> None:
        m = mask.astype(np.float64)
        sums = np.stack(
            [np.bincount(self.inst, weights=np.nan_to_num(c) * m, minlength=self.n_inst) for c in cols],
            axis=1,
        ).astype(np.float64)
        used = np.bincount(self.inst, weights=m, minlength=self.n_inst) > 0
        self.pending.append(
            _Pending(
                self.benchmark, constraint_type, statistic, who, sums, f, int(mask.sum()), int(used.sum())
            )
        )

    def finish(self, rng: np.random.Generator, resamples: int, confidence: float) -> list[AgreementStat]:
        n = self.n_inst
        done = 0
        # Every statistic's sums side by side: one matrix product per block of resamples reads the
        # weights once (a product per statistic took four times as long).
        whole = np.hstack([p.sums for p in self.pending]) if self.pending else np.zeros((n, 0))
        edges = np.cumsum([0, *(p.sums.shape[1] for p in self.pending)])
        while n > 0 and done < resamples and self.pending:
            size = min(BLOCK, resamples - done)
            picks = rng.integers(0, n, size=(size, n))
            weights = np.stack([np.bincount(row, minlength=n) for row in picks]).astype(np.float64)
            summed = weights @ whole
            for i, p in enumerate(self.pending):
                p.draws.append(p.f(summed[:, edges[i] : edges[i + 1]]))
            done += size
        tail = (1.0 - confidence) / 2.0
        out = []
        for p in self.pending:
            value = _finite(float(p.f(p.sums.sum(axis=0))))
            low = high = None
            if value is not None and p.draws:
                draws = np.concatenate(p.draws)
                draws = draws[np.isfinite(draws)]
                if draws.size:
                    low, high = (float(q) for q in np.quantile(draws, [tail, 1.0 - tail]))
            out.append(
                AgreementStat(
                    p.benchmark,
                    p.constraint_type,
                    p.statistic,
                    p.judges,
                    value,
                    low,
                    high,
                    p.units,
                    p.instances,
                )
            )
        return out


def agreement_stats(
    rows: pl.LazyFrame | pl.DataFrame,
    judges: Sequence[str],
    *,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> list[AgreementStat]:
    """Every agreement statistic of `judges` (two or more), per benchmark over all constraint types
    ("all") and per constraint type: raw agreement and Cohen's kappa of every pair, raw agreement
    over the whole panel (units every judge judged, all alike), Fleiss' kappa (three or more judges)
    and Krippendorff's alpha of the panel. `resamples` = 0: no intervals."""
    judges = list(judges)
    if len(judges) < 2:
        raise ValueError(f"agreement needs two or more judges, got {judges}")
    wide = _units(rows, judges)
    rng = np.random.default_rng(seed)
    out: list[AgreementStat] = []
    k = len(judges)
    for (bench,), part in sorted(wide.partition_by(["benchmark"], as_dict=True).items()):
        inst, n_inst = _instance_codes(part)
        b = _Benchmark(str(bench), inst, n_inst)
        vals = {j: part.get_column(j).to_numpy(allow_copy=True).astype(np.float64) for j in judges}
        rated = {j: ~np.isnan(v) for j, v in vals.items()}
        yes = np.nansum(np.stack([vals[j] for j in judges]), axis=0)
        every = np.logical_and.reduce([rated[j] for j in judges])
        m = np.sum(np.stack([rated[j] for j in judges]), axis=0).astype(np.float64)
        no = m - yes
        with np.errstate(divide="ignore", invalid="ignore"):
            coincide = [no * (no - 1) / (m - 1), yes * no / (m - 1), yes * (yes - 1) / (m - 1)]
        types = part.get_column("constraint_type").to_numpy()
        for ctype in [ALL_TYPES, *sorted(set(types.tolist()))]:
            group = np.ones(len(types), dtype=bool) if ctype == ALL_TYPES else types == ctype
            for a, c in combinations(judges, 2):
                both = rated[a] & rated[c] & group
                va, vc = vals[a], vals[c]
                b.add(ctype, "raw", (a, c), both, [(va == vc).astype(np.float64), np.ones_like(va)], _raw)
                cells = [va * vc, va * (1 - vc), (1 - va) * vc, (1 - va) * (1 - vc)]
                b.add(ctype, "cohen_kappa", (a, c), both, cells, _cohen)
            if k > 2:
                alike = ((yes == 0) | (yes == k)).astype(np.float64)
                b.add(ctype, "raw", tuple(judges), every & group, [alike, np.ones_like(yes)], _raw)
                p_i = (yes * (yes - 1) + (k - yes) * (k - yes - 1)) / (k * (k - 1))
                b.add(
                    ctype,
                    "fleiss_kappa",
                    tuple(judges),
                    every & group,
                    [p_i, np.ones_like(yes), yes],
                    _fleiss(k),
                )
            b.add(ctype, "krippendorff_alpha", tuple(judges), (m >= 2) & group, coincide, _alpha)
        out += b.finish(rng, resamples, confidence)
    return out


# ---------------------------------------------------------------------------------------- rankings


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b of paired scores: (concordant - discordant) / sqrt((n0 - t_x)(n0 - t_y)), where
    n0 counts all pairs and t_x, t_y the pairs tied in x, in y. None when either side has no order."""
    if len(x) != len(y):
        raise ValueError("kendall_tau_b: x and y differ in length")
    n = len(x)
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    i, j = np.triu_indices(n, k=1)
    dx, dy = np.sign(xa[i] - xa[j]), np.sign(ya[i] - ya[j])
    n0 = len(i)
    tx, ty = int(np.sum(dx == 0)), int(np.sum(dy == 0))
    denom = math.sqrt((n0 - tx) * (n0 - ty))
    if denom == 0:
        return None
    return float(np.sum(dx * dy)) / denom


def competition_ranks(scores: Mapping[str, float]) -> dict[str, int]:
    """Rank 1 for the highest score; equal scores share the better rank (1, 2, 2, 4)."""
    values = sorted(scores.values(), reverse=True)
    first: dict[float, int] = {}
    for pos, v in enumerate(values, start=1):
        first.setdefault(v, pos)
    return {m: first[v] for m, v in scores.items()}


def rank_changes(
    metrics: pl.DataFrame, primary: Mapping[str, str], judges: Sequence[str]
) -> list[RankChange]:
    """For every benchmark in `primary` (benchmark -> its ranking metric) and every pair of `judges`:
    Kendall's tau-b of their scores of the models both scored, and the largest rank change.
    `metrics`: compute_metrics output over the judges' rows (it has a judge column)."""
    out = []
    for bench, metric in primary.items():
        part = metrics.filter(
            (pl.col("benchmark") == bench)
            & (pl.col("metric") == metric)
            & (pl.col("slice") == "all")
            & pl.col("value").is_not_null()
            & pl.col("value").is_not_nan()
        )
        by: dict[str, dict[str, float]] = {}
        for r in part.iter_rows(named=True):
            by.setdefault(str(r["judge"]), {})[str(r["model"])] = float(r["value"])
        for a, b in combinations(judges, 2):
            sa, sb = by.get(a, {}), by.get(b, {})
            models = sorted(set(sa) & set(sb))
            if not models:
                continue
            tau = kendall_tau_b([sa[m] for m in models], [sb[m] for m in models]) if len(models) > 1 else None
            ra = competition_ranks({m: sa[m] for m in models})
            rb = competition_ranks({m: sb[m] for m in models})
            change = {m: abs(ra[m] - rb[m]) for m in models}
            top = max(change.values())
            moved = tuple(m for m in models if change[m] == top) if top > 0 else ()
            out.append(RankChange(bench, metric, a, b, len(models), tau, top, moved))
    return out
