"""Performance of metrics/ on a large synthetic sweep. Prints timings and ratios; not a test.

    python perf/metrics_perf.py stream [--sizes 10e6,30e6,100e6] [--dir DIR]
    python perf/metrics_perf.py mixed [--rows 10000000] [--models 50] [--dir DIR]

`stream` (issue 25): InFoBench-shaped verdict rows in one Parquet file per size, generated in chunks;
per size, each in a child process of its own, the bare Polars streaming scans that compute DRFR and
coverage per model, split and constraint type, then `ifsweep metrics FILE` and `ifsweep.scores(FILE)`
(up to --ci-rows also with bootstrap intervals: `ifsweep metrics FILE --ci`, `ifsweep.scores(FILE, ci=True)`):
wall time, the ratio to the bare scans, and peak RSS (getrusage RUSAGE_CHILDREN of a wrapper whose only
child is the measured process). Targets: under 5x the bare scans, under 4 GB, flat as rows grow.

`mixed`, the older figures:
Generates verdict rows for all four benchmarks (same number of rows each), writes them as Parquet and
JSONL, then times: every metric function from Parquet and from JSONL (target < 10 s each), bootstrap
intervals with 1,000 resamples over 1M rows (< 30 s), every report for all models (< 5 s), and a
plain-Python loop over the same rows computing the core of the metrics (coverage, per-instance all()
and mean(), micro average) as the baseline.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ifsweep import metrics
from ifsweep.metrics import VERDICT_SCHEMA
from ifsweep.runner.commands.rundir import metric_catalog

BENCHES = ("followbench", "infobench", "cfbench", "eifbench")  # what synth() makes rows for
CATALOG = metric_catalog()[0]
CONSTRAINTS = 10  # rows per instance


def synth(rows: int, models: int, seed: int = 0) -> pl.DataFrame:
    """rows verdict rows; per benchmark and model, rows / (4 * models * 10) instances of 10 constraints."""
    per = rows // (len(BENCHES) * models * CONSTRAINTS)
    rng = np.random.default_rng(seed)
    parts = []
    for bench in BENCHES:
        n = models * per * CONSTRAINTS
        model = np.repeat(np.arange(models), per * CONSTRAINTS)
        inst = np.tile(np.repeat(np.arange(per), CONSTRAINTS), models)
        cidx = np.tile(np.arange(CONSTRAINTS), models * per)
        skill = 0.95 - 0.5 * model / max(models - 1, 1)
        satisfied = rng.random(n) < skill
        status = np.where(rng.random(n) < 0.0005, "unparsed", "ok")
        level = inst % 5 + 1
        df = pl.DataFrame(
            {
                "m": model,
                "i": inst,
                "c": cidx,
                "satisfied": satisfied,
                "status": status,
                "level": level,
            }
        ).with_columns(
            pl.lit("perf").alias("run"),
            pl.lit(bench).alias("benchmark"),
            pl.format("model-{}", pl.col("m")).alias("model"),
            pl.lit("judge-1").alias("judge"),
            pl.lit("paper").alias("scoring"),
            pl.format("{}-{}", pl.lit(bench[:2]), pl.col("i")).alias("instance_id"),
            pl.format("g{}", pl.col("i") // 5).alias("group_id"),
            (pl.col("level") if bench == "followbench" else pl.lit(None, pl.Int64)).alias("level"),
            (
                pl.format("cat{}", (pl.col("i") // 5) % 6)
                if bench == "followbench"
                else pl.lit(None, pl.String)
            ).alias("category"),
            (
                pl.format("scenario{}", pl.col("i") % 7)
                if bench == "eifbench"
                else pl.when(pl.col("i") % 2 == 0).then(pl.lit("easy")).otherwise(pl.lit("hard"))
                if bench in ("infobench", "cfbench")
                else pl.lit(None, pl.String)
            ).alias("split"),
            (pl.col("c") // 3 if bench == "eifbench" else pl.lit(None, pl.Int64)).alias("instruction_idx"),
            pl.col("c").alias("constraint_idx"),
            (
                pl.col("c").replace_strict(
                    {0: "Content", 1: "Format|Style", 2: "Linguistic", 3: "Number", 4: "Format"},
                    default="Content",
                    return_dtype=pl.String,
                )
                if bench == "infobench"
                else pl.lit(None, pl.String)
            ).alias("constraint_type"),
            (
                pl.when(pl.col("c") < 4).then(pl.lit("primary")).otherwise(pl.lit("secondary"))
                if bench == "cfbench"
                else pl.lit(None, pl.String)
            ).alias("priority"),
            pl.when(pl.col("c") % 3 == 0).then(pl.lit("rule")).otherwise(pl.lit("judge")).alias("source"),
        )
        df = df.with_columns(pl.when(pl.col("status") == "ok").then(pl.col("satisfied")).alias("satisfied"))
        parts.append(df.select(list(VERDICT_SCHEMA)).cast(pl.Schema(VERDICT_SCHEMA)))
        del df
    return pl.concat(parts)


def _from_file(fn: Callable[[pl.LazyFrame], pl.DataFrame], path: Path) -> pl.DataFrame:
    return fn(metrics.read_verdicts(path, columns=metrics.METRIC_COLUMNS))


def _load() -> str:
    """The 1-minute load average: on a shared 2-core machine it explains most of the spread."""
    return f"{os.getloadavg()[0]:.2f}"


def _cached(path: Path) -> str:
    """How much of `path` the page cache holds (util-linux fincore). This machine's memory reclaim evicts
    a freshly written file within a minute; a JSONL timing then includes reading it from disk."""
    if shutil.which("fincore") is None:
        return "unknown (no fincore)"
    out = subprocess.run(["fincore", "-nb", "-o", "RES", str(path)], capture_output=True, text=True)
    held = out.stdout.strip()
    return f"{int(held) / path.stat().st_size:.0%}" if held.isdigit() else "unknown"


def _read_through(path: Path) -> int:
    size = 0
    with path.open("rb") as f:
        while chunk := f.read(1 << 26):
            size += len(chunk)
    return size


def timed(label: str, fn: Callable[[], Any], results: dict[str, float]) -> Any:
    t0 = time.perf_counter()
    out = fn()
    results[label] = time.perf_counter() - t0
    print(f"  {label:<52} {results[label]:8.2f} s   (load {_load()})", flush=True)
    return out


def python_baseline(path: Path) -> tuple[float, float]:
    """The same core work as a plain loop: returns (seconds to load columns, seconds to loop)."""
    t0 = time.perf_counter()
    cols = pl.read_parquet(path, columns=["benchmark", "model", "instance_id", "satisfied", "status"])
    b, m, i, s, st = (cols.get_column(c).to_list() for c in cols.columns)
    del cols
    t1 = time.perf_counter()
    inst: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [1, 1, 0, 0])  # ok, all, sat, n
    for key_b, key_m, key_i, sat, status in zip(b, m, i, s, st, strict=True):
        acc = inst[(key_b, key_m, key_i)]
        if status != "ok":
            acc[0] = 0
            continue
        acc[1] &= int(sat)
        acc[2] += int(sat)
        acc[3] += 1
    out: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    for (key_b, key_m, _), (ok, all_sat, sat, n) in inst.items():
        acc2 = out[(key_b, key_m)]
        acc2[0] += 1  # seen
        if ok:
            acc2[1] += 1
            acc2[2] += all_sat
            acc2[3] += sat / n
            acc2[4] += sat
            acc2[5] += n
    summary = {k: (v[1] / v[0], v[2] / v[1], v[3] / v[1], v[4] / v[5]) for k, v in out.items() if v[1]}
    assert summary
    return t1 - t0, time.perf_counter() - t1


def polars_core(path: Path) -> int:
    """The baseline's exact work in Polars, for a like-for-like ratio."""
    inst = (
        pl.scan_parquet(path)
        .group_by("benchmark", "model", "instance_id")
        .agg(
            (pl.col("status") == "ok").all().alias("ok"),
            pl.col("satisfied").all().alias("all_sat"),
            pl.col("satisfied").sum().alias("sat"),
            pl.col("satisfied").count().alias("n"),
        )
    )
    out = inst.group_by("benchmark", "model").agg(
        pl.col("ok").mean().alias("coverage"),
        pl.col("all_sat").filter("ok").mean().alias("all_rate"),
        (pl.col("sat") / pl.col("n")).filter("ok").mean().alias("mean_rate"),
        (pl.col("sat").filter("ok").sum() / pl.col("n").filter("ok").sum()).alias("micro"),
    )
    return out.collect().height


