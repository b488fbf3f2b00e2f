"""`ifsweep view` in headless Chromium (Debian's, driven by Playwright; nothing is downloaded): clicking
through the filters to an instance whose texts must equal the shard records, the export opened from disk
with no request leaving the file, and the viewer following a real `ifsweep run` subprocess as it writes."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import in_ci
from sweeps import toml_config
from test_view import JUDGES, expected, judge_replies, newest, run_dir, serving, verdicts_by_pair, viewer

from ifsweep.simulator import SimConfig, SimulatorThread

__all__ = ["run_dir", "viewer"]  # the module's fixtures, shared with test_view

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium through Playwright: skipped locally without either, a failure under CI (.ci/run
    installs chromium, and playwright comes with the dev extras)."""
    missing = "chromium is not installed" if not Path(CHROMIUM).is_file() else ""
    try:
        import playwright.sync_api as sync_api
    except ImportError:
        missing = missing or "playwright is not installed (pip install '.[dev]')"
    if missing:
        if in_ci():
            pytest.fail(missing, pytrace=False)
        pytest.skip(missing)
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    pg = context.new_page()
    pg.set_default_timeout(20_000)
    yield pg
    context.close()


def text_of(page: Any, selector: str) -> list[str]:
    return [str(t) for t in page.locator(selector).evaluate_all("els => els.map(e => e.textContent)")]


def test_click_through_filters_to_an_instance(run_dir: Path, viewer: str, page: Any) -> None:
    page.goto(viewer)
    board = page.locator("section.board", has_text="CFBench").filter(has_text="judge j0")
    board.get_by_role("link", name="alpha", exact=True).click()
    page.wait_for_url("**/list/cfbench/alpha")
    total = int(page.locator("#matched").inner_text())
    assert total == len([p for p in verdicts_by_pair(run_dir) if p[:2] == ("cfbench", "alpha")])

    want = {p[2] for p in expected(run_dir, "failed") if p[:2] == ("cfbench", "alpha")}
    with page.expect_navigation():
        page.get_by_label("failed constraints").check()  # a filter applies as it changes
    assert int(page.locator("#matched").inner_text()) == len(want)
    assert set(text_of(page, "a.iid")) == want

    want = {p[2] for p in expected(run_dir, "disagree") if p[:2] == ("cfbench", "alpha")} & want
    with page.expect_navigation():
        page.get_by_label("judges disagree").check()
    assert set(text_of(page, "a.iid")) == want and want, "the flipping judge must disagree somewhere"

    order = text_of(page, "a.iid")
    iid = order[0]
    page.get_by_role("link", name=iid, exact=True).click()
    page.wait_for_selector("pre.answer")
    check_instance(page, run_dir, ("cfbench", "alpha", iid))
    assert page.locator("nav.walk span.at").inner_text() == f"1 of {len(order)}"
    with page.expect_navigation():
        page.keyboard.press("ArrowRight")  # the next pair of the same filtered list
    assert page.locator("h1.iid").inner_text() == order[1]
    check_instance(page, run_dir, ("cfbench", "alpha", order[1]))
    iid = order[1]

    page.get_by_role("link", name="beta", exact=True).click()  # the same instance, another model
    page.wait_for_url("**/instance/cfbench/beta/**")
    check_instance(page, run_dir, ("cfbench", "beta", iid))


def check_instance(page: Any, run_dir: Path, pair: tuple[str, str, str]) -> None:
    by_judge = verdicts_by_pair(run_dir)[pair]
    gen = newest(run_dir, "generation")[next(iter(by_judge.values()))["gen_key"]]
    assert page.locator("h1.iid").inner_text() == pair[2]
    assert text_of(page, "pre.answer") == [gen["text"] or ""]
    assert text_of(page, "pre.reply") == [r for j, _ in JUDGES for r in judge_replies(run_dir, pair, j)]
    assert page.locator('[data-stat="output tokens"]').first.inner_text() == str(gen["output_tokens"])
    for judge, rec in by_judge.items():
        section = page.locator(f'section.judge-calls[data-judge="{judge}"]')
        assert f"verdict: {rec['status']}" in section.locator("h3").inner_text()


