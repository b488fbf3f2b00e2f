"""CFBench's metrics, for the metrics engine: CSR, ISR and PSR per instance, averaged over instances.

PSR follows the CFBench paper's priority rule: any unsatisfied primary requirement fails the instance;
otherwise an instance without secondary requirements passes; otherwise, without primary requirements it
passes when CSR > 0.8, and with both it passes when 0.5 + 0.5 * mean(secondary) > 0.8.

Paper mode rounds nothing. Rows scored in reference mode follow code/evalaute.py of the reference
(`_score_compute`, `_scores`): an instance's CSR and its secondary mean are rounded to 2 decimals before
ISR (CSR < 1 fails) and PSR are decided from them, and every reported mean over instances is rounded to 2
decimals again, with numpy's arithmetic (a pairwise sum in data order, round half to even of x * 100):
numpy is what the reference's numbers were made with, and Polars divides by 100 as a multiplication by
0.01, which is not the same float.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ifsweep.metrics import BenchmarkMetrics, Chart, Components, kept_expr, per_instance, streamed
from ifsweep.metrics.components import FINAL_SCHEMA, instance_means

BENCHMARK = "cfbench"
METRICS = ("CSR", "ISR", "PSR")


def _round2(values: np.ndarray) -> np.ndarray:
    return np.round(values, 2)


def _instances(rows: pl.LazyFrame) -> pl.DataFrame:
    sat = pl.col("satisfied")
    primary = pl.col("priority") == "primary"
    secondary = pl.col("priority") == "secondary"
    aggs = [
        kept_expr(),
        # Counts (numpy divides them as floats): a float each would hold 4 bytes more per instance.
        sat.sum().alias("n_sat"),
        pl.len().alias("n"),
        (primary & ~sat).any().alias("primary_failed"),
        primary.sum().alias("n_primary"),
        secondary.sum().alias("n_secondary"),
        (sat & secondary).sum().alias("sat_secondary"),
        pl.col("split").first(),
        (pl.col("scoring").fill_null("paper") == "reference").all().alias("reference"),
    ]
    inst = streamed(per_instance(rows, BENCHMARK, aggs))
    # The divisions happen in numpy: they must give the reference's floats before it rounds them.
    csr = inst.get_column("n_sat").to_numpy() / np.maximum(inst.get_column("n").to_numpy(), 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        sec = inst.get_column("sat_secondary").to_numpy() / inst.get_column("n_secondary").to_numpy()
    reference = inst.get_column("reference")
    csr_used = pl.Series(np.where(reference.to_numpy(), _round2(csr), csr), dtype=pl.Float64)
    sec_used = pl.Series(np.where(reference.to_numpy(), _round2(sec), sec), dtype=pl.Float64)
    inst = inst.with_columns(csr_used.alias("CSR"), sec_used.alias("secondary_mean"))
    isr = (
        pl.when(pl.col("reference"))
        .then((pl.col("CSR") >= 1.0).cast(pl.Float64))
        .otherwise((pl.col("n_sat") == pl.col("n")).cast(pl.Float64))
    )
    psr = (
        pl.when(pl.col("primary_failed"))
        .then(0.0)
        .when(pl.col("n_secondary") == 0)
        .then(1.0)
        .when(pl.col("n_primary") == 0)
        .then((pl.col("CSR") > 0.8).cast(pl.Float64))
        .otherwise((0.5 + 0.5 * pl.col("secondary_mean") > 0.8).cast(pl.Float64))
    )
    return inst.with_columns(isr.alias("ISR"), psr.alias("PSR"))


def _reference_finals(kept: pl.DataFrame) -> pl.DataFrame:
    """round(np.mean(...), 2) of each metric per model and slice, for models whose kept instances were
    all scored in reference mode; the reference's `_scores` takes the items in file (idx) order."""
    out: list[dict[str, object]] = []
    ordered = kept.with_columns(pl.col("instance_id").cast(pl.String)).sort(
        pl.col("instance_id").cast(pl.Int64, strict=False), pl.col("instance_id")
    )
    for (model,), part in ordered.group_by("model", maintain_order=True):
        if not part.get_column("reference").all():
            continue
        slices = [("all", part)]
        slices += [
            (f"split={s}", g) for (s,), g in part.group_by("split", maintain_order=True) if s is not None
        ]
        for name, group in slices:
            for metric in METRICS:
                value = float(_round2(np.mean(group.get_column(metric).to_numpy())))
                out.append(
                    {
                        "benchmark": BENCHMARK,
                        "model": str(model),
                        "metric": metric,
                        "slice": name,
                        "final": value,
                    }
                )
    return pl.DataFrame(out, schema=FINAL_SCHEMA)


def cfbench_components(rows: pl.LazyFrame) -> Components:
    """Statistics of the CFBench rows among `rows` (a lazy plan: `metrics.instances.prepared`)."""
    inst = _instances(rows)
    finals = _reference_finals(inst.filter(pl.col("kept"))).lazy()
    return instance_means(inst.lazy(), METRICS, finals)


def definitions(display: str) -> tuple[BenchmarkMetrics, ...]:
    """CSR, ISR, PSR: slices all and split=S; n = instances. Ranked by PSR."""
    by_split = Chart(
        kind="bars",
        metrics=("ISR", "PSR"),
        prefix="split=",
        heading="CFBench: easy and hard",
        note="Bars are point estimates, whiskers 95% intervals.",
        title="CFBench {metric} by split",
        file="cfbench_by_split.svg",
    )
    return (BenchmarkMetrics(BENCHMARK, display, METRICS, "PSR", cfbench_components, charts=(by_split,)),)
