"""What a person waits for in `ifsweep view` (issue 36): the export's size and an EIFBench page's load.

1. A tour-sized run (the README's: five simulated models, two judges, every benchmark's built-in
   sample) exported as `ifsweep view --export` does: its size per exported pair (target < 15 KB), against
   the same pages written out whole (each pair's HTML in the file, nothing shared: the old layout).
2. An EIFBench page of the real party data (../shared/benchmarks/EIFBench, two models, two judges): the
   instance page with the most judge calls, loaded in headless Chromium from the real `ifsweep view`
   server, timed by the browser (navigation start to the load event; target < 1 s), and its height
   folded (as it opens) against every call unfolded.
3. A 40-model run (`--big RUN`, made by a sweep beforehand): its export (the default limit of 1000 pairs)
   opened in Chromium from disk: size, time to the load event, the JS heap, and the time to show a pair.

    python perf/view_pages_perf.py [--data ../shared/benchmarks] [--big /tmp/r40] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ifsweep
from ifsweep import benchmarks
from ifsweep.simulator import SimConfig, SimulatorThread

PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
JUDGES = (("j0", "sim-judge"), ("j1", "sim-judge-flip0.3-garble0.3"))
CHROMIUM = "/usr/bin/chromium"


def sweep(out: Path, models: list[str], benches: list[dict[str, Any]]) -> None:
    shutil.rmtree(out, ignore_errors=True)  # a fresh run each time (a simulator's port differs)
    with SimulatorThread(SimConfig(seed=5)) as sim:
        ifsweep.run(
            {
                "run": {"output_dir": str(out), "progress": "off", "concurrency": 32},
                "benchmarks": benches,
                "models": [
                    {"id": m, "model": f"openai/sim-{m}", "api_base": sim.base_url, "price": PRICE}
                    for m in models
                ],
                "judges": [
                    {"id": j, "model": f"openai/{name}", "api_base": sim.base_url, "price": PRICE}
                    for j, name in JUDGES
                ],
            }
        )


def export(run: Path, out: Path, *data: Path) -> tuple[int, int]:
    """(bytes, pairs) of `ifsweep view RUN --export OUT`."""
    args = [a for d in data for a in ("--data", str(d))]
    done = subprocess.run(
        [sys.executable, "-m", "ifsweep", "view", str(run), "--export", str(out), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"the overview and (\d+) pairs", done.stdout)
    assert found is not None, done.stdout
    return out.stat().st_size, int(found.group(1))


def unshared_bytes(html: str) -> int:
    """The file with every pair's page written out in it (the pieces joined), nothing shared."""
    found = re.search(r'<script type="application/json" id="ifsweep-pages">(.*?)</script>', html, re.S)
    assert found is not None
    data = json.loads(found.group(1))
    pages = 0
    for page in data["pages"]:
        for x in page.split(","):  # base 36, "a-b" for a run
            first, _, last = x.partition("-")
            pages += sum(len(p.encode()) for p in data["pieces"][int(first, 36) : int(last or first, 36) + 1])
    return len(html[: found.start()].encode()) + pages


def browser() -> Any:
    import playwright.sync_api as sync_api

    p = sync_api.sync_playwright().start()
    return p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])


def load_ms(page: Any, url: str) -> float:
    page.goto(url, wait_until="load")
    return float(
        page.evaluate(
            "(() => { const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd; })()"
        )
    )


def tour(work: Path) -> None:
    run = work / "tour"
    names = ("followbench", "infobench", "cfbench", "eifbench")
    sweep(
        run,
        ["alpha", "beta", "gamma", "delta", "epsilon"],
        [{"name": b, "data": str(benchmarks.get(b).fixture_dir())} for b in names],
    )
    size, pairs = export(run, work / "tour.html")
    whole = unshared_bytes((work / "tour.html").read_text())
    print(
        f"tour-sized run (5 models, 2 judges, 4 samples): export {size / 1e3:.0f} KB for {pairs} pairs = "
        f"{size / pairs / 1e3:.1f} KB a pair (target < 15); the same pages unshared {whole / 1e3:.0f} KB = "
        f"{whole / pairs / 1e3:.1f} KB a pair; ratio {whole / size:.1f}x"
    )