INFOBENCH_TYPES = ("Content", "Linguistic", "Style", "Format", "Number", "Content|Format", "Style|Linguistic")


def infobench_chunk(models: int, first: int, count: int, seed: int) -> pl.DataFrame:
    """Instances first .. first + count - 1 of every model: instance i has 2 + i % 8 decomposed
    questions (5.5 on average, as InFoBench's 2,733 over 500), typed from INFOBENCH_TYPES, a third of
    them in the hard split; 0.05% of rows unparsed (their instance is dropped)."""
    rng = np.random.default_rng(seed)
    inst = np.arange(first, first + count)
    per = 2 + inst % 8
    i_rep = np.repeat(inst, per)
    c = np.concatenate([np.arange(k) for k in per])
    parts = []
    for m in range(models):
        n = len(i_rep)
        df = pl.DataFrame({"i": i_rep, "c": c, "sat": rng.random(n) < 0.95 - 0.5 * m / models})
        parts.append(
            df.with_columns(bad=pl.Series(rng.random(n) < 0.0005)).select(
                pl.lit("perf").alias("run"),
                pl.lit("infobench").alias("benchmark"),
                pl.lit(f"model-{m:03d}").alias("model"),
                pl.lit("judge-1").alias("judge"),
                pl.lit("paper").alias("scoring"),
                pl.format("ib-{}", pl.col("i")).alias("instance_id"),
                pl.lit(None, pl.String).alias("group_id"),
                pl.lit(None, pl.Int64).alias("level"),
                pl.lit(None, pl.String).alias("category"),
                pl.when(pl.col("i") % 3 == 0)
                .then(pl.lit("Hard_Set"))
                .otherwise(pl.lit("Easy_Set"))
                .alias("split"),
                pl.lit(None, pl.Int64).alias("instruction_idx"),
                pl.col("c").alias("constraint_idx"),
                pl.col("c")
                .mod(len(INFOBENCH_TYPES))
                .replace_strict(dict(enumerate(INFOBENCH_TYPES)), return_dtype=pl.String)
                .alias("constraint_type"),
                pl.lit(None, pl.String).alias("priority"),
                pl.when(pl.col("bad")).then(None).otherwise(pl.col("sat")).alias("satisfied"),
                pl.lit("judge").alias("source"),
                pl.when(pl.col("bad")).then(pl.lit("unparsed")).otherwise(pl.lit("ok")).alias("status"),
            )
        )
    return pl.concat(parts).cast(pl.Schema(VERDICT_SCHEMA))


