"""Every metric as per-unit sums plus a tree of unweighted means.

A *leaf* statistic (benchmark, model, metric, slice) is sum(num) / sum(den) over its units (instances, or
FollowBench groups for CSL): a plain mean when den is 1 per unit, a micro average (InFoBench DRFR) when
den counts rows. A *parent* statistic is the unweighted mean of child statistics of the same benchmark,
model and metric (FollowBench "level=L" over its categories, "all" over levels). Point estimates and the
bootstrap both evaluate this one description, so they cannot drift apart.

A `Leaf` describes a family of leaf statistics over a frame with one row per unit. Point estimates only
need each statistic's two sums, so `Leaf.sums` groups the units by the columns the slice is made of and
formats slice names for a few thousand statistics; the bootstrap asks for one cell per (statistic,
unit) as codes (`Leaf.unit_cells`), paired differences for those rows with names (`Leaf.per_unit`).
Measured on 10M verdict rows: point estimates over the 6.3M per-unit rows, with a formatted slice
string each, took 4.3 s; over the sums, under 0.1 s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import polars as pl

STAT_KEY: tuple[str, ...] = ("benchmark", "model", "metric", "slice")

LEAF_SCHEMA: dict[str, pl.DataType] = {
    "benchmark": pl.String(),
    "model": pl.String(),
    "metric": pl.String(),
    "slice": pl.String(),
    "unit_kind": pl.String(),  # "instance" or "group": what the bootstrap resamples
    "unit": pl.String(),
    "num": pl.Float64(),
    "den": pl.Float64(),
}

# One row per leaf statistic: its units' num and den summed.
SUM_SCHEMA: dict[str, pl.DataType] = {
    "benchmark": pl.String(),
    "model": pl.String(),
    "metric": pl.String(),
    "slice": pl.String(),
    "num": pl.Float64(),
    "den": pl.Float64(),
}

PARENT_SCHEMA: dict[str, pl.DataType] = {
    "benchmark": pl.String(),
    "model": pl.String(),
    "metric": pl.String(),
    "slice": pl.String(),
    "child": pl.String(),  # the child's slice; same benchmark, model and metric
    "layer": pl.Int64(),  # 1: children are leaves; 2: children are layer-1 parents
}

RESULT_SCHEMA: dict[str, pl.DataType] = {
    "benchmark": pl.String(),
    "model": pl.String(),
    "metric": pl.String(),
    "slice": pl.String(),
    "value": pl.Float64(),
    "n": pl.Int64(),
}

# A point estimate a benchmark computes in its reference's own arithmetic (CFBench reference mode rounds
# each mean to 2 decimals), replacing the one the tree gives for that statistic.
FINAL_SCHEMA: dict[str, pl.DataType] = {
    "benchmark": pl.String(),
    "model": pl.String(),
    "metric": pl.String(),
    "slice": pl.String(),
    "final": pl.Float64(),
}

SEEN_SCHEMA: dict[str, pl.DataType] = {
    "benchmark": pl.String(),
    "model": pl.String(),
    "instance_id": pl.String(),
    "kept": pl.Boolean(),
}


# Rows summed per unit in one group-by when the bootstrap's units are made of rows (InFoBench's per-type
# units): the group-by's state grows with its groups, about one per row.
ROWS_PER_PART = 10_000_000


@dataclass(frozen=True, slots=True)
class UnitCells:
    """One leaf family's per-unit sums as codes, what the bootstrap resamples: `stats` names each
    statistic code s (s, STAT_KEY columns), `units` each unit code c (c, benchmark, unit), and `cells`
    holds one row per (statistic, unit) with its num and den (s, c: UInt32; 24 bytes a row)."""

    unit_kind: str
    stats: pl.DataFrame
    units: pl.DataFrame
    cells: pl.DataFrame


@dataclass(frozen=True, slots=True)
class Leaf:
    """Leaf statistics `metric` of the units in `units` (one row per unit, with benchmark and model).

    `slice_` is an expression of the columns in `by` only (a unit whose slice is null is in no
    statistic); `num` and `den` are per-unit expressions (den defaults to 1: a plain mean).

    With `expand`, a one-to-many map from the `by` columns to the columns `slice_` reads (InFoBench:
    a constraint_type string to each of its labels), a unit row counts in every slice it maps to, and
    rows of one unit landing in the same slice are summed. Sums are then taken per `by` value first and
    expanded after, so the map is applied to a few thousand sums instead of every unit.

    With `totals`, the same columns as `units` already summed per (benchmark, model, *by): point
    estimates read them, and `units` is read only for the bootstrap (InFoBench: its per (instance,
    type) units are almost one per row, so the streaming pass sums straight to (model, type))."""

    units: pl.LazyFrame
    metric: str
    slice_: pl.Expr
    by: tuple[str, ...]
    unit_kind: str
    unit: str
    num: pl.Expr
    den: pl.Expr | None = None
    expand: pl.LazyFrame | None = None
    totals: pl.LazyFrame | None = None

    def _values(self, *key: str, frame: pl.LazyFrame | None = None) -> pl.LazyFrame:
        den = pl.lit(1.0) if self.den is None else self.den.cast(pl.Float64)
        source = self.units if frame is None else frame
        return source.select(*key, self.num.cast(pl.Float64).alias("num"), den.alias("den"))

    def _summed(self, frame: pl.LazyFrame, key: list[str]) -> pl.LazyFrame:
        """num and den per `key`, through `expand` when there is one."""
        if self.expand is None:
            return _ordered_sums(frame, key)
        mapped = [c for c in self.expand.collect_schema() if c not in self.by]
        again = [c for c in key if c not in self.by] + mapped
        # Whole numbers sum exactly in any grouping, so a single group-by of the expanded rows gives
        # what summing per `key` first and per `again` after gives (InFoBench's counts; at 10M rows
        # the first group-by, one group per row, cost 1.2 GB); fractions are summed in that order.
        once = _plain_sums(frame.join(self.expand, on=list(self.by), how="inner"), again)
        if once.get_column("_whole").all():
            return once.drop("_whole").lazy()
        return _ordered_sums(
            _ordered_sums(frame, key).join(self.expand, on=list(self.by), how="inner"), again
        )

    def _shaped(self, frame: pl.LazyFrame, *unit: pl.Expr) -> pl.LazyFrame:
        return frame.select(
            pl.col("benchmark").cast(pl.String),
            pl.col("model").cast(pl.String),
            pl.lit(self.metric).alias("metric"),
            self.slice_.cast(pl.String).alias("slice"),
            *unit,
            "num",
            "den",
        ).filter(pl.col("slice").is_not_null())

    def _unit_frame(self, *, coded: bool = False, rows_per_part: int = 0) -> pl.LazyFrame:
        """One row per (benchmark, model, unit, slice columns) with its num and den. `coded`: benchmark,
        model and unit as Categorical (string ones cast to categories private to the call) before any
        sum, so the group-bys key on 32-bit codes instead of strings, and the units are summed in
        parts (`_coded_units`)."""
        key = ["benchmark", "model", self.unit, *self.by]
        frame = self._values(*key)
        if not coded:
            return frame if self.expand is None else self._summed(frame, key)
        ids = pl.Categorical(pl.Categories.random())
        schema = frame.collect_schema()
        frame = frame.with_columns(
            pl.col(c) if isinstance(schema[c], pl.Categorical) else pl.col(c).cast(ids)
            for c in ("benchmark", "model", self.unit)
        )
        return frame if self.expand is None else self._coded_units(frame, key, rows_per_part)

    def _coded_units(self, frame: pl.LazyFrame, key: list[str], rows_per_part: int) -> pl.LazyFrame:
        """`_summed` of coded rows, one part of the units at a time (a unit's code modulo the number of
        parts, so each sum is whole in one part): the group-by of units almost one per row held 3.3 GB
        over 30M InFoBench rows in one part, 1.7 GB in three."""
        rows = int(frame.select(pl.len()).collect(engine="streaming").item())
        parts = max(1, -(-rows // rows_per_part))
        code = pl.col(self.unit).to_physical()
        return (
            pl.concat([self._summed(frame.filter(code % parts == i), key) for i in range(parts)])
            .collect(engine="streaming")
            .lazy()
        )

    def per_unit(self) -> pl.LazyFrame:
        """LEAF_SCHEMA rows: one per (statistic, unit), what paired differences resample."""
        unit = (pl.lit(self.unit_kind).alias("unit_kind"), pl.col(self.unit).cast(pl.String).alias("unit"))
        return self._shaped(self._unit_frame(), *unit)

    def unit_cells(self, rows_per_part: int = ROWS_PER_PART) -> UnitCells:
        """The rows of `per_unit` as codes: the statistic's and the unit's names are formatted once per
        distinct statistic and unit, not on each of the (statistic, unit) rows (13M rows over 10M
        InFoBench verdict rows: as six strings each they took 7.4 GB to index for the bootstrap)."""
        frame = self._unit_frame(coded=True, rows_per_part=rows_per_part).collect(engine="streaming")
        cols = [c for c in frame.columns if c not in (self.unit, "num", "den")]
        stats = (
            frame.select(cols)
            .unique()
            .with_columns(self.slice_.cast(pl.String).alias("slice"))
            .filter(pl.col("slice").is_not_null())
            .with_row_index("s")
        )
        cells = frame.join(stats.select(*cols, "s"), on=cols, how="inner", nulls_equal=True).select(
            "benchmark", "s", pl.col(self.unit).to_physical().alias("c"), self.unit, "num", "den"
        )
        del frame
        units = cells.select(
            "c", pl.col("benchmark").cast(pl.String), pl.col(self.unit).cast(pl.String).alias("unit")
        )
        return UnitCells(
            self.unit_kind,
            stats.select(
                "s",
                pl.col("benchmark").cast(pl.String),
                pl.col("model").cast(pl.String),
                pl.lit(self.metric).alias("metric"),
                "slice",
            ),
            units.unique(),
            cells.select("s", "c", "num", "den"),
        )

    def sums(self) -> pl.LazyFrame:
        """SUM_SCHEMA rows: one per statistic."""
        key = ["benchmark", "model", *self.by]
        return self._shaped(self._summed(self._values(*key, frame=self.totals), key))


def ordered_sum(name: str) -> pl.Expr:
    """Aggregation: the float sum of `name` taken in ascending order, so it is bit-for-bit the same
    however rows were ordered or a parallel group-by split them. (Polars drops a `sort()` placed before
    `sum()` or `mean()` as pointless; before `cum_sum()` it must keep it.)"""
    return pl.col(name).sort().cum_sum().last()


# Below this a float holds every whole number, so whole numbers add up exactly in any order.
_EXACT = float(2**53)


def _whole(name: str) -> pl.Expr:
    """Aggregation: every value of `name` is a whole number >= 0 (none null). Its plain sum is then exact
    whatever the order of its additions if it is below 2^53 (`_exact`); one boolean state per group."""
    c = pl.col(name)
    return ((c >= 0) & (c == c.floor())).fill_null(False).all()


def _exact(frame: pl.DataFrame) -> pl.Series:
    """Per row of `_plain_sums`: both sums of whole numbers, and below 2^53 (a true sum past it rounds to
    a float sum past it, so checking the float sum is enough)."""
    return frame.select(pl.col("_whole") & (pl.col("num") < _EXACT) & (pl.col("den") < _EXACT)).to_series()


def _plain_sums(frame: pl.LazyFrame, key: list[str]) -> pl.DataFrame:
    """num and den summed plainly per `key`, and `_whole`: whether both sums are exact."""
    sums = pl.col("num").sum(), pl.col("den").sum(), (_whole("num") & _whole("den")).alias("_whole")
    # The streaming engine by name, as `instances.streamed` does (importing it here would close a cycle).
    plain = frame.group_by(key).agg(*sums).collect(engine="streaming")
    return plain.with_columns(_exact(plain).alias("_whole"))


def _ordered_sums(frame: pl.LazyFrame, key: list[str]) -> pl.LazyFrame:
    """num and den per `key`, bit for bit the same under any row order: a plain streaming sum for each
    group of whole numbers (`_whole`: counts, and the 0/1 of a rate such as coverage or HSR), and
    `ordered_sum` only for the others, whose sort per group is no streaming aggregation: the engine
    then held every unit in memory (100M InFoBench rows: 3.6 GB of peak RSS summing 18M instances'
    counts, where DRFR and coverage are whole numbers throughout)."""
    plain = _plain_sums(frame, key)
    whole = plain.get_column("_whole")
    exact = plain.filter(whole).drop("_whole").lazy()
    if whole.all():
        return exact
    rest = plain.filter(~whole).select(key).lazy()
    mine = frame.join(rest, on=key, how="semi", nulls_equal=True)
    return pl.concat([exact, mine.group_by(key).agg(ordered_sum("num"), ordered_sum("den"))])


def _typed(frame: pl.LazyFrame, schema: dict[str, pl.DataType]) -> pl.LazyFrame:
    return frame.select(list(schema)).cast(pl.Schema(schema))


def _no_parents() -> pl.LazyFrame:
    return pl.LazyFrame(schema=PARENT_SCHEMA)


def _no_instances() -> pl.LazyFrame:
    return pl.LazyFrame(schema=SEEN_SCHEMA)


def _no_finals() -> pl.LazyFrame:
    return pl.LazyFrame(schema=FINAL_SCHEMA)


@dataclass(frozen=True, slots=True)
class Components:
    """A benchmark's statistics: leaf families, parent edges (PARENT_SCHEMA, one row per (parent stat,
    child slice)), `seen`, every instance with whether it was kept (SEEN_SCHEMA), for coverage, and
    `finals`, point estimates that replace the tree's (FINAL_SCHEMA; intervals still come from the
    tree's units)."""

    leaves: tuple[Leaf, ...] = ()
    parents: pl.LazyFrame = field(default_factory=_no_parents)
    seen: pl.LazyFrame = field(default_factory=_no_instances)
    finals: pl.LazyFrame = field(default_factory=_no_finals)

    @staticmethod
    def concat(parts: list[Components]) -> Components:
        return Components(
            tuple(leaf for p in parts for leaf in p.leaves),
            pl.concat([_no_parents(), *(p.parent_edges() for p in parts)]),
            pl.concat([_no_instances(), *(_typed(p.seen, SEEN_SCHEMA) for p in parts)]),
            pl.concat([_no_finals(), *(_typed(p.finals, FINAL_SCHEMA) for p in parts)]),
        )

    def parent_edges(self) -> pl.LazyFrame:
        """`parents` in PARENT_SCHEMA (model may have been a categorical)."""
        return _typed(self.parents, PARENT_SCHEMA)

    def per_unit(self) -> pl.LazyFrame:
        """Every leaf statistic's units (LEAF_SCHEMA)."""
        return pl.concat([pl.LazyFrame(schema=LEAF_SCHEMA), *(leaf.per_unit() for leaf in self.leaves)])

    def unit_cells(self, rows_per_part: int = ROWS_PER_PART) -> list[UnitCells]:
        """Every leaf statistic's units, coded (`Leaf.unit_cells`), one leaf family at a time."""
        return [leaf.unit_cells(rows_per_part) for leaf in self.leaves]

    def sums(self) -> pl.LazyFrame:
        """Every leaf statistic's sums (SUM_SCHEMA)."""
        return pl.concat([pl.LazyFrame(schema=SUM_SCHEMA), *(leaf.sums() for leaf in self.leaves)])


