"""The HTML report's "Run analytics" table as a person sees it (issue 36, item 8): in headless Chromium at
1366 and 1920 px, on a real run with long model ids, it stays inside its card (scrolling there when it
must, never the page) and no model name is broken over lines."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_view_browser import browser

import ifsweep
from ifsweep import benchmarks
from ifsweep.runner.commands.cli import main
from ifsweep.simulator import SimConfig, SimulatorThread

__all__ = ["browser"]

pytestmark = pytest.mark.browser
PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
MODELS = ("openrouter/meta-llama/llama-3.1-405b-instruct", "anthropic/claude-3-5-sonnet-20241022", "m2")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("layout")
    with SimulatorThread(SimConfig(seed=2)) as sim:
        config = {
            "run": {"output_dir": str(work / "run"), "progress": "off"},
            "benchmarks": [
                {"name": b, "data": str(benchmarks.get(b).fixture_dir()), "limit": 4}
                for b in ("cfbench", "followbench", "eifbench")
            ],
            "models": [
                {"id": m, "model": f"openai/sim-{i}", "api_base": sim.base_url, "price": PRICE}
                for i, m in enumerate(MODELS)
            ],
            "judge": {"model": "openai/sim-judge", "api_base": sim.base_url, "price": PRICE},
        }
        assert ifsweep.run(config).status == "complete"
    out = work / "report.html"
    assert main(["report", str(work / "run"), "--format", "html", "--out", str(out)]) == 0
    return out


@pytest.fixture(params=(1366, 1920))
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": request.param, "height": 900})
    pg = context.new_page()
    yield pg
    context.close()


def test_run_analytics_fits_its_card_and_keeps_model_names_whole(
    report: Path, page: Any, tmp_path: Path
) -> None:
    page.goto(report.as_uri())
    table = page.locator("section", has_text="Run analytics").locator("table")
    table.scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / f"analytics-{page.viewport_size['width']}.png"))
    layout = table.evaluate(
        """t => {
            const card = t.closest('section').getBoundingClientRect();
            const box = t.parentElement.getBoundingClientRect();  // what shows the table
            const names = [...t.tBodies[0].rows].map(r => r.cells[0]);
            const line = parseFloat(getComputedStyle(names[0]).lineHeight) || 18;
            return {card: [card.left, card.right], box: [box.left, box.right],
                    page: document.documentElement.scrollWidth, view: window.innerWidth,
                    tallest: Math.max(...names.map(c => c.getBoundingClientRect().height)), line: line,
                    names: names.map(c => c.textContent)};
        }"""
    )
    assert layout["page"] <= layout["view"], layout  # the page itself never scrolls sideways
    left, right = layout["card"]
    assert left <= layout["box"][0] and layout["box"][1] <= right, layout  # inside its card
    assert set(layout["names"]) == set(MODELS)
    assert layout["tallest"] < 2 * layout["line"] + 10, layout  # each model name on one line
