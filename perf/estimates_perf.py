"""What the estimates of a partial run (metrics/sampling/estimates.py, issue 34 item 2) add to `ifsweep
report` on a full-size partial run, in one run: the real CLI in a child process (wall, peak RSS), with
the estimates section and without it, beside a bare Polars scan of the same shards.

The partial run is cut from a complete full-size one (the 40-model run, `perf/sweep_perf.py fullscale
--sizes 40 --runs 1 --keep-run /work/big/full40`), which is only read: its manifest is copied, and its
shards' records are kept for the first 25-35% of each benchmark's units in the seeded order
(runner/engine/order.py, the order the sweep walks), model k of K stopping at 25 + 10 k / (K - 1) % (as
models stopped at different points: the paired differences take the units both have). The run without
the estimates is the same shards (a symlink) under a manifest that says `order = "file"`, for which the
report makes none (runner/commands/rundir.py, partial_estimates): everything else is the same reading.

    python perf/estimates_perf.py [--source /work/big/full40] [--dest /work/big/partial30] [--rebuild]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import polars as pl
from reading_perf import BARE, _load, child, precompile, run_size

from ifsweep.runner.engine.order import Unit, seeded_units

_FIELDS = {"kind": pl.String, "model": pl.String, "benchmark": pl.String, "instance_id": pl.String}


def _prefixes(manifest: dict[str, object], models: list[str]) -> dict[tuple[str, str], set[str]]:
    """Per (model, benchmark), the unit ids it keeps: a prefix of the benchmark's seeded order."""
    benches = manifest["benchmarks"]
    assert isinstance(benches, dict)
    seed = int(manifest.get("order", {}).get("seed", 0))  # type: ignore[union-attr]
    out = {}
    for bench, entry in benches.items():
        units = [Unit(u, h, ()) for h, ids in entry["strata"].items() for u in ids]
        order = [u.unit_id for u in seeded_units(units, seed, bench)]
        for k, model in enumerate(models):
            share = 0.25 + 0.10 * k / max(len(models) - 1, 1)
            out[(model, bench)] = set(order[: round(share * len(order))])
    return out


def build(source: Path, dest: Path) -> None:
    """`dest`: `source`'s manifest and the records of each model's prefix of units (module docstring)."""
    manifest = json.loads((source / "manifest.json").read_text())
    models = list(manifest["model_order"])
    keep = _prefixes(manifest, models)
    dest.mkdir(parents=True)
    shutil.copy(source / "manifest.json", dest / "manifest.json")
    (dest / "shards").mkdir()
    for shard in sorted((source / "shards").glob("*.jsonl")):
        # Verdict rows name their unit (group_id); a generation names its instance, whose unit the
        # verdicts of the same instance give.
        frame = pl.read_ndjson(shard, schema={**_FIELDS, "group_id": pl.String})
        unit_of = dict(
            frame.filter(pl.col("group_id").is_not_null())
            .select(pl.concat_str("benchmark", "instance_id", separator="\0"), "group_id")
            .unique()
            .iter_rows()
        )
        kept = 0
        with open(shard, "rb") as src, open(dest / "shards" / shard.name, "wb") as out:
            for line, (model, bench, inst, gid) in zip(
                src, frame.select("model", "benchmark", "instance_id", "group_id").iter_rows(), strict=True
            ):
                unit = gid if gid is not None else unit_of.get(f"{bench}\0{inst}", inst)
                if model is None or bench is None or unit in keep.get((model, bench), ()):
                    out.write(line)
                    kept += 1
        print(f"  {shard.name}: kept {kept:,} of {frame.height:,} records")


def without_estimates(run: Path) -> Path:
    """The same shards under a manifest of file order: the report makes no estimates for it."""
    bare = run.with_name(run.name + "-file-order")
    shutil.rmtree(bare, ignore_errors=True)
    bare.mkdir()
    (bare / "shards").symlink_to((run / "shards").resolve())
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["order"] = {"kind": "file"}
    (bare / "manifest.json").write_text(json.dumps(manifest))
    return bare


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", type=Path, default=Path("/work/big/full40"))
    ap.add_argument("--dest", type=Path, default=Path("/work/big/partial30"))
    ap.add_argument("--rebuild", action="store_true", help="cut the partial run again")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each command (the machine is shared)")
    ap.add_argument(
        "--blas-threads",
        type=int,
        default=0,
        help="OPENBLAS_NUM_THREADS of the children (0: OpenBLAS's own choice, every core)",
    )
    args = ap.parse_args()
    if args.blas_threads:
        # The children inherit it (reading_perf._env copies this environment).
        os.environ["OPENBLAS_NUM_THREADS"] = str(args.blas_threads)
    if args.rebuild:
        shutil.rmtree(args.dest, ignore_errors=True)
    if not args.dest.exists():
        t = time.perf_counter()
        build(args.source, args.dest)
        print(f"cut {args.dest} from {args.source} in {time.perf_counter() - t:.0f} s")
    bare = without_estimates(args.dest)
    blas = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    print(f"{run_size(args.dest)} ({_load()}; OPENBLAS_NUM_THREADS {blas})")
    precompile(None)
    cli = [sys.executable, "-m", "ifsweep", "report"]
    # One report of each first, untimed: the reading keeps its digest (compact/) in the run
    # directory, so both are then timed from the same state.
    child([*cli, str(bare)])
    child([*cli, str(args.dest)])
    for _ in range(args.repeat):
        wall, mb, _out = child([sys.executable, "-c", BARE, str(args.dest)])
        print(f"  bare Polars scan of the shards (4 fields, by kind): {wall:.2f} s, {mb:.0f} MB")
        w0, m0, out0 = child([*cli, str(bare)])
        w1, m1, out1 = child([*cli, str(args.dest)])
        assert "Estimates for the planned population" not in out0, "the file-order copy made estimates"
        assert "Estimates for the planned population" in out1, "the partial run's report has no estimates"
        print(f"  report without the estimates (file order): {w0:.2f} s, {m0:.0f} MB")
        print(
            f"  report with the estimates:                 {w1:.2f} s, {m1:.0f} MB "
            f"(+{w1 - w0:.2f} s, +{m1 - m0:.0f} MB; {_load()})"
        )
    keep = args.dest.with_name(args.dest.name + "-report.txt")
    keep.write_text(out1)
    print(f"  the report with the estimates kept in {keep}")


if __name__ == "__main__":
    main()
