"""What a person reading a run in the viewer sees (issue 36), in headless Chromium over a real run:
lists in the benchmark's instance order for every model and their sort control, the overview's boards
sorted on a header's click. Screenshots of each page at 1366 and 1920 px go to the test's directory."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_view import JUDGES, PRICE, newest, run_dir, serving, verdicts_by_pair, viewer
from test_view_browser import browser, text_of

import ifsweep
from ifsweep import benchmarks
from ifsweep.runner.store.keys import judge_key
from ifsweep.runner.store.manifest import read_manifest
from ifsweep.runner.watch.board import natural_key
from ifsweep.simulator import SimConfig, SimulatorThread

__all__ = ["browser", "run_dir", "viewer"]  # the fixtures, shared with test_view and test_view_browser

pytestmark = pytest.mark.browser
WIDTHS = (1366, 1920)


@pytest.fixture(params=WIDTHS)
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": request.param, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(20_000)
    yield pg
    context.close()


def shot(page: Any, tmp_path: Path, name: str) -> None:
    width = page.viewport_size["width"]
    page.screenshot(path=str(tmp_path / f"{name}-{width}.png"), full_page=False)


@pytest.fixture(scope="module")
def shuffled(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The run with each shard's lines in reverse (each line stays whole and checksummed): records
    read in another order than the sweep's, as answers come back in any order."""
    copy = tmp_path_factory.mktemp("shuffled") / "run"
    shutil.copytree(run_dir, copy)
    for shard in (copy / "shards").glob("*.jsonl"):
        lines = shard.read_bytes().splitlines(keepends=True)
        shard.write_bytes(b"".join(reversed(lines)))
    with serving(copy) as url:
        yield url


def test_every_models_list_is_in_the_benchmarks_instance_order(
    run_dir: Path, shuffled: str, page: Any, tmp_path: Path
) -> None:
    viewer = shuffled
    pairs = verdicts_by_pair(run_dir)
    for bench in ("followbench", "cfbench"):
        models = sorted({m for b, m, _ in pairs if b == bench})
        assert len(models) > 1
        orders = []
        for model in models:
            page.goto(f"{viewer}list/{bench}/{model.replace('/', '%2F')}")
            ids = text_of(page, "a.iid")
            assert ids == sorted(ids, key=natural_key), (bench, model, ids)
            assert set(ids) == {i for b, m, i in pairs if (b, m) == (bench, model)}
            orders.append(ids)
        common = set.intersection(*map(set, orders))
        assert len({tuple(i for i in o if i in common) for o in orders}) == 1, orders  # the same order
    shot(page, tmp_path, "list")


def test_the_sort_control_orders_the_list_and_the_walk_follows_it(
    run_dir: Path, viewer: str, page: Any
) -> None:
    pairs = verdicts_by_pair(run_dir)

    def failed(iid: str) -> int:  # constraints failed under any judge
        rows = [r for v in pairs[("cfbench", "alpha", iid)].values() for r in v["rows"]]
        return len({r["constraint_idx"] for r in rows if r["status"] == "ok" and r["satisfied"] is False})

    page.goto(f"{viewer}list/cfbench/alpha")
    with page.expect_navigation():
        page.get_by_label("order").select_option("failed")  # applies as it changes
    ids = text_of(page, "a.iid")
    counts = [failed(i) for i in ids]
    assert counts == sorted(counts, reverse=True) and counts[0] > counts[-1], counts
    ties = [i for i in ids if failed(i) == counts[0]]
    assert ties == sorted(ties, key=natural_key)  # ties keep the instance order
    page.get_by_role("link", name=ids[0], exact=True).click()
    page.wait_for_selector("nav.walk")
    with page.expect_navigation():
        page.keyboard.press("ArrowRight")
    assert page.locator("h1.iid").inner_text() == ids[1]  # the next of the sorted list


