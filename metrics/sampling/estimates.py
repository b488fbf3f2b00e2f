"""Estimates of a partial run for its planned population (issue 34, item 2): every statistic of the
metric tree evaluated under post-stratified unit weights, with the studentized Rao-Wu bootstrap's
interval (metrics/sampling/stratified.py), and paired differences on the units two models both have.
Each figure is evaluated on the part of the tree it needs and the units done
(metrics/sampling/substructure.py).

The sampling unit is the plan's (runner/engine/order.py): an instance's `group_id`. A unit of the
metric tree (metrics/bootstrap.py) is an instance or a FollowBench group (`category/group_id`); each
takes the weight of the sampling unit it belongs to, so every leaf sum(num) / sum(den) and every parent
above it is estimated as the full plan would give it, under the assumption docs/metrics.md states:
the done units of each stratum are a simple random sample of its planned ones (the seeded order's
prefix). A sampling unit is done for a model when the model has verdict rows on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from ifsweep.metrics.bootstrap import FloatArray, Structure, coded_structure, evaluate, unit_index
from ifsweep.metrics.catalog import Catalog
from ifsweep.metrics.components import UnitCells
from ifsweep.metrics.compute import all_components, validated
from ifsweep.metrics.sampling.stratified import Groups, sample_gaps, studentized_interval, unit_weights
from ifsweep.metrics.sampling.substructure import Restrictor, contributions

__all__ = ["ESTIMATE_SCHEMA", "PAIRED_ESTIMATE_SCHEMA", "estimate_metrics"]

_LEVELS = 5.0  # the most a metric counted in levels reaches (FollowBench's CSL: levels 1-5)
# The population: per benchmark, the planned sampling units' ids per stratum.
Strata = Mapping[str, Mapping[str, Sequence[str]]]

ESTIMATE_SCHEMA: dict[str, pl.DataType] = {
    "benchmark": pl.String(),
    "model": pl.String(),
    "metric": pl.String(),
    "slice": pl.String(),
    "estimate": pl.Float64(),
    "est_low": pl.Float64(),
    "est_high": pl.Float64(),
    "units_done": pl.Int64(),
    "units_planned": pl.Int64(),
    "note": pl.String(),
}
PAIRED_ESTIMATE_SCHEMA: dict[str, pl.DataType] = {
    "benchmark": pl.String(),
    "metric": pl.String(),
    "model_a": pl.String(),
    "model_b": pl.String(),
    "diff": pl.Float64(),
    "diff_low": pl.Float64(),
    "diff_high": pl.Float64(),
    "units_both": pl.Int64(),
    "units_planned": pl.Int64(),
}


@dataclass(frozen=True, slots=True)
class _Bench:
    """One benchmark's tree over one unit kind, each tree unit's sampling unit and stratum."""

    name: str
    structure: Structure
    sampling: list[str]  # per tree unit: its sampling unit's id
    stratum: dict[str, str]  # sampling unit id -> stratum
    sizes: dict[str, int]  # stratum -> planned units
    levels: dict[str, float]  # metric -> its largest value (1 for a fraction; levels for CSL)
    model: np.ndarray  # per column of the tree: its model, metric and slice (NumPy: looked up per model)
    metric: np.ndarray
    slice: np.ndarray
    cache: dict[bytes, _Weights]  # weights per set of done tree units: a model's and its pairs' share them
    cut: Restrictor  # the part of the tree some columns need, over some units

    def top(self, metric: str) -> float:
        return self.levels.get(metric, 1.0)


def estimate_metrics(
    rows: pl.LazyFrame | pl.DataFrame,
    catalog: Catalog,
    strata: Strata,
    *,
    metrics: Mapping[str, Sequence[str]] | None = None,
    resamples: int = 500,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(estimates, paired) with a judge column: per (benchmark, model, metric, slice) the
    post-stratified estimate and its interval; per benchmark, ranking metric and pair of models the
    estimated difference a - b on the units both have. `metrics`: per benchmark the metrics to keep
    (default: its headline ones), at every slice. Benchmarks without strata are left out."""
    lf, judges = validated(rows, catalog)
    keep = metrics or {b: catalog.headline(b) for b in strata}
    est: list[pl.DataFrame] = []
    paired: list[pl.DataFrame] = []
    # Each judge's verdicts are a run of their own (metrics/instances.py, by_judge): never pooled.
    for judge in judges or [None]:
        mine = lf
        if len(judges) > 1:
            mine = lf.filter(pl.col("judge").is_null() if judge is None else pl.col("judge") == judge)
        e, p = _one_judge(mine, catalog, strata, keep, resamples, seed, confidence)
        est.append(e.with_columns(pl.lit(judge, pl.String).alias("judge")))
        paired.append(p.with_columns(pl.lit(judge, pl.String).alias("judge")))
    return pl.concat(est), pl.concat(paired)