def write_infobench_shaped(rows: int, models: int, path: Path) -> int:
    """About `rows` rows into one Parquet file, in chunks of 20,000 instances (each chunk a file,
    then one streaming copy into `path`): memory stays that of a chunk whatever `rows`."""
    instances = int(rows / models / 5.5)
    parts = path.with_suffix(".parts")
    parts.mkdir(exist_ok=True)
    for k, first in enumerate(range(0, instances, 20_000)):
        chunk = infobench_chunk(models, first, min(20_000, instances - first), seed=k)
        chunk.write_parquet(parts / f"{k:05d}.parquet")
    pl.scan_parquet(parts / "*.parquet").sink_parquet(path, row_group_size=1_000_000)
    shutil.rmtree(parts)
    return int(pl.scan_parquet(path).select(pl.len()).collect().item())


def bare_scans(path: Path) -> None:
    """The floor: DRFR per (model, split) and per (model, constraint type), and coverage per model
    (the share of instances with every row ok), as plain Polars streaming queries over the file."""
    lf = pl.scan_parquet(path)
    drfr = pl.col("satisfied").sum() / pl.col("satisfied").count()
    by_split = lf.group_by("model", "split").agg(drfr)
    by_type = lf.group_by("model", "constraint_type").agg(drfr)
    coverage = (
        lf.group_by("model", "instance_id")
        .agg((pl.col("status") == "ok").all().alias("ok"))
        .group_by("model")
        .agg(pl.col("ok").mean())
    )
    for q in (by_split, by_type, coverage):
        q.collect(engine="streaming")