def test_an_overview_board_sorts_on_a_header_click(viewer: str, page: Any, tmp_path: Path) -> None:
    page.goto(viewer)
    board = page.locator("section.board").first

    def column(name: str) -> list[str]:
        heads = text_of(board, "thead th")
        k = next(i for i, h in enumerate(heads) if h.strip().startswith(name))
        return [
            str(r)
            for r in board.locator("tbody tr").evaluate_all(f"rs => rs.map(r => r.cells[{k}].textContent)")
        ]

    def dollars(cells: list[str]) -> list[float]:
        return [float(c.strip().lstrip("$").replace(",", "")) for c in cells]

    board.locator("thead th", has_text="spent").click()
    up = dollars(column("spent"))
    assert up == sorted(up), up
    board.locator("thead th", has_text="spent").click()
    down = dollars(column("spent"))
    assert down == sorted(up, reverse=True), down
    board.locator("thead th", has_text="model").click()
    models = column("model")
    assert models == sorted(models, key=str.casefold) or models == sorted(models), models
    shot(page, tmp_path, "overview")


# ------------------------------------------------------------------------------- an EIFBench page


@pytest.fixture(scope="module")
def eif_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """EIFBench's sample (sub-instructions, one judge call per scoring question) under two judges."""
    out = tmp_path_factory.mktemp("eif") / "run"
    with SimulatorThread(SimConfig(seed=5)) as sim:
        config = {
            "run": {"output_dir": str(out), "progress": "off"},
            "benchmarks": [{"name": "eifbench", "data": str(benchmarks.get("eifbench").fixture_dir())}],
            "models": [
                {"id": m, "model": f"openai/sim-{m}", "api_base": sim.base_url, "price": PRICE}
                for m in ("alpha", "beta")
            ],
            "judges": [
                {"id": j, "model": f"openai/{name}", "api_base": sim.base_url, "price": PRICE}
                for j, name in JUDGES
            ],
        }
        assert ifsweep.run(config).status == "complete"
    return out


@pytest.fixture(scope="module")
def eif_viewer(eif_run: Path) -> Iterator[str]:
    with serving(eif_run) as url:
        yield url


def test_an_eifbench_page_ties_each_constraint_to_the_call_that_decided_it(
    eif_run: Path, eif_viewer: str, page: Any, tmp_path: Path
) -> None:
    bench = benchmarks.get("eifbench")
    instances = {i.instance_id: i for i in bench.load(bench.fixture_dir(), {})}
    pairs = verdicts_by_pair(eif_run)
    pair = max(pairs, key=lambda p: len(instances[p[2]].constraints))  # the most calls
    inst = instances[pair[2]]
    page.goto(f"{eif_viewer}instance/{pair[0]}/{pair[1]}/{pair[2]}")
    shot(page, tmp_path, "eifbench")

    # Constraints under their sub-instruction, in the data's order.
    rows = page.locator("table.constraints tbody tr")
    seen: list[tuple[str, list[str]]] = []
    for k in range(rows.count()):
        r = rows.nth(k)
        if "sub" in (r.get_attribute("class") or ""):
            seen.append((r.inner_text().strip(), []))
        else:
            seen[-1][1].append(r.locator(".ctext").inner_text())
    subs = {s["idx"]: f"{s['key']}: {s['instruction']}" for s in inst.meta["sub_instructions"]}
    want: dict[int, list[str]] = {}
    for c in inst.constraints:
        want.setdefault(c.instruction_idx, []).append(c.text)
    assert seen == [(subs[i].strip(), texts) for i, texts in want.items()], seen

    # Judge calls are folded; a constraint's "call ›" opens the very call that decided it, and the
    # call's "#i" leads back to the constraint.
    judgments = newest(eif_run, "judgment")
    manifest = read_manifest(eif_run)
    assert manifest is not None
    assert page.locator("details.turn[open]").count() == 0
    for j, (judge, _) in enumerate(JUDGES):
        for i in (0, len(inst.constraints) - 1):
            row = page.locator("table.constraints tbody tr:not(.sub)").nth(i)
            row.locator("td").nth(3 + j).locator("a.call").click()
            call = page.locator("details.turn:target")
            # The page opens its target on `hashchange`, an event after the click: wait for it (up to
            # the default 30 s), or a loaded machine reads the call before it is opened.
            page.locator("details.turn:target[open]").wait_for()
            assert call.get_attribute("open") is not None and call.is_visible()
            assert f"#{i}" in text_of(call, "a.decides")
            key = str(call.get_attribute("data-key"))
            assert judgments[key]["judge"] == judge
            assert call.locator("pre.reply").inner_text() == judgments[key]["text"]
            if i == 0:  # its sent messages, built when opened, are the ones its key covers
                call.locator("details.messages > summary").click()
                call.locator("details.messages pre.sent").first.wait_for()
                roles = text_of(call, "details.messages div.role")
                sent = text_of(call, "details.messages pre.sent")
                assert sent and len(roles) == len(sent)
                msgs = [{"role": r, "content": t} for r, t in zip(roles, sent, strict=True)]
                spec = manifest.judges[judge]
                assert judge_key(spec.endpoint, spec.params, msgs, judgments[key]["ask"]) == key
            call.locator("a.decides", has_text=f"#{i}").first.click()
            assert page.locator("tr:target .ctext").inner_text() == inst.constraints[i].text


