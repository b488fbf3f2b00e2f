"""`ifsweep view RUN --gold FILE` in headless Chromium (issue 33, item 5): the overview's audit section,
the list's filter "judge disagrees with gold" (it applies as it is checked), and an instance page showing
the gold beside each judge's verdict. Gold is the plain simulated judge's verdicts; the lenient judge
(`-fyes0.3`) says YES on a share of its NOs, so the pairs the filter keeps are known from the rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from sweeps import panel_sweep
from test_corrected_report import plain_gold, write_jsonl
from test_view import serving
from test_view_browser import browser, page

import ifsweep
from ifsweep.runner.store.compact import load_verdict_rows
from ifsweep.simulator import SimConfig, SimulatorThread

__all__ = ["browser", "page"]  # the browser fixtures, shared with test_view_browser

pytestmark = pytest.mark.browser

JUDGES = (("plain", "sim-judge"), ("lenient", "sim-judge-fyes0.3"))


@pytest.fixture(scope="module")
def gold_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    root = tmp_path_factory.mktemp("viewgold")
    with SimulatorThread(SimConfig(seed=5)) as sim:
        assert ifsweep.run(panel_sweep(root / "run", sim.base_url, JUDGES, limit=12)).status == "complete"
    gold = write_jsonl(root / "gold.jsonl", plain_gold(root / "run", {"a": -1, "b": -1, "c": -1}))
    yield root / "run", gold


def off_gold(run: Path, bench: str, model: str) -> set[str]:
    """The instances where the lenient judge decided a constraint otherwise than the plain one."""
    rows = load_verdict_rows(run).filter(
        (pl.col("benchmark") == bench) & (pl.col("model") == model) & (pl.col("status") == "ok")
    )
    wide = rows.pivot(on="judge", index=["instance_id", "constraint_idx"], values="satisfied")
    return set(wide.filter(pl.col("plain") != pl.col("lenient")).get_column("instance_id").to_list())


def test_filter_judge_disagrees_with_gold(gold_run: tuple[Path, Path], page: Any) -> None:
    run, gold = gold_run
    want = off_gold(run, "infobench", "a")
    assert want  # the lenient judge's flaw shows on this sample
    with serving(run, "--gold", str(gold)) as url:
        page.goto(url)
        audit = page.locator("section#audit")
        assert "Judge audit" in audit.inner_text()
        lenient = audit.locator("tr", has_text="lenient").filter(has_text="infobench")
        assert "0.000 (0 of" in lenient.locator("td").nth(6).inner_text()  # never a false NO
        page.goto(url.rstrip("/") + "/list/infobench/a")
        with page.expect_navigation():
            page.get_by_label("judge disagrees with gold").check()  # applies as it changes
        assert "gold=1" in page.url
        assert int(page.locator("#matched").inner_text()) == len(want)
        shown = {t.strip() for t in page.locator("a.iid").all_inner_texts()}
        assert shown == want
        page.locator("a.iid").first.click()
        page.wait_for_url("**/instance/infobench/a/**")
        grid = page.locator("table.constraints")
        assert grid.locator("th", has_text="gold").count() == 1
        assert grid.locator(".gold-off").count() >= 1  # the lenient judge's YES where gold says NO
        assert grid.locator("span.gold").count() == grid.locator("tbody tr").count()
        # the plain judge is the gold: with it chosen, the filter keeps nothing
        page.goto(url.rstrip("/") + "/list/infobench/a?gold=1&judge=plain")
        assert page.locator("#matched").inner_text() == "0"