def _one_judge(
    rows: pl.LazyFrame,
    catalog: Catalog,
    strata: Strata,
    keep: Mapping[str, Sequence[str]],
    resamples: int,
    seed: int,
    confidence: float,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    # Only the benchmarks with strata: the others' statistics would be computed to be left out.
    c = all_components(rows, Catalog(tuple(b for b in catalog.benchmarks if b.name in strata)))
    parts = c.unit_cells()
    parents = c.parent_edges().collect()
    members = rows.select("benchmark", "instance_id", "group_id", "category").unique().collect()
    est: list[pl.DataFrame] = [pl.DataFrame(schema=ESTIMATE_SCHEMA)]
    paired: list[pl.DataFrame] = [pl.DataFrame(schema=PAIRED_ESTIMATE_SCHEMA)]
    for bench in sorted(strata):
        for kind in sorted({p.unit_kind for p in parts if bench in p.stats.get_column("benchmark")}):
            mine = [p for p in parts if p.unit_kind == kind]
            b = _bench(mine, bench, parents, members.filter(pl.col("benchmark") == bench), strata[bench])
            if b is None:
                continue
            b.levels.update({m: _LEVELS for m in keep.get(bench, ()) if catalog.in_levels(bench, m)})
            rng = np.random.default_rng([seed, len(bench), resamples])
            est.append(_estimates(b, keep.get(bench, ()), rng, resamples, confidence))
            primary = catalog.primary(bench)
            if primary in keep.get(bench, ()):
                paired.append(_paired(b, primary, rng, resamples, confidence))
    return pl.concat(est), pl.concat(paired)


def _bench(
    parts: list[UnitCells],
    bench: str,
    parents: pl.DataFrame,
    members: pl.DataFrame,
    strata: Mapping[str, Sequence[str]],
) -> _Bench | None:
    """The tree of `bench` over `parts` with each unit's sampling unit; None when no unit maps."""
    s = coded_structure(parts, bench, parents)
    names = unit_index(
        pl.concat([p.units.filter(pl.col("benchmark") == bench).select("unit") for p in parts])
    ).get_column("unit")
    # A tree unit is an instance (its id) or a group ("category/group_id", FollowBench's CSL unit).
    to_group = dict(zip(members.get_column("instance_id"), members.get_column("group_id"), strict=True))
    for cat, gid in zip(members.get_column("category"), members.get_column("group_id"), strict=True):
        to_group.setdefault(f"{cat}/{gid}", gid)
        to_group.setdefault(str(gid), gid)
    sampling = [to_group.get(str(u), "") for u in names]
    stratum = {uid: h for h, ids in strata.items() for uid in ids}
    if not any(g in stratum for g in sampling):
        return None
    keys = s.keys.select(pl.col("model", "metric", "slice").cast(pl.String))
    sizes = {h: len(ids) for h, ids in strata.items()}
    model, metric, slice_ = (keys.get_column(c).to_numpy() for c in ("model", "metric", "slice"))
    return _Bench(bench, s, sampling, stratum, sizes, {}, model, metric, slice_, {}, Restrictor(s))


@dataclass(frozen=True, slots=True)
class _Weights:
    rows: np.ndarray  # the tree units done (the others weigh 0, so they are left out of the evaluation)
    unit_of: np.ndarray  # per done tree unit: its sampling unit (a position in `replicates`)
    point: FloatArray  # per done tree unit
    reps: FloatArray  # resamples x done tree units
    draws: npt.NDArray[np.uint16]  # the sampling units' bootstrap draws and variance groups (Replicates)
    groups: Groups
    units: int  # sampling units done
    note: str  # what the estimate cannot speak for ("" when nothing)

    def evaluated(self, b: _Bench, cols: np.ndarray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """The statistics `cols` of `b`'s tree: (point per column, resamples x columns, each sampling
        unit's linearized contribution: units x columns), evaluated on the part of the tree they need
        and the units these weights reach."""
        sub, at = b.cut(cols, self.rows)
        both = evaluate(sub, np.vstack([self.point[None, :], self.reps]))  # one product, not two
        tree = contributions(sub, self.point, both[0])[:, at]
        # A sampling unit's tree units (a FollowBench group's levels) add up: one product with the
        # rows' indicator (np.add.at, unbuffered, cost more than the evaluation).
        member = np.zeros((self.units, self.unit_of.size))
        member[self.unit_of, np.arange(self.unit_of.size)] = 1.0
        contrib = member @ tree
        return both[0, at], both[1:, at], contrib


def _weights(b: _Bench, done: np.ndarray, rng: np.random.Generator, resamples: int) -> _Weights:
    """Point and replicate weights of the tree's units for the sampling units marked in `done` (drawn
    once per set of units: in the seeded order a pair's shared units are its shorter prefix, which
    that model's own estimate drew already)."""
    key = done.tobytes()
    if key not in b.cache:
        b.cache[key] = _drawn(b, done, rng, resamples)
    return b.cache[key]


def _drawn(b: _Bench, done: np.ndarray, rng: np.random.Generator, resamples: int) -> _Weights:
    units = sorted({g for g, d in zip(b.sampling, done, strict=True) if d and g in b.stratum})
    at = {g: i for i, g in enumerate(units)}
    strata = [b.stratum[g] for g in units]
    base, replicates = unit_weights(rng, strata, b.sizes, resamples)
    index = np.array([at.get(g, -1) if d else -1 for g, d in zip(b.sampling, done, strict=True)])
    rows = np.flatnonzero(index >= 0)
    unseen, lone = sample_gaps(strata, b.sizes)
    note = "; ".join(
        [
            *([f"strata not reached (not estimated): {', '.join(unseen)}"] if unseen else []),
            *([f"one unit of stratum {lone[0]} (no variance from it)"] if lone else []),
        ]
    )
    at_rows = index[rows]
    reps = replicates.weights[:, at_rows]  # the full-width weights are not kept (memory: one per set)
    return _Weights(rows, at_rows, base[at_rows], reps, replicates.draws, replicates.groups, len(units), note)


def _columns(b: _Bench, model: str, metrics: Sequence[str]) -> np.ndarray:
    return np.flatnonzero((b.model == model) & np.isin(b.metric, list(metrics)))


def _done(b: _Bench, model: str) -> np.ndarray:
    """Tree units the model has verdicts on (a nonzero denominator in one of its leaf statistics)."""
    n_leaf = b.structure.num.shape[1]
    leaf = np.flatnonzero(b.model[:n_leaf] == model)
    return np.asarray((b.structure.den[:, leaf] > 0).any(axis=1))


def _models(b: _Bench) -> list[str]:
    return sorted(set(b.model.tolist()))


def _estimates(
    b: _Bench, metrics: Sequence[str], rng: np.random.Generator, resamples: int, confidence: float
) -> pl.DataFrame:
    planned = sum(b.sizes.values())
    found: dict[str, list[np.ndarray]] = {
        k: [] for k in ("col", "estimate", "est_low", "est_high", "units_done")
    }
    notes: list[str] = []
    for model in _models(b):
        cols = _columns(b, model, metrics)
        if cols.size == 0:
            continue
        w = _weights(b, _done(b, model), rng, resamples)
        point, samples, contrib = w.evaluated(b, cols)
        lo, hi = studentized_interval(point, samples, contrib, w.draws, w.groups, confidence)
        top = np.array([b.top(m) for m in b.metric[cols]])
        lo, hi = _bounded(point, lo, hi, 0.0, top, w.units == planned)
        for k, v in zip(found, (cols, point, lo, hi, np.full(cols.size, w.units)), strict=True):
            found[k].append(v)
        notes += [w.note] * cols.size
    if not notes:
        return pl.DataFrame(schema=ESTIMATE_SCHEMA)
    # One frame for every model (one per model cost more than the arithmetic behind it).
    at = np.concatenate(found["col"])
    frame = (
        b.structure.keys[at]
        .with_columns(pl.col("model").cast(pl.String))
        .with_columns(
            *(pl.Series(k, np.concatenate(found[k])) for k in ("estimate", "est_low", "est_high")),
            pl.Series("units_done", np.concatenate(found["units_done"]), pl.Int64),
            pl.lit(planned, pl.Int64).alias("units_planned"),
            pl.Series("note", notes, pl.String),
        )
        .select(list(ESTIMATE_SCHEMA))
    )
    return pl.concat([pl.DataFrame(schema=ESTIMATE_SCHEMA), frame], how="vertical_relaxed")


def _paired(
    b: _Bench, metric: str, rng: np.random.Generator, resamples: int, confidence: float
) -> pl.DataFrame:
    """Each pair's difference at the metric's overall slice, both weighted by the units both have.
    Pairs sharing those units (in the seeded order: the shorter prefix) share one evaluation."""
    planned = sum(b.sizes.values())
    col = {m: c for m in _models(b) if (c := _overall(b, m, metric)) is not None}
    models = list(col)
    done = {m: _done(b, m) for m in models}
    by_units: dict[bytes, list[tuple[str, str]]] = {}
    for i, a in enumerate(models):
        for other in models[i + 1 :]:
            by_units.setdefault((done[a] & done[other]).tobytes(), []).append((a, other))
    rows: list[tuple[object, ...]] = []
    for pairs in by_units.values():
        a0, b0 = pairs[0]
        w = _weights(b, done[a0] & done[b0], rng, resamples)
        if w.units == 0:
            continue
        involved = sorted({m for p in pairs for m in p})
        at = {m: k for k, m in enumerate(involved)}
        point, samples, contrib = w.evaluated(b, np.array([col[m] for m in involved], dtype=np.int64))
        ia = np.array([at[a] for a, _ in pairs])
        ib = np.array([at[other] for _, other in pairs])
        diff = point[ia] - point[ib]  # every pair of the group at once: one interval call, not one each
        spread, parts = samples[:, ia] - samples[:, ib], contrib[:, ia] - contrib[:, ib]
        lo, hi = studentized_interval(diff, spread, parts, w.draws, w.groups, confidence)
        top = np.full(diff.size, b.top(metric))
        lo, hi = _bounded(diff, lo, hi, -top, top, w.units == planned)
        for k, (a, other) in enumerate(pairs):
            rows.append((b.name, metric, a, other, float(diff[k]), lo[k], hi[k], w.units, planned))
    rows.sort(key=lambda r: (models.index(str(r[2])), models.index(str(r[3]))))
    return pl.DataFrame(rows, schema=PAIRED_ESTIMATE_SCHEMA, orient="row")


def _bounded(
    point: FloatArray, lo: FloatArray, hi: FloatArray, bottom: FloatArray | float, top: FloatArray, full: bool
) -> tuple[FloatArray, FloatArray]:
    """The interval within the metric's range; none (NaN) where the replicates did not vary although
    the sample is not the whole plan and the estimate is inside the range: a figure resting on one
    unit of its stratum (FollowBench's per-category means with one group done), whose variance the
    sample cannot tell."""
    lo, hi = np.clip(lo, bottom, top), np.clip(hi, bottom, top)
    unknown = (hi - lo <= 1e-12) & (point > bottom + 1e-12) & (point < top - 1e-12) & (not full)
    return np.where(unknown, np.nan, lo), np.where(unknown, np.nan, hi)


def _overall(b: _Bench, model: str, metric: str) -> int | None:
    found = np.flatnonzero((b.model == model) & (b.metric == metric) & (b.slice == "all"))
    return int(found[0]) if found.size else None
