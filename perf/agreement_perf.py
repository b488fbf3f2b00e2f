"""What a panel of judges costs the metrics: agreement statistics and per-judge metrics on a large
synthetic run. Prints timings and ratios measured in this one run; not a test.

    python perf/agreement_perf.py [--rows 1000000] [--models 20] [--judges 3] [--resamples 1000]

Builds `rows` verdict rows per judge (perf/metrics_perf.py's synthetic sweep), the second and later
judges flipping 10% / 20% / ... of the first judge's judge-decided verdicts. Times, on the same rows:
- compute_metrics over one judge's rows (the baseline: a one-judge report), and over every judge's
  rows (metrics keyed by judge: about `judges` times the baseline is the expectation);
- agreement_stats with `resamples` bootstrap resamples per statistic, against the baseline;
- the point values of raw agreement and Cohen's kappa of one pair in a plain-Python loop (a baseline
  for the vectorised statistics, which also do every pair, the panel, alpha and the intervals).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
from metrics_perf import CATALOG, synth

from ifsweep import metrics


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def panel(rows: int, models: int, judges: int) -> pl.DataFrame:
    base = synth(rows, models)
    rng = np.random.default_rng(1)
    parts = [base.with_columns(pl.lit("j0").alias("judge"))]
    for k in range(1, judges):
        flip = pl.Series(rng.random(base.height) < 0.1 * k) & (base.get_column("source") == "judge")
        parts.append(
            base.with_columns(
                pl.lit(f"j{k}").alias("judge"),
                pl.when(flip).then(~pl.col("satisfied")).otherwise(pl.col("satisfied")).alias("satisfied"),
            )
        )
    return pl.concat(parts)


def python_pair(rows: pl.DataFrame) -> tuple[float, float]:
    """Raw agreement and Cohen's kappa of j0 and j1 over their judge rows, one row at a time."""
    first: dict[tuple[Any, ...], bool] = {}
    pairs = []
    for r in rows.filter(pl.col("source") == "judge").iter_rows(named=True):
        if r["status"] != "ok":
            continue
        key = (r["benchmark"], r["model"], r["instance_id"], r["constraint_idx"])
        if r["judge"] == "j0":
            first[key] = r["satisfied"]
        elif r["judge"] == "j1" and key in first:
            pairs.append((first[key], r["satisfied"]))
    n = len(pairs)
    agree = sum(a == b for a, b in pairs) / n
    pa, pb = sum(a for a, _ in pairs) / n, sum(b for _, b in pairs) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    return agree, (agree - pe) / (1 - pe)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000, help="verdict rows per judge")
    ap.add_argument("--models", type=int, default=20)
    ap.add_argument("--judges", type=int, default=3)
    ap.add_argument("--resamples", type=int, default=1000)
    args = ap.parse_args()
    rows = panel(args.rows, args.models, args.judges)
    one = rows.filter(pl.col("judge") == "j0")
    judges = [f"j{k}" for k in range(args.judges)]
    print(f"{one.height:,} rows per judge, {args.judges} judges, {rows.height:,} rows in all")

    t_one, _ = timed(lambda: metrics.compute_metrics(one, CATALOG))
    t_all, out = timed(lambda: metrics.compute_metrics(rows, CATALOG))
    assert set(out.get_column("judge").to_list()) == set(judges)
    t_agree, stats = timed(lambda: metrics.agreement_stats(rows, judges, resamples=args.resamples))
    t_py, (raw, kappa) = timed(lambda: python_pair(rows))
    ours = next(
        s
        for s in stats
        if s.statistic == "cohen_kappa" and s.judges == ("j0", "j1") and s.constraint_type == "all"
    )
    print(f"compute_metrics, one judge:            {t_one:7.2f} s (baseline)")
    print(f"compute_metrics, every judge apart:    {t_all:7.2f} s ({t_all / t_one:.2f}x the baseline)")
    print(
        f"agreement_stats, {len(stats)} statistics x {args.resamples} resamples: {t_agree:7.2f} s "
        f"({t_agree / t_one:.2f}x the baseline)"
    )
    print(f"plain-Python raw + kappa of one pair:  {t_py:7.2f} s ({t_py / t_agree:.2f}x agreement_stats)")
    print(f"(kappa j0-j1 over all benchmarks, Python: {kappa:.4f}; ours, {ours.benchmark}: {ours.value:.4f})")
    print(f"(raw agreement j0-j1, Python: {raw:.4f})")


if __name__ == "__main__":
    main()
