"""What the one reading of a run (runner/store/current.py) costs its readers, against the passes they
make anyway, in one run on one synthetic run directory (a manifest with a plan, N verdict records of
20 models, one judge; a quarter of the instances beyond the plan, as after a lowered `limit`).

- `status`: status_report (one pass over the shards, the reading built from it) vs the bare pass it
  cannot avoid (scan_shards decoding every record).
- `report`: read_run (the rows scanned once, their slots grouped, the plan's filter) vs
  scan_verdict_rows collected alone; from the shards and from the compacted Parquet.

    python perf/reading_perf.py [--verdicts 200000]

Prints one line per figure and the ratios; the machine is shared, so run it twice.

`--run-dir DIR` (issue 35 item 3) measures the commands themselves on a real run directory (the
full-size one: `perf/sweep_perf.py fullscale --sizes 40 --runs 1 --keep-run DIR`), each the real CLI in
a child process, its wall time and peak RSS (VmHWM) printed with the run's size: the sweep's digest
keeper (one round over the whole run: the child process a running sweep starts every 16 MB of
shards), `ifsweep status` with no digest kept (it builds it) and with it kept, `ifsweep report`,
`ifsweep view` (until its URL, until its overview says "index whole"), beside a bare Polars scan of
the same shards (`pl.scan_ndjson` of a few fields, grouped by kind) measured the same way. With
`--before PKG` (a revision laid out as the package, as sweep_perf's `_revision_package` makes it) the
same commands of that revision run too, and their outputs are compared with this tree's.

    python perf/reading_perf.py --run-dir /work/big/full40 [--before /work/big/rev-848b8ed/pkg]
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ifsweep.runner.store.compact import compact, scan_verdict_rows
from ifsweep.runner.store.current import read_run, reading_of
from ifsweep.runner.store.manifest import BenchmarkEntry, Manifest, ModelEntry, read_manifest, write_manifest
from ifsweep.runner.store.shards import RunStore, record_key, scan_shards
from ifsweep.runner.view.pages import INDEXING_REFRESH_S as VIEW_REFRESH_S
from ifsweep.runner.watch.status import status_report

MODELS = 20


def build(run: Path, n: int) -> None:
    instances = n // MODELS
    planned = tuple(f"i{k}" for k in range(instances * 3 // 4))
    write_manifest(
        run,
        Manifest(
            ifsweep_version="perf",
            config_hash="h",
            benchmarks={"followbench": BenchmarkEntry("d", "t", "paper", instances=planned)},
            models={f"m{i}": ModelEntry("openai/x") for i in range(MODELS)},
            judge=None,
            judges={"j": ModelEntry("openai/j")},
            judge_order=("j",),
            model_order=tuple(f"m{i}" for i in range(MODELS)),
            benchmark_order=("followbench",),
        ),
    )
    with RunStore.open(run, flush_records=10_000, fsync=False) as s:
        for i in range(n):
            s.append(
                {
                    "v": 2,
                    "kind": "verdict",
                    "key": record_key(("v", i)),
                    "basis": "b",
                    "status": "ok",
                    "model": f"m{i % MODELS}",
                    "judge": "j",
                    "benchmark": "followbench",
                    "instance_id": f"i{i // MODELS}",
                    "group_id": f"g{i // 100}",
                    "level": i % 5 + 1,
                    "category": "content",
                    "split": None,
                    "gen_key": record_key(("g", i)),
                    "scoring": "paper",
                    "rows": [
                        {
                            "constraint_idx": c,
                            "instruction_idx": None,
                            "constraint_type": "format",
                            "priority": None,
                            "satisfied": (i + c) % 3 != 0,
                            "source": "judge",
                            "status": "ok",
                        }
                        for c in range(5)
                    ],
                    "ts": 1.0,
                }
            )


def timed(f: object) -> float:
    t = time.perf_counter()
    f()  # type: ignore[operator]
    return time.perf_counter() - t


def _hwm_kib(pid: int) -> int:
    try:
        found = re.search(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    except OSError:
        return 0
    return int(found.group(1)) if found else 0


def _env(pkg: Path | None) -> dict[str, str]:
    """A child's environment: bytecode cached as an installed package has it (a shell that sets
    PYTHONDONTWRITEBYTECODE compiles every module at every start: seconds on a loaded machine)."""
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if pkg is not None:
        env["PYTHONPATH"] = str(pkg)
    return env


def precompile(pkg: Path | None) -> None:
    """Compile the package's modules once, as pip does at install, before anything is timed."""
    here = Path(__file__).resolve().parents[1]
    roots = [here / d for d in ("api", "runner", "metrics", "providers", "benchmarks", "simulator")]
    if pkg is not None:
        roots += [p.resolve() for p in (pkg / "ifsweep").iterdir() if p.is_dir()]
    cmd = [sys.executable, "-m", "compileall", "-q", *map(str, roots)]
    subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL, env=_env(None))


