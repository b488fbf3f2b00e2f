"""The HTML report's judge section (Cohen's kappa heatmaps, the panel's statistics, rank changes) for a
run with three judges, as text and in headless Chromium."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_judges import BENCHES, MODELS, config
from test_report_html import CHROMIUM, chromium

import ifsweep
from ifsweep.simulator import SimConfig, SimulatorThread

JUDGES = [("plain", "sim-judge"), ("flips", "sim-judge-flip0.25"), ('<odd> & "judge"', "sim-judge-flip0.5")]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    out = tmp_path_factory.mktemp("judges") / "run"
    with SimulatorThread(SimConfig(seed=11)) as sim:
        assert ifsweep.run(config(out, sim.base_url, JUDGES)).status == "complete"
    yield ifsweep.report(out, "html")


def section(html: str) -> str:
    start = html.index('<section id="judges">')
    return html[start : html.index("</section>", start)]


def test_judge_section_as_text(page: str) -> None:
    part = section(page)
    assert "<h2>Judges</h2>" in part and "Rank changes" in part
    assert "&lt;odd&gt; &amp; &quot;judge&quot;" in part and '<odd> & "judge"' not in page
    # One heatmap per benchmark: a cell per pair of judges, the diagonal included.
    assert part.count("<svg") == len(BENCHES)
    assert part.count('<g class="cell">') == len(BENCHES) * len(JUDGES) ** 2
    # The figures are the plain judge's unless asked.
    assert "Verdicts of judge plain." in page
    for stat in ("fleiss kappa", "krippendorff alpha"):
        assert part.count(f">{stat}<") == len(BENCHES)
    # A row per benchmark and pair of judges in the rank table.
    assert part.count(" vs ") == len(BENCHES) * 3


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_judge_section_renders_in_chromium(page: str, tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    dom = chromium("--dump-dom", "--enable-logging=stderr", "--v=0", path.as_uri(), tmp=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert [ln for ln in dom.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln] == []
    rendered = section(dom.stdout)
    svgs = re.findall(r"<svg.*?</svg>", rendered, flags=re.S)
    assert len(svgs) == len(BENCHES)
    for svg in svgs:
        assert len(re.findall(r"<rect\b", svg)) >= len(JUDGES) ** 2
        labels = re.findall(r'class="cell-label"[^>]*>([^<]*)<', svg)
        assert labels.count("1.00") >= len(JUDGES)  # the diagonal: each judge agrees with itself
        assert all(re.fullmatch(r"-?\d\.\d\d", v) for v in labels), labels
    assert len(re.findall(r"<tr>", rendered)) >= len(BENCHES) * 3
    shot = tmp_path / "judges.png"
    done = chromium(
        f"--screenshot={shot}", "--window-size=1400,6000", "--hide-scrollbars", path.as_uri(), tmp=tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert MODELS[0] in dom.stdout