def scores_child(path: Path) -> None:
    import ifsweep

    assert ifsweep.scores(path).height


def scores_ci_child(path: Path) -> None:
    import ifsweep

    assert ifsweep.scores(path, ci=True).get_column("ci_low").drop_nulls().len()


def eager_equals_child(path: Path) -> None:
    """Today's in-memory path (the file read into a frame first) gives the streaming result exactly,
    bootstrap intervals included."""
    lazy = metrics.compute_metrics(pl.scan_parquet(path), CATALOG, ci=True)
    eager = metrics.compute_metrics(pl.read_parquet(path), CATALOG, ci=True)
    assert lazy.equals(eager), "streaming and in-memory metrics differ"


CHILDREN: dict[str, Callable[[Path], None]] = {
    "bare": bare_scans,
    "scores": scores_child,
    "scores-ci": scores_ci_child,
    "equal": eager_equals_child,
}

# A wrapper whose only child is the measured command: its RUSAGE_CHILDREN peak is that command's.
_WRAPPER = (
    "import resource, subprocess, sys, time; t = time.perf_counter(); "
    "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode; "
    "print(rc, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def measured(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in GB) of `cmd` run to completion in a process of its own."""
    out = subprocess.run([sys.executable, "-c", _WRAPPER, *cmd], capture_output=True, text=True, check=True)
    rc, secs, kb = out.stdout.split()
    if rc != "0":  # the command's stderr passed through the wrapper's: show how it ended
        raise SystemExit(f"{' '.join(cmd)}: exit {rc}\n{out.stderr[-3000:]}")
    return float(secs), int(kb) / 1e6


def stream(args: argparse.Namespace) -> None:
    work = args.dir or Path(tempfile.mkdtemp(prefix="metrics_stream_"))
    work.mkdir(parents=True, exist_ok=True)
    me = [sys.executable, str(Path(__file__).resolve()), "child"]
    print(f"polars {pl.__version__}, {os.cpu_count()} cores, work dir {work}, load {_load()}")
    print(f"{'rows':>12} {'what':<30} {'seconds':>8} {'x bare':>7} {'peak GB':>8}  load")
    for size in (int(float(x)) for x in args.sizes.split(",")):
        path = work / f"infobench_{size}.parquet"
        if not path.exists():
            t0 = time.perf_counter()
            n = write_infobench_shaped(size, args.models, path)
            took = time.perf_counter() - t0
            print(f"  generated {n:,} rows in {took:.1f} s ({path.stat().st_size / 1e6:.0f} MB)")
        os.sync()
        runs = [("bare streaming scans", [*me, "bare", str(path)])]
        runs += [("ifsweep metrics FILE", ["ifsweep", "metrics", str(path)])]
        runs += [("ifsweep.scores(FILE)", [*me, "scores", str(path)])]
        if size <= args.ci_rows:
            runs += [("ifsweep metrics FILE --ci", ["ifsweep", "metrics", str(path), "--ci"])]
            runs += [("ifsweep.scores(FILE, ci=True)", [*me, "scores-ci", str(path)])]
        # The bare scans run before and after the others, the faster of the two the floor: on a shared
        # machine a single timing moves 2x with the load.
        runs.append(runs[0])
        figures = [(label, *measured(cmd)) for label, cmd in runs]
        bare = min(figures[0][1], figures[-1][1])
        for label, secs, gb in figures:
            print(f"{size:>12,} {label:<30} {secs:8.2f} {secs / bare:7.2f} {gb:8.2f}  {_load()}", flush=True)
        if size <= 10_000_000:
            measured([*me, "equal", str(path)])
            print(f"{size:>12,} streaming result == in-memory result, intervals too (over read_parquet)")
    if args.dir is None:
        shutil.rmtree(work)


def mixed(args: argparse.Namespace) -> None:
    work = args.dir or Path(tempfile.mkdtemp(prefix="metrics_perf_"))
    work.mkdir(parents=True, exist_ok=True)
    r: dict[str, float] = {}
    print(f"polars {pl.__version__}, threads {pl.thread_pool_size()}, work dir {work}, load {_load()}")
    print(f"generate {args.rows:,} rows, {args.models} models, 4 benchmarks")
    df = timed("generate", lambda: synth(args.rows, args.models), r)
    pq, jl = work / "verdicts.parquet", work / "verdicts.jsonl"
    timed("write Parquet", partial(df.write_parquet, pq, row_group_size=1_000_000), r)
    timed("write JSONL", partial(df.write_ndjson, jl), r)
    print(
        f"  rows {df.height:,}; Parquet {pq.stat().st_size / 1e6:,.1f} MB; "
        f"JSONL {jl.stat().st_size / 1e6:,.0f} MB"
    )
    del df
    # Writing leaves about 3 GB of dirty pages that the kernel flushes over the next tens of seconds; a
    # timing taken meanwhile pays for that writeback (measured: the first JSONL compute_metrics took
    # 11-12 s with 8 s of system time, then 7.9 s in fresh processes once the flush was done). Flush
    # now, outside every timing.
    timed("flush the written files to disk (os.sync; not part of any figure)", os.sync, r)

    fns: dict[str, Callable[[pl.LazyFrame], pl.DataFrame]] = {
        "compute_metrics (all benchmarks + coverage)": partial(metrics.compute_metrics, catalog=CATALOG),
        **{
            f"benchmark_metrics {name}": partial(metrics.benchmark_metrics, benchmark=CATALOG.get(name))
            for name in BENCHES
        },
        "coverage_metrics": metrics.coverage_metrics,
    }
    print("metrics from Parquet / JSONL (target < 10 s each)")
    result = None
    for fmt, path in (("parquet", pq), ("jsonl", jl)):
        if fmt == "jsonl":
            # Timings below are of parsing and computing, not of the disk: read the file once first
            # (timed, and the page cache's share printed) so every run starts from the same state.
            print(f"  (page cache holds {_cached(jl)} of the JSONL file)")
            timed("jsonl: read the file's bytes once (warm the page cache)", partial(_read_through, jl), r)
            print(f"  (page cache holds {_cached(jl)} of the JSONL file)")
        for name, fn in fns.items():
            out = timed(f"{fmt}: {name}", partial(_from_file, fn, path), r)
            if name.startswith("compute_metrics"):
                if result is None:
                    result = out
                else:
                    assert out.equals(result), "Parquet and JSONL disagree"
    assert result is not None
    timed(
        "jsonl: parse the metric columns only (no metrics)",
        partial(
            lambda path: metrics.read_verdicts(path, columns=metrics.METRIC_COLUMNS).collect().height, jl
        ),
        r,
    )
    timed(
        "jsonl, all 16 columns read: compute_metrics",
        partial(lambda path: metrics.compute_metrics(metrics.read_verdicts(path), CATALOG), jl),
        r,
    )
    print(f"  {result.height:,} metric rows")

    print(f"bootstrap, {args.resamples} resamples over {args.boot_rows:,} rows (target < 30 s)")
    small = synth(args.boot_rows, args.models, seed=1)
    with_ci = timed(
        "compute_metrics(ci=True)",
        partial(metrics.compute_metrics, small, CATALOG, ci=True, resamples=args.resamples),
        r,
    )
    timed(
        "paired_differences cfbench PSR (all pairs)",
        partial(metrics.paired_differences, small, CATALOG, "cfbench", "PSR", resamples=args.resamples),
        r,
    )
    del small

    print(f"reports for {args.models} models (target < 5 s)")
    calls = pl.DataFrame(
        {
            "kind": ["generation", "judgment"] * (args.models * 4 * 50),
            "model": [f"model-{i % args.models}" for i in range(args.models * 4 * 100)],
            "judge": ["judge-1"] * (args.models * 4 * 100),
            "benchmark": [BENCHES[(i // args.models) % 4] for i in range(args.models * 4 * 100)],
            "status": ["ok"] * (args.models * 4 * 100),
            "cost_usd": np.random.default_rng(2).random(args.models * 4 * 100) / 100,
            "input_tokens": [100] * (args.models * 4 * 100),
            "output_tokens": [50] * (args.models * 4 * 100),
            "latency_s": np.random.default_rng(3).random(args.models * 4 * 100),
            "attempts": [1] * (args.models * 4 * 100),
            "rate_limited": [0] * (args.models * 4 * 100),
            "error_kind": [None] * (args.models * 4 * 100),
        }
    )

    def reports() -> int:
        a = metrics.analytics(calls, with_ci)
        texts = [
            metrics.render_table(with_ci, CATALOG),
            metrics.render_json(with_ci),
            metrics.render_csv(with_ci),
            metrics.render_markdown(with_ci, CATALOG, a, work / "md"),
            metrics.render_html(with_ci, CATALOG, a, None),
        ]
        return sum(len(t) for t in texts)

    size = timed("analytics + table + json + csv + markdown + html", reports, r)
    print(f"  {size / 1e6:.1f} MB of report text")

    print("plain-Python baseline over the same rows (core work only: coverage, all(), mean(), micro)")
    load, loop = python_baseline(pq)
    r["python: load columns"], r["python: loop"] = load, loop
    print(f"  {'python: load columns to lists':<52} {load:8.2f} s")
    print(f"  {'python: loop':<52} {loop:8.2f} s")
    timed("polars: the same core work from Parquet", partial(polars_core, pq), r)
    core = r["polars: the same core work from Parquet"]
    print(
        f"ratios: python (load + loop) / polars core = {(load + loop) / core:.1f}x; loop alone / polars core "
        f"= {loop / core:.1f}x"
    )
    key = "parquet: compute_metrics (all benchmarks + coverage)"
    print(
        f"ratios: python loop / polars compute_metrics (Parquet) = {loop / r[key]:.1f}x; "
        f"(load + loop) / polars = {(load + loop) / r[key]:.1f}x"
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(f"peak RSS {peak:.2f} GB; load average (1, 5, 15 min) at the end {os.getloadavg()}")
    if args.dir is None:
        shutil.rmtree(work)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    m = sub.add_parser("mixed", help="all four benchmarks: every metric function, bootstrap, reports")
    m.add_argument("--rows", type=int, default=10_000_000)
    m.add_argument("--models", type=int, default=50)
    m.add_argument("--boot-rows", type=int, default=1_000_000)
    m.add_argument("--resamples", type=int, default=1000)
    m.add_argument("--dir", type=Path, default=None, help="work directory (default: a temporary one)")
    st = sub.add_parser("stream", help="InFoBench-shaped rows at growing sizes: time, ratio and peak RSS")
    st.add_argument("--sizes", default="10e6,30e6,100e6", help="row counts, comma-separated")
    st.add_argument("--models", type=int, default=50)
    st.add_argument("--ci-rows", type=float, default=30e6, help="with intervals too up to this size (0: no)")
    st.add_argument("--dir", type=Path, default=None, help="keep (and reuse) the generated files here")
    ch = sub.add_parser("child", help=argparse.SUPPRESS)
    ch.add_argument("what", choices=sorted(CHILDREN))
    ch.add_argument("path", type=Path)
    args = ap.parse_args()
    if args.mode == "child":
        CHILDREN[args.what](args.path)
    elif args.mode == "stream":
        stream(args)
    else:
        mixed(args)


if __name__ == "__main__":
    main()
