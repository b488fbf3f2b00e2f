"""Paired model-vs-model differences of one statistic, with bootstrap intervals.

Both models of a pair are scored on the units kept for both, and every resample draws the same units
for both: the interval then reflects how much the difference depends on which items were drawn, not
the items' own difficulty.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt
import polars as pl

from ifsweep.metrics.bootstrap import (
    FloatArray,
    Structure,
    build_structure,
    evaluate,
    percentile_interval,
    rng_for,
    unit_index,
    weight_batches,
)
from ifsweep.metrics.catalog import Catalog
from ifsweep.metrics.compute import components_of
from ifsweep.metrics.instances import judges_of, prepared
from ifsweep.metrics.schema import VerdictError

PAIRED_SCHEMA: dict[str, pl.DataType] = {
    "benchmark": pl.String(),
    "metric": pl.String(),
    "slice": pl.String(),
    "model_a": pl.String(),
    "model_b": pl.String(),
    "diff": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "significant": pl.Boolean(),
    "n": pl.Int64(),  # units kept for both models
}


def _target(s: Structure, metric: str, slice_: str) -> int | None:
    hit = s.keys.with_row_index("j").filter((pl.col("metric") == metric) & (pl.col("slice") == slice_))
    return int(hit.get_column("j")[0]) if hit.height else None


def _one_judges_leaves(
    rows: pl.LazyFrame | pl.DataFrame, catalog: Catalog, benchmark: str, metric: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The per-unit leaves of `metric` of `benchmark` and every parent edge, from one judge's rows."""
    lf = prepared(rows)
    judges = judges_of(lf)
    if len(judges) > 1:
        raise VerdictError(
            f"paired differences of {benchmark}: rows of {len(judges)} judges; select one judge's rows first"
        )
    leaves, parents = components_of(lf, catalog)
    return leaves.filter((pl.col("benchmark") == benchmark) & (pl.col("metric") == metric)), parents


Pair = tuple[str, str]
PerModel = dict[str, tuple[Structure, int]]


def _resampled(
    per_model: PerModel, masks: dict[Pair, npt.NDArray[np.bool_]], weights: Iterator[FloatArray]
) -> dict[Pair, list[FloatArray]]:
    """Each pair's difference under every batch of unit weights (both models of a pair on the units
    kept for both)."""
    present = {m: s.present() for m, (s, _) in per_model.items()}
    diffs: dict[Pair, list[FloatArray]] = {p: [] for p in masks}
    for w in weights:
        cache: dict[str, FloatArray] = {}
        for (a, b), mask in masks.items():
            vals = []
            for m in (a, b):
                # A model whose own units are all shared needs no masking: reuse its batch result.
                if (present[m] == mask).all():
                    if m not in cache:
                        cache[m] = _stat(per_model, m, w)
                    vals.append(cache[m])
                else:
                    vals.append(_stat(per_model, m, w * mask))
            diffs[(a, b)].append(vals[0] - vals[1])
    return diffs


def _stat(per_model: PerModel, m: str, w: FloatArray) -> FloatArray:
    s, j = per_model[m]
    return evaluate(s, w)[:, j]


def paired_differences(
    rows: pl.LazyFrame | pl.DataFrame,
    catalog: Catalog,
    benchmark: str,
    metric: str,
    *,
    slice: str = "all",
    models: Sequence[str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pl.DataFrame:
    """diff = value(model_a) - value(model_b) over the units both kept, for every pair model_a <
    model_b; significant when the interval excludes 0. The rows must be one judge's (or the majority's:
    `metrics.select_judges`): two judges' verdicts would be pooled here."""
    leaves, parents = _one_judges_leaves(rows, catalog, benchmark, metric)
    if leaves.height == 0:
        return pl.DataFrame(schema=PAIRED_SCHEMA)
    kind = leaves.get_column("unit_kind")[0]
    units = unit_index(leaves)
    names = sorted(set(leaves.get_column("model").to_list()) if models is None else set(models))
    per_model: PerModel = {}
    for m in names:
        s = build_structure(leaves.filter(pl.col("model") == m), parents, units)
        j = _target(s, metric, slice)
        if j is not None:
            per_model[m] = (s, j)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :] if a in per_model and b in per_model]
    masks = {(a, b): per_model[a][0].present() & per_model[b][0].present() for a, b in pairs}
    diffs = _resampled(
        per_model, masks, weight_batches(rng_for(seed, benchmark, kind), units.height, resamples)
    )
    out = []
    for (a, b), mask in masks.items():
        ones = mask.astype(np.float64)[None, :]
        diff = float((_stat(per_model, a, ones) - _stat(per_model, b, ones))[0])
        lo, hi = percentile_interval(np.concatenate(diffs[(a, b)])[:, None], confidence)
        out.append((benchmark, metric, slice, a, b, diff, float(lo[0]), float(hi[0]), int(mask.sum())))
    frame = pl.DataFrame(
        out, schema={k: v for k, v in PAIRED_SCHEMA.items() if k != "significant"}, orient="row"
    ).with_columns(pl.col("diff", "ci_low", "ci_high").fill_nan(None))
    return frame.with_columns(
        ((pl.col("ci_low") > 0) | (pl.col("ci_high") < 0)).fill_null(False).alias("significant")
    ).select(list(PAIRED_SCHEMA))
