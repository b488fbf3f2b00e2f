"""What the metrics engine knows about each benchmark: only what its caller hands it.

The engine names no benchmark. Each benchmark describes itself as `BenchmarkMetrics` (its statistics
as Polars expressions over verdict rows, headline metrics, display name, the verdict columns its rows
must fill, the charts it wants), the registry (`ifsweep.benchmarks`) gives them, and the runner or the
library collects them in a `Catalog` for validation, `compute_metrics` and the reports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

import polars as pl

from ifsweep.metrics.components import Components

ChartKind = Literal["line", "bars", "heatmap"]


@dataclass(frozen=True, slots=True)
class Chart:
    """One chart of the HTML and Markdown reports: a metric of each model, over the slices whose name
    starts with `prefix` (what follows it is the x value, bar group or column: "level=3" gives 3).

    `line`: one line per model (FollowBench HSR by level); `bars`: one figure per metric, bars per model
    with interval whiskers (CFBench ISR and PSR by split); `heatmap`: models x slice values."""

    kind: ChartKind
    metrics: tuple[str, ...]  # line and heatmap draw the first; bars draw one figure each
    prefix: str
    heading: str  # the report section's title
    title: str  # the chart's own title; "{metric}" stands for each metric of a bars chart
    note: str = ""  # the line under the heading
    file: str = ""  # the SVG file beside a Markdown report (numbered when a chart has several figures)

    @classmethod
    def heatmap(cls, bench: str, metric: str, axis: str, by: str, file: str) -> Chart:
        """`metric` of each model by the values of the slice column `axis` (`by`: what the titles call
        them), as the benchmarks with one heatmap draw it."""
        return cls(
            kind="heatmap",
            metrics=(metric,),
            prefix=f"{axis}=",
            heading=f"{bench}: {metric} by {by}",
            title=f"{bench} {metric} by {by}",
            file=file,
        )

    def title_of(self, metric: str) -> str:
        return self.title.replace("{metric}", metric)

    @property
    def axis(self) -> str:
        """What the slice values are: "level", "split", "constraint_type"."""
        return self.prefix.rstrip("=")


@dataclass(frozen=True, slots=True)
class BenchmarkMetrics:
    """One benchmark as its verdict rows name it (the `benchmark` column: a table's report name, so
    FollowBench gives "followbench" and "followbench-zh", each with its own entry).

    `components(rows)` is every statistic of this benchmark's rows among `rows` (all benchmarks' rows,
    a lazy plan: `metrics.instances.prepared`), as leaves and parents (`metrics.components`). It reads
    `rows` with `metrics.streamed` into per-instance summaries (`metrics.per_instance`), never into a
    frame of the rows themselves."""

    name: str
    display: str
    headline: tuple[str, ...]
    primary: str  # the one metric models are ranked by, and plotted against cost
    components: Callable[[pl.LazyFrame], Components]
    required: tuple[str, ...] = ()  # verdict columns its rows must fill, beyond those every row needs
    levels: frozenset[str] = frozenset()  # metrics counted in levels (FollowBench CSL), not fractions
    charts: tuple[Chart, ...] = ()

    def __post_init__(self) -> None:
        if self.primary not in self.headline:
            raise ValueError(f"{self.name}: primary metric {self.primary!r} is not a headline metric")


@dataclass(frozen=True, slots=True)
class Catalog:
    """Every benchmark the engine may meet in verdict rows, in report order. A row whose benchmark is
    not here fails validation: nothing is scored by a definition nobody gave."""

    benchmarks: tuple[BenchmarkMetrics, ...]

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for b in self.benchmarks:
            if b.name in seen:
                raise ValueError(f"benchmark {b.name!r} is defined twice")
            seen.add(b.name)

    def names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.benchmarks)

    def get(self, name: str) -> BenchmarkMetrics | None:
        return next((b for b in self.benchmarks if b.name == name), None)

    def display(self, name: str) -> str:
        b = self.get(name)
        return name if b is None else b.display

    def headline(self, name: str) -> tuple[str, ...]:
        b = self.get(name)
        return () if b is None else b.headline

    def primary(self, name: str) -> str:
        b = self.get(name)
        return "coverage" if b is None else b.primary

    def in_levels(self, name: str, metric: str) -> bool:
        b = self.get(name)
        return b is not None and metric in b.levels

    def ordered(self, present: Iterable[str]) -> list[str]:
        """`present` in catalog order, names the catalog lacks last (sorted)."""
        found = set(present)
        known = [n for n in self.names() if n in found]
        return known + sorted(found - set(known))