def test_the_export_works_from_disk_with_no_request(run_dir: Path, tmp_path: Path, page: Any) -> None:
    out = tmp_path / "export.html"
    subprocess.run(
        [sys.executable, "-m", "ifsweep", "view", str(run_dir), "--export", str(out)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(out.as_uri())
    assert page.locator("#overview h1").inner_text().startswith("Run ")
    group = page.locator("section.export-group").first
    link = group.locator("a.iid").first
    iid = link.inner_text()
    link.click()
    target = page.locator(":target")
    assert target.locator("h1.iid").inner_text() == iid
    model = target.locator("p.facts b").inner_text()
    bench = target.locator("p.facts").inner_text().split(" ·")[0]
    by_judge = verdicts_by_pair(run_dir)[(bench, model, iid)]
    gen = newest(run_dir, "generation")[next(iter(by_judge.values()))["gen_key"]]
    assert [str(t) for t in target.locator("pre.answer").evaluate_all("e => e.map(x => x.textContent)")] == [
        gen["text"] or ""
    ]
    assert requests and all(u.startswith("file://") for u in requests), requests


def overview_pairs(page: Any) -> int:
    """The pairs column summed over the first judge's boards."""
    return int(
        page.evaluate(
            """() => [...document.querySelectorAll('section.board')]
                .filter(s => s.textContent.includes('judge j0'))
                .map(s => { const heads = [...s.querySelectorAll('th')].map(t => t.textContent);
                            const k = heads.indexOf('pairs');
                            return [...s.querySelectorAll('tbody tr')]
                                .map(r => Number(r.children[k].textContent)).reduce((a, b) => a + b, 0); })
                .reduce((a, b) => a + b, 0)"""
        )
    )


def test_the_viewer_follows_a_running_sweep(tmp_path: Path, page: Any) -> None:
    """The viewer is started on the run directory first (empty), then the sweep writes into it."""
    out = tmp_path / "live"
    (out / "shards").mkdir(parents=True)
    cfg = tmp_path / "sweep.toml"
    with SimulatorThread(SimConfig(latency_ms=200)) as sim, serving(out) as url:
        text = toml_config(out, sim.base_url, bench=("cfbench",), extra_run="concurrency = 2")
        cfg.write_text(text.replace('[judge]\nid = "judge"', '[judge]\nid = "j0"'))
        sweep = subprocess.Popen(
            [sys.executable, "-m", "ifsweep", "run", str(cfg)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            seen = follow(page, url, sweep)
        finally:
            sweep.communicate(timeout=120)
        assert sweep.returncode == 0
        final = len(verdicts_by_pair(out))
        assert seen[-1] == final
        assert any(0 < n < final for n in seen), seen  # read while the sweep was writing
        assert seen == sorted(seen)
        # An instance written while the viewer ran shows its stored answer.
        pair = sorted(verdicts_by_pair(out))[0]
        page.goto(url + f"instance/{pair[0]}/{pair[1]}/{pair[2]}")
        gen = newest(out, "generation")[next(iter(verdicts_by_pair(out)[pair].values()))["gen_key"]]
        assert text_of(page, "pre.answer") == [gen["text"] or ""]


def follow(page: Any, url: str, sweep: subprocess.Popen[bytes]) -> list[int]:
    """The overview's pair count, read every half second while the sweep runs, then once after (the
    overview's metrics are recomputed at most every 2 s: the last reading waits for that)."""
    seen: list[int] = []
    page.goto(url)
    while sweep.poll() is None:
        page.reload()
        seen.append(overview_pairs(page))
        time.sleep(0.5)
    time.sleep(2.1)
    page.reload()
    seen.append(overview_pairs(page))
    return seen