def test_an_eifbench_page_opens_short(eif_viewer: str, eif_run: Path, page: Any) -> None:
    """Folded calls: the page is a few screens, where all of them open would be many more."""
    pair = sorted(verdicts_by_pair(eif_run))[0]
    page.goto(f"{eif_viewer}instance/{pair[0]}/{pair[1]}/{pair[2]}")
    folded = page.evaluate("document.documentElement.scrollHeight")
    for _ in range(2):  # a folded call's body is built as it opens, and holds its messages' <details>
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        page.wait_for_timeout(300)
    unfolded = page.evaluate("document.documentElement.scrollHeight")
    assert folded * 3 < unfolded, (folded, unfolded)


# ------------------------------------------------------------------------------------- the export


def test_the_export_shows_one_page_at_a_time(run_dir: Path, page: Any, tmp_path: Path) -> None:
    out = tmp_path / "export.html"
    done = subprocess.run(
        [sys.executable, "-m", "ifsweep", "view", str(run_dir), "--export", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    pairs = int(re.search(r"the overview and (\d+) pairs", done.stdout).group(1))  # type: ignore[union-attr]
    assert f"{out} ({out.stat().st_size / 1e6:.1f} MB" in done.stdout, done.stdout
    assert out.stat().st_size / pairs < 15_000, (out.stat().st_size, pairs)

    page.goto(out.as_uri())
    visible = "els => els.filter(e => e.offsetParent !== null).length"
    assert page.locator("section.export-instance").evaluate_all(visible) == 0
    assert page.locator("#overview").is_visible()
    height = page.evaluate("document.documentElement.scrollHeight")
    shot(page, tmp_path, "export-overview")

    gens = newest(run_dir, "generation")
    by_pair = verdicts_by_pair(run_dir)
    links = page.locator("section.export-group a.iid")
    for k in (0, links.count() - 1):
        group = links.nth(k).locator("xpath=ancestor::section[1]")
        bench, model = group.locator("h2").inner_text().split(" · ")
        iid = links.nth(k).inner_text()
        links.nth(k).click()
        shown = page.locator("section.export-instance:target")
        assert shown.locator("h1.iid").inner_text() == iid
        assert page.locator("section.export-instance").evaluate_all(visible) == 1  # this page alone
        assert not page.locator("#overview").is_visible()
        gen = gens[next(iter(by_pair[(bench, model, iid)].values()))["gen_key"]]
        assert text_of(shown, "pre.answer") == [gen["text"] or ""]
        if k == 0:
            shot(page, tmp_path, "export-pair")
        shown.get_by_role("link", name="‹ overview").click()
        # The page script shows the overview on the hash change: wait for it (a timeout fails), not a glance
        page.locator("#overview").wait_for(state="visible", timeout=10_000)
    assert height < 20 * page.viewport_size["height"], height  # the overview and lists, not every pair
