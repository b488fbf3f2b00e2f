"""`ifsweep view` on a large run: how long its pages take and how much memory it holds.

A generated run of 40 models x 3,000 CFBench-shaped instances judged by a panel of two judges (one
generation, one call per judge and one verdict per judge for each pair: 600k records, written directly
through RunStore), compacted to Parquet as `ifsweep compact` does. The viewer runs as the real command
in a subprocess; pages are fetched over HTTP on 127.0.0.1 and timed from request to last byte.

Reported: start-up (until the URL is printed: the index is built after it, on a worker thread), the
first overview, the slowest overview and list page while the index is built, the time until the pages
say the index is whole, then (on the whole index) the overview, a list page (first page, a filtered
one, a deep page, the text search), an instance page, and the server's peak resident memory (VmHWM).
Then the index build alone, in this process (`RunIndex.build`). Baseline, measured in the same run: the
list page made the plain way, by reading every shard for the (benchmark, model) it shows.

    python perf/view_perf.py                      # 40 models x 3,000 instances
    python perf/view_perf.py --models 4 --instances 500
"""

from __future__ import annotations

import argparse
import http.client
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from ifsweep.runner.store.compact import compact
from ifsweep.runner.store.shards import RunStore, record_key, scan_shards
from ifsweep.runner.view.index import RunIndex

WORDS = [
    "the",
    "answer",
    "keeps",
    "each",
    "rule",
    "of",
    "the",
    "request",
    "and",
    "states",
    "its",
    "reasons",
    "in",
    "plain",
    "words",
]
FORMAT = "%E6%A0%BC%E5%BC%8F%E7%BA%A6%E6%9D%9F"  # 格式约束, percent-encoded
TYPES = ("内容约束", "数值约束", "格式约束", "风格约束")


def _answer(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(60, 160)))


def _records(m: int, i: int, judges: int, rng: random.Random) -> list[dict[str, Any]]:
    model, iid = f"m{m}", f"syn-{i}"
    gen_key = record_key(["gen", m, i])
    call = {"input_tokens": 400, "output_tokens": 120, "cached_tokens": 0, "latency_s": 0.8, "attempts": 1}
    out: list[dict[str, Any]] = [
        {"v": 2, "kind": "generation", "key": gen_key, "status": "ok", "text": _answer(rng), **call}
        | {"cost_usd": 0.0004, "model": model, "benchmark": "cfbench", "instance_id": iid, "ts": 1.0}
    ]
    n = 3 + i % 3
    for j in range(judges):
        sat = [rng.random() < 0.7 for _ in range(n)]
        reply = "\n".join(f"{TYPES[k % 4]}\t{int(s)}" for k, s in enumerate(sat))
        out.append(
            {"v": 2, "kind": "judgment", "key": record_key(["j", j, m, i]), "status": "ok", "text": reply}
            | call
            | {
                "cost_usd": 0.0002,
                "judge": f"j{j}",
                "model": model,
                "benchmark": "cfbench",
                "instance_id": iid,
            }
            | {"task_idx": 0, "turn_idx": 0, "ask": 0, "parse": "ok", "ts": 1.0}
        )
        rows = [
            {"constraint_idx": k, "instruction_idx": None, "constraint_type": TYPES[k % 4]}
            | {
                "priority": "primary" if k == 0 else "secondary",
                "satisfied": s,
                "source": "judge",
                "status": "ok",
            }
            for k, s in enumerate(sat)
        ]
        out.append(
            {"v": 2, "kind": "verdict", "key": record_key(["v", j, m, i]), "status": "ok", "model": model}
            | {"judge": f"j{j}", "benchmark": "cfbench", "instance_id": iid, "group_id": iid, "level": None}
            | {
                "category": "文学",
                "split": "easy" if i % 2 else "hard",
                "gen_key": gen_key,
                "scoring": "paper",
            }
            | {"rows": rows, "skipped": 0, "ts": 1.0}
        )
    return out


def generate(run: Path, models: int, instances: int, judges: int) -> int:
    rng = random.Random(0)
    store = RunStore.open(run, write_through=False, fsync=False, flush_records=20000)
    n = 0
    try:
        for m in range(models):
            for i in range(instances):
                for rec in _records(m, i, judges, rng):
                    store.append(rec)
                    n += 1
    finally:
        store.close()
    return n


def fetch(conn: http.client.HTTPConnection, path: str, ok: tuple[int, ...] = (200,)) -> tuple[float, bytes]:
    t = time.perf_counter()
    conn.request("GET", path)
    resp = conn.getresponse()
    body = resp.read()
    took = time.perf_counter() - t
    if resp.status not in ok:
        raise RuntimeError(f"GET {path}: {resp.status}")
    return took, body