def split_slice() -> pl.Expr:
    return pl.format("split={}", pl.col("split"))


def split_leaves(
    units: pl.LazyFrame, metric: str, num: pl.Expr, den: pl.Expr | None = None
) -> tuple[Leaf, ...]:
    """`metric` over per-instance `units` (instance_id, split): over all of a model's instances, and
    per split."""
    return tuple(
        Leaf(units, metric, slice_, by, "instance", "instance_id", num, den)
        for slice_, by in ((pl.lit("all"), ()), (split_slice(), ("split",)))
    )


def instance_means(
    inst: pl.LazyFrame, metrics: Sequence[str], finals: pl.LazyFrame | None = None
) -> Components:
    """Each of `metrics` the mean of its column over the kept instances of `inst` (per-instance
    summaries with kept and split), over all and per split; `inst` is every instance seen."""
    kept = inst.filter(pl.col("kept"))
    leaves = tuple(leaf for m in metrics for leaf in split_leaves(kept, m, pl.col(m)))
    return Components(leaves, seen=inst, finals=_no_finals() if finals is None else finals)


def point_estimates(c: Components) -> pl.DataFrame:
    """RESULT_SCHEMA rows for every statistic of `c`, sorted by STAT_KEY."""
    sums, parents, finals = pl.collect_all([c.sums(), c.parent_edges(), c.finals])
    return estimates(sums, parents, finals)


