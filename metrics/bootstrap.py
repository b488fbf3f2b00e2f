"""Seeded percentile bootstrap over units (instances, or FollowBench groups for CSL), vectorized.

Per (benchmark, unit kind) the leaf sums become two dense matrices, num and den, of shape units x stats.
A batch of resamples is a matrix of multinomial counts (resamples x units), so every leaf statistic of
every model in the batch is one matmul: (W @ num) / (W @ den). Parent statistics are then unweighted
means over their children, taken with an incidence matrix and skipping children a resample left empty.
All models share the same resampled units, which is what makes paired differences paired.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from ifsweep.metrics.components import STAT_KEY, UnitCells

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Keeps one batch of weights (resamples x units) near 16 MB whatever the number of units.
_BATCH_CELLS = 2_000_000

CI_SCHEMA: dict[str, pl.DataType] = {
    "benchmark": pl.String(),
    "model": pl.String(),
    "metric": pl.String(),
    "slice": pl.String(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
}


@dataclass(frozen=True, slots=True)
class Layer:
    child_idx: IntArray  # one entry per edge: the child's column
    incidence: FloatArray  # edges x parents, 1 where the edge points to the parent
    parent_idx: IntArray  # the parents' columns


@dataclass(frozen=True, slots=True)
class Structure:
    """Everything needed to evaluate a set of statistics under any unit weights."""

    keys: pl.DataFrame  # STAT_KEY columns; row j describes column j of an evaluation
    num: FloatArray  # units x leaf stats
    den: FloatArray
    layers: tuple[Layer, ...]

    @property
    def n_units(self) -> int:
        return int(self.num.shape[0])

    def present(self) -> npt.NDArray[np.bool_]:
        """Units that contribute to at least one statistic."""
        return np.asarray((self.den > 0).any(axis=1))


def unit_index(leaves: pl.DataFrame) -> pl.DataFrame:
    """Sorted distinct units with their row number: the shared coordinate system of a resample."""
    return leaves.select(pl.col("unit").unique().sort()).with_row_index("u", offset=0)


def build_structure(leaves: pl.DataFrame, parents: pl.DataFrame, units: pl.DataFrame) -> Structure:
    summed = leaves.group_by([*STAT_KEY, "unit"]).agg(pl.col("num").sum(), pl.col("den").sum())
    keys = summed.select(STAT_KEY).unique().sort(list(STAT_KEY)).with_row_index("k")
    cells = summed.join(keys, on=list(STAT_KEY)).join(units, on="unit")
    n_units, n_leaf = units.height, keys.height
    num = np.zeros((n_units, n_leaf))
    den = np.zeros((n_units, n_leaf))
    u = cells.get_column("u").to_numpy()
    k = cells.get_column("k").to_numpy()
    num[u, k] = cells.get_column("num").to_numpy()
    den[u, k] = cells.get_column("den").to_numpy()
    return _with_parents(keys, num, den, parents)


def _with_parents(keys: pl.DataFrame, num: FloatArray, den: FloatArray, parents: pl.DataFrame) -> Structure:
    """The structure of leaf statistics `keys` (k, STAT_KEY; k their column in num and den) and of the
    parents above them."""
    wanted = keys.select("benchmark", "metric").unique()
    parents = parents.join(wanted, on=["benchmark", "metric"], how="semi").join(
        keys.select("benchmark", "model", "metric").unique(), on=["benchmark", "model", "metric"], how="semi"
    )
    layers: list[Layer] = []
    all_keys = keys
    for layer in sorted(parents.get_column("layer").unique().to_list()):
        edges = parents.filter(pl.col("layer") == layer).join(
            all_keys.rename({"slice": "child", "k": "child_k"}), on=["benchmark", "model", "metric", "child"]
        )
        new = (
            edges.select(STAT_KEY)
            .unique()
            .sort(list(STAT_KEY))
            .with_row_index("p")
            .with_columns((pl.col("p") + all_keys.height).alias("k"))
        )
        edges = edges.join(new, on=list(STAT_KEY))
        incidence = np.zeros((edges.height, new.height))
        incidence[np.arange(edges.height), edges.get_column("p").to_numpy()] = 1.0
        layers.append(
            Layer(
                child_idx=edges.get_column("child_k").to_numpy().astype(np.int64),
                incidence=incidence,
                parent_idx=new.get_column("k").to_numpy().astype(np.int64),
            )
        )
        all_keys = pl.concat([all_keys, new.select("k", *STAT_KEY)])
    return Structure(all_keys.select(STAT_KEY), num, den, tuple(layers))


def _lookup(codes: pl.DataFrame, code: str, index: str, size: int) -> IntArray:
    """code -> index as an array (-1 where a code has none)."""
    out = np.full(size, -1, dtype=np.int64)
    out[codes.get_column(code).to_numpy()] = codes.get_column(index).to_numpy()
    return out


def _positions(part: UnitCells, benchmark: str, keys: pl.DataFrame, units: pl.DataFrame) -> IntArray:
    """Each of `part`'s cells as its flat position u * len(keys) + k in the units x stats matrices
    (-1: another benchmark's)."""
    stats = part.stats.filter(pl.col("benchmark") == benchmark).join(keys, on=list(STAT_KEY))
    mine = part.units.filter(pl.col("benchmark") == benchmark).join(units, on="unit")
    s, c = part.cells.get_column("s").to_numpy(), part.cells.get_column("c").to_numpy()
    k = _lookup(stats, "s", "k", part.stats.height)[s]
    u = _lookup(mine, "c", "u", int(c.max(initial=0)) + 1)[c]
    return np.where((k >= 0) & (u >= 0), u * keys.height + k, -1)


def coded_structure(parts: Sequence[UnitCells], benchmark: str, parents: pl.DataFrame) -> Structure:
    """`build_structure` of one benchmark's cells in `parts` (all of one unit kind), from their codes:
    the same units (sorted distinct names), statistics (sorted STAT_KEY) and matrices, without a row
    per cell carrying its names."""
    units = unit_index(
        pl.concat([p.units.filter(pl.col("benchmark") == benchmark).select("unit") for p in parts])
    )
    keys = (
        pl.concat([p.stats.filter(pl.col("benchmark") == benchmark).select(STAT_KEY) for p in parts])
        .unique()
        .sort(list(STAT_KEY))
        .with_row_index("k")
    )
    num = np.zeros(units.height * keys.height)
    den = np.zeros(units.height * keys.height)
    filled = np.zeros(units.height * keys.height, dtype=np.bool_)
    for part in parts:
        at = _positions(part, benchmark, keys, units)
        ok = at >= 0
        at = at[ok]
        before = int(np.count_nonzero(filled))
        filled[at] = True
        # Every cell new and none twice: each statistic's value on a unit is that one cell's.
        if int(np.count_nonzero(filled)) - before != at.size:
            return _summed_structure(parts, benchmark, keys, units, parents)
        num[at] = part.cells.get_column("num").to_numpy()[ok]
        den[at] = part.cells.get_column("den").to_numpy()[ok]
    shape = (units.height, keys.height)
    return _with_parents(keys, num.reshape(shape), den.reshape(shape), parents)


def _summed_structure(
    parts: Sequence[UnitCells], benchmark: str, keys: pl.DataFrame, units: pl.DataFrame, parents: pl.DataFrame
) -> Structure:
    """A statistic with two cells on one unit (two slice values naming one slice): their sums, as
    `build_structure` takes them."""
    cells = []
    for part in parts:
        at = _positions(part, benchmark, keys, units)
        cells.append(
            part.cells.select("num", "den").with_columns(pl.Series("at", at)).filter(pl.col("at") >= 0)
        )
    summed = pl.concat(cells).group_by("at").agg(pl.col("num").sum(), pl.col("den").sum())
    num = np.zeros(units.height * keys.height)
    den = np.zeros(units.height * keys.height)
    at = summed.get_column("at").to_numpy()
    num[at] = summed.get_column("num").to_numpy()
    den[at] = summed.get_column("den").to_numpy()
    shape = (units.height, keys.height)
    return _with_parents(keys, num.reshape(shape), den.reshape(shape), parents)


def _ratio(num: FloatArray, den: FloatArray) -> FloatArray:
    out = np.full(num.shape, np.nan)
    np.divide(num, den, out=out, where=den > 0)
    return out


def evaluate(s: Structure, weights: FloatArray) -> FloatArray:
    """Every statistic of `s` under each row of unit weights: (resamples x units) -> (resamples x stats).
    A statistic whose units all got weight 0 is NaN; parents average the children that are not."""
    n_leaf = s.num.shape[1]
    out = np.full((weights.shape[0], s.keys.height), np.nan)
    out[:, :n_leaf] = _ratio(weights @ s.num, weights @ s.den)
    for layer in s.layers:
        child = out[:, layer.child_idx]
        ok = ~np.isnan(child)
        total = np.where(ok, child, 0.0) @ layer.incidence
        count = ok.astype(np.float64) @ layer.incidence
        out[:, layer.parent_idx] = _ratio(total, count)
    return out


def rng_for(seed: int, benchmark: str, unit_kind: str) -> np.random.Generator:
    """Independent, reproducible streams per benchmark and unit kind (crc32: stable across processes)."""
    return np.random.default_rng([seed, zlib.crc32(benchmark.encode()), zlib.crc32(unit_kind.encode())])


def weight_batches(rng: np.random.Generator, n_units: int, resamples: int) -> Iterator[FloatArray]:
    """Multinomial counts: each resample draws n_units units with replacement."""
    batch = max(1, min(resamples, _BATCH_CELLS // max(n_units, 1)))
    done = 0
    while done < resamples:
        b = min(batch, resamples - done)
        draws = rng.integers(0, n_units, size=(b, n_units)) + (np.arange(b) * n_units)[:, None]
        counts = np.bincount(draws.ravel(), minlength=b * n_units).reshape(b, n_units)
        yield counts.astype(np.float64)
        done += b


def percentile_interval(samples: FloatArray, confidence: float) -> tuple[FloatArray, FloatArray]:
    """Per column, the central `confidence` percentile interval of the defined (non-NaN) resamples."""
    lo = np.full(samples.shape[1], np.nan)
    hi = np.full(samples.shape[1], np.nan)
    defined = ~np.isnan(samples).all(axis=0)
    if defined.any():
        tail = (1.0 - confidence) / 2.0 * 100.0
        q = np.nanpercentile(samples[:, defined], [tail, 100.0 - tail], axis=0)
        lo[defined], hi[defined] = q[0], q[1]
    return lo, hi


def bootstrap_intervals(
    parts: Sequence[UnitCells],
    parents: pl.DataFrame,
    *,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pl.DataFrame:
    """ci_low / ci_high for every statistic described by `parts` (`Components.unit_cells`) and
    `parents`, one (benchmark, unit kind) at a time."""
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    out: list[pl.DataFrame] = []
    groups = sorted({(b, p.unit_kind) for p in parts for b in p.stats.get_column("benchmark").unique()})
    for benchmark, kind in groups:
        s = coded_structure([p for p in parts if p.unit_kind == kind], benchmark, parents)
        weights = weight_batches(rng_for(seed, benchmark, kind), s.n_units, resamples)
        samples = np.vstack([evaluate(s, w) for w in weights])
        lo, hi = percentile_interval(samples, confidence)
        out.append(s.keys.with_columns(pl.Series("ci_low", lo), pl.Series("ci_high", hi)))
    if not out:
        return pl.DataFrame(schema=CI_SCHEMA)
    # NaN means "undefined in every resample": present it as missing, not as a number.
    return pl.concat(out).with_columns(pl.col("ci_low", "ci_high").fill_nan(None)).cast(pl.Schema(CI_SCHEMA))