def peak_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmHWM:\s+(\d+) kB", status)
    return int(found.group(1)) if found else -1


def plain_list(run: Path, model: str) -> tuple[float, int]:
    """The baseline: one (benchmark, model)'s verdicts found by reading every shard."""
    t = time.perf_counter()
    n = 0
    for sl in scan_shards(run, kinds=("verdict",)):
        rec = orjson.loads(sl.line)
        if rec["model"] == model and rec["benchmark"] == "cfbench":
            n += 1
    return time.perf_counter() - t, n


def while_indexing(conn: http.client.HTTPConnection, model: str, out: dict[str, float]) -> None:
    """Pages fetched while the index is built, until one says it is whole: the slowest of each."""
    t = time.perf_counter()
    out["first_overview_s"], body = fetch(conn, "/")
    out["indexing_overview_max_s"] = out["indexing_list_max_s"] = 0.0
    while b"indexing: " in body:
        took, _ = fetch(conn, f"/list/cfbench/{model}", (200, 404))  # 404: that model not read yet
        out["indexing_list_max_s"] = max(out["indexing_list_max_s"], took)
        time.sleep(0.5)
        took, body = fetch(conn, "/")
        out["indexing_overview_max_s"] = max(out["indexing_overview_max_s"], took)
    out["index_whole_after_s"] = out["startup_s"] + time.perf_counter() - t


def measure(run: Path, model: str, instances: int) -> dict[str, float]:
    t = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ifsweep", "view", str(run), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    if found is None:
        proc.kill()
        raise RuntimeError(f"the viewer did not start: {line!r} {proc.communicate()[1]}")
    out = {"startup_s": time.perf_counter() - t}
    conn = http.client.HTTPConnection("127.0.0.1", int(found.group(1)), timeout=120)
    try:
        while_indexing(conn, model, out)
        pages = {
            "overview_whole_s": "/",
            "overview_again_s": "/",
            "list_first_page_s": f"/list/cfbench/{model}",
            "list_page_again_s": f"/list/cfbench/{model}",
            "list_failed_type_s": f"/list/cfbench/{model}?failed=1&type={FORMAT}",
            "list_failed_type_again_s": f"/list/cfbench/{model}?failed=1&type={FORMAT}",
            "list_disagree_s": f"/list/cfbench/{model}?disagree=1",
            "list_page_40_s": f"/list/cfbench/{model}?page=40",
            "list_text_search_s": f"/list/cfbench/{model}?q=reasons+plain",
            "instance_s": f"/instance/cfbench/{model}/syn-{instances // 2}",
        }
        for name, path in pages.items():
            out[name], _ = fetch(conn, path)
        out["peak_rss_mib"] = peak_kib(proc.pid) / 1024
    finally:
        conn.close()
        proc.terminate()
        proc.communicate(timeout=30)
    t = time.perf_counter()
    RunIndex.build(run).close()
    out["index_build_alone_s"] = time.perf_counter() - t
    return out


def report(got: dict[str, float], base_s: float, base_n: int) -> None:
    for name, value in got.items():
        unit = "MiB" if name.endswith("mib") else "ms"
        shown = value if unit == "MiB" else value * 1000
        print(f"{name:22s} {shown:10.1f} {unit}")
    print(
        f"baseline: one list read from every shard {base_s * 1000:.0f} ms ({base_n} verdicts); "
        f"the viewer's list page {got['list_first_page_s'] * 1000:.1f} ms: "
        f"{base_s / got['list_first_page_s']:.0f}x"
    )
    print(
        f"targets: URL and first page < 1 s: {got['startup_s'] + got['first_overview_s'] < 1.0}; "
        f"list page < 200 ms: {got['list_first_page_s'] < 0.2}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=int, default=40)
    ap.add_argument("--instances", type=int, default=3000)
    ap.add_argument("--judges", type=int, default=2)
    ap.add_argument("--keep", type=Path, help="make the run here, or reuse the one already there")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = args.keep or Path(tmp) / "run"
        if not (run / "shards").is_dir():
            t = time.perf_counter()
            n = generate(run, args.models, args.instances, args.judges)
            took = time.perf_counter() - t
            size = sum(p.stat().st_size for p in (run / "shards").glob("*.jsonl"))
            print(f"generated {n:,} records ({size / 2**20:.0f} MiB of shards) in {took:.1f} s")
            t = time.perf_counter()
            compact(run)
            print(f"compacted in {time.perf_counter() - t:.1f} s")
        model = f"m{args.models // 2}"
        got = measure(run, model, args.instances)
        base_s, base_n = plain_list(run, model)
        report(got, base_s, base_n)


if __name__ == "__main__":
    main()