def estimates(
    leaves: pl.DataFrame, parents: pl.DataFrame, finals: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Evaluate leaves (per-unit rows or `Leaf.sums` rows: both carry STAT_KEY, num and den) and then
    each parent layer in order; a statistic in `finals` takes its value from there. n is sum(den) for a
    leaf (instances, groups or rows) and the number of children for a parent."""
    values = leaves.group_by(list(STAT_KEY)).agg(
        (ordered_sum("num") / ordered_sum("den")).alias("value"),
        pl.col("den").sum().round().cast(pl.Int64).alias("n"),
    )
    key = ["benchmark", "model", "metric"]
    for layer in sorted(parents.get_column("layer").unique().to_list()):
        edges = parents.filter(pl.col("layer") == layer)
        derived = (
            edges.join(
                values.select([*key, pl.col("slice").alias("child"), "value"]),
                on=[*key, "child"],
                how="inner",
            )
            .group_by(list(STAT_KEY))
            .agg((ordered_sum("value") / pl.len()).alias("value"), pl.len().cast(pl.Int64).alias("n"))
        )
        values = pl.concat([values, derived.select(values.columns)])
    if finals is not None and finals.height:
        values = (
            values.join(finals.cast(pl.Schema(FINAL_SCHEMA)), on=list(STAT_KEY), how="left")
            .with_columns(pl.coalesce("final", "value").alias("value"))
            .drop("final")
        )
    return values.select(list(RESULT_SCHEMA)).cast(pl.Schema(RESULT_SCHEMA)).sort(list(STAT_KEY))