def eif_page(work: Path, shared: Path, b: Any) -> None:
    data = shared / "EIFBench" / "data"
    run = work / "eif"
    sweep(run, ["m0", "m1"], [{"name": "eifbench", "data": str(data), "limit": 6}])
    from ifsweep.runner.view.index import RunIndex

    index = RunIndex.build(run)
    (bench, model), group = next(iter(index.groups.items()))
    iid = max(group, key=lambda i: len(group[i].calls))
    calls = len(group[iid].calls)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ifsweep", "view", str(run), "--port", "0", "--data", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = re.search(r"http://\S+", proc.stdout.readline()).group(0)  # type: ignore[union-attr]
        page = b.new_page(viewport={"width": 1366, "height": 900})
        page.goto(url)  # the index is whole before the page is timed
        while "index whole" not in page.content():
            time.sleep(0.2)
            page.reload()
        target = f"{url}instance/{bench}/{model}/{iid}"
        times = [load_ms(page, target) for _ in range(5)]
        folded = page.evaluate("document.documentElement.scrollHeight")
        for _ in range(2):  # a folded call's body is built as it opens, and holds its messages' <details>
            page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
            page.wait_for_timeout(500)
        unfolded = page.evaluate("document.documentElement.scrollHeight")
        size = len(page.request.get(target).body())  # as served: calls folded, not built
        print(
            f"EIFBench page ({iid}, {calls} judge calls, {size / 1e3:.0f} KB): first load "
            f"{times[0]:.0f} ms, then {', '.join(f'{t:.0f}' for t in times[1:])} ms (target < 1000); "
            f"height folded {folded:,} px, every call unfolded {unfolded:,} px ({unfolded / folded:.0f}x)"
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def big_export(work: Path, run: Path, shared: Path, b: Any) -> None:
    out = work / "big.html"
    started = time.perf_counter()
    size, pairs = export(run, out, *(shared / n / "data" for n in ("EIFBench", "CFBench", "FollowBench")))
    took = time.perf_counter() - started
    whole = unshared_bytes(out.read_text())
    page = b.new_page(viewport={"width": 1366, "height": 900})
    ms = load_ms(page, out.as_uri())
    heap = page.evaluate("performance.memory ? performance.memory.usedJSHeapSize : 0")
    link = page.locator("section.export-group a.iid").last
    t = time.perf_counter()
    link.click()
    page.locator("section.export-instance:target h1.iid").wait_for()
    shown = (time.perf_counter() - t) * 1e3
    models = len(
        {
            m
            for m in re.findall(
                r'<section class="export-group"[^>]*><h2>[^<]+ · ([^<]+)</h2>', out.read_text()
            )
        }
    )
    print(
        f"40-model run {run}: export of {pairs} pairs ({models} models) written in {took:.1f} s, "
        f"{size / 1e6:.1f} MB = {size / pairs / 1e3:.1f} KB a pair (unshared {whole / 1e6:.1f} MB, "
        f"{whole / size:.1f}x); opened in Chromium: load event {ms:.0f} ms, JS heap {heap / 2**20:.0f} MiB, "
        f"a pair shown {shown:.0f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "benchmarks"
    )
    ap.add_argument("--big", type=Path, help="a 40-model run directory to export")
    ap.add_argument("--keep", type=Path, help="work here instead of a temporary directory")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="view_pages_perf."))
    work.mkdir(parents=True, exist_ok=True)
    tour(work)
    b = browser()
    if (args.data / "EIFBench" / "data").is_dir():
        eif_page(work, args.data, b)
    else:
        print(f"EIFBench page: skipped ({args.data}/EIFBench/data not found)")
    if args.big is not None:
        big_export(work, args.big, args.data, b)


if __name__ == "__main__":
    main()