def child(cmd: list[str], pkg: Path | None = None) -> tuple[float, float, str]:
    """(wall s, peak RSS MB, stdout) of one command in a child process (`pkg` first on its path)."""
    env = _env(pkg)
    t = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, env=env)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, _hwm_kib(proc.pid))
            time.sleep(0.02)
        wall = time.perf_counter() - t
        out.seek(0)
        return wall, peak / 1024, out.read()


BARE = """
import sys, polars as pl
from pathlib import Path
files = sorted(str(p) for p in Path(sys.argv[1], "shards").glob("*.jsonl"))
schema = {"kind": pl.String, "key": pl.String, "model": pl.String, "cost_usd": pl.Float64}
print(pl.scan_ndjson(files, schema=schema).group_by("kind").agg(pl.len(), pl.col("cost_usd").sum()).collect())
"""


def view_child(run: Path, pkg: Path | None = None) -> tuple[float, float, float]:
    """`ifsweep view RUN --port 0`: (s until its URL, s until its overview says "index whole", peak MB)."""
    env = _env(pkg)
    t = time.perf_counter()
    cmd = [sys.executable, "-m", "ifsweep", "view", str(run), "--port", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert proc.stdout is not None
    found = re.search(r"http://127\.0\.0\.1:(\d+)/", proc.stdout.readline())
    url_s = time.perf_counter() - t
    try:
        if found is None:
            raise RuntimeError("the viewer printed no URL")
        conn = http.client.HTTPConnection("127.0.0.1", int(found.group(1)), timeout=300)
        while True:
            conn.request("GET", "/")
            body = conn.getresponse().read()
            if b"index whole" in body:
                break
            # As often as the page itself reloads while indexing (a browser's load, no more: four
            # overviews a second made the first pass wait for the lock, 22 s instead of 18).
            time.sleep(VIEW_REFRESH_S)
        whole_s = time.perf_counter() - t
        conn.close()
        return url_s, whole_s, _hwm_kib(proc.pid) / 1024
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def _load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def run_size(run: Path) -> str:
    files = sorted((run / "shards").glob("*.jsonl"))
    size = sum(f.stat().st_size for f in files)
    lines = 0
    for f in files:
        with open(f, "rb") as fh:
            while chunk := fh.read(16 << 20):
                lines += chunk.count(b"\n")
    return f"{run}: {len(files)} shard files, {size / 1e6:.0f} MB, {lines:,} records"


def commands(run: Path, before: Path | None, only: set[str]) -> None:
    """Each command on `run`, as a child process, with its wall time and peak RSS."""
    print(f"{run_size(run)} ({_load()})")
    precompile(before)
    cli = [sys.executable, "-m", "ifsweep"]
    wall, bare_mb, _ = child([sys.executable, "-c", BARE, str(run)])
    print(f"  bare Polars scan of the shards (4 fields, by kind): {wall:.2f} s, {bare_mb:.0f} MB")
    outputs: dict[str, dict[str, str]] = {"this tree": {}, "before": {}}
    if "status" in only:
        # status first builds the digest itself (status-cold); the others find it, as after a sweep.
        shutil.rmtree(run / "compact" / "digest", ignore_errors=True)
        # What a running sweep's keeper does (runner/store/keeping.py), here one round over the whole
        # run: the child process's cost, never the sweep's.
        w, m, _ = child([sys.executable, "-m", "ifsweep.runner.store.digest", str(run)])
        print(f"  digest keeper, one round over the whole run (a child process): {w:.2f} s, {m:.0f} MB")
        shutil.rmtree(run / "compact" / "digest", ignore_errors=True)
    for label, name, args in (
        ("status, no digest kept (builds it)", "status-cold", ["status", str(run)]),
        ("status", "status", ["status", str(run)]),
        ("status --json", "status-json", ["status", str(run), "--json"]),
        ("report", "report", ["report", str(run)]),
        ("report --format json", "report-json", ["report", str(run), "--format", "json"]),
    ):
        if name.split("-")[0] not in only:
            continue
        w, m, out = child([*cli, *args])
        outputs["this tree"][name] = out
        print(
            f"  {label}: {w:.2f} s, {m:.0f} MB "
            f"(the bare scan's {wall:.2f} s, {bare_mb:.0f} MB: {w / wall:.2f}x its time)"
        )
        if before is not None and name != "status-cold":
            bw, bm, bout = child([*cli, *args], before)
            outputs["before"][name] = bout
            same = "same output" if bout == out else "OUTPUT DIFFERS"
            print(f"    before ({before}): {bw:.2f} s, {bm:.0f} MB; {same}")
    print(f"  ({_load()})")
    if "view" in only:
        url_s, whole_s, mb = view_child(run)
        print(
            f"  view: URL after {url_s:.2f} s, index whole after {whole_s:.1f} s, peak {mb:.0f} MB "
            f"({_load()})"
        )
    keep = Path(tempfile.gettempdir()) / "reading-perf-outputs"
    keep.mkdir(exist_ok=True)
    for who, outs in outputs.items():
        for name, text in outs.items():
            (keep / f"{who.replace(' ', '-')}.{name}.txt").write_text(text)
    print(f"  outputs kept in {keep}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--verdicts", type=int, default=200_000)
    ap.add_argument("--run-dir", type=Path, help="measure the commands on this run directory")
    ap.add_argument("--before", type=Path, help="with --run-dir: also this package (a PYTHONPATH entry)")
    ap.add_argument("--only", default="status,report,view", help="with --run-dir: these commands")
    args = ap.parse_args()
    if args.run_dir is not None:
        commands(args.run_dir, args.before, set(args.only.split(",")))
        return
    n = args.verdicts
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        build(run, n)
        bare = timed(lambda: sum(1 for sl in scan_shards(run, [], kinds=("verdict",)) if sl.record()))
        status = timed(lambda: status_report(run))
        print(f"{n:,} verdicts of {MODELS} models")
        print(
            f"  status: status_report {status:.2f} s, the bare decoding pass {bare:.2f} s: "
            f"{status / bare:.2f}x"
        )
        facts = [
            (str(r["benchmark"]), str(r["model"]), r["judge"], str(r["instance_id"]), False)
            for r in (sl.record() for sl in scan_shards(run, [], kinds=("verdict",)))
        ]
        manifest = read_manifest(run)
        core = timed(lambda: reading_of(run, manifest, facts))
        print(f"  of which the reading's core (reading_of over {len(facts):,} verdicts): {core:.2f} s")
        for where in ("shards", "Parquet"):
            if where == "Parquet":
                compact(run)
            rows = timed(lambda: scan_verdict_rows(run).collect())
            reading = timed(lambda: read_run(run).rows.collect())  # type: ignore[union-attr]
            print(
                f"  report from {where}: read_run + its rows {reading:.2f} s, the rows alone {rows:.2f} s: "
                f"{reading / rows:.2f}x"
            )
        r = read_run(run)
        print(f"  check: planned {r.planned:,}, done {r.done:,}, beyond the plan {r.beyond:,}")


if __name__ == "__main__":
    main()
