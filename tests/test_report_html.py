"""The self-contained HTML report, checked as text and in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest
from test_metrics import CATALOG, frame, metrics_of
from test_report import NASTY, demo_calls, demo_rows

from ifsweep.metrics import analytics, paired_differences, render_html

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
MODELS = (*NASTY, *(f"model-{i:02d}" for i in range(9)))


@pytest.fixture(scope="module")
def report() -> str:
    rows = frame(demo_rows(MODELS, scale=2))
    m = metrics_of(rows, ci=True, resamples=200)
    paired = paired_differences(rows, CATALOG, "cfbench", "PSR", models=list(MODELS[:4]), resamples=200)
    return render_html(m, CATALOG, analytics(demo_calls(MODELS), m), paired)


def test_html_is_self_contained_and_escaped(report: str) -> None:
    assert report.startswith("<!DOCTYPE html>")
    # The only URL is the SVG namespace, which is a name, not a fetch.
    assert set(re.findall(r"https?://[^\s\"'<>]+", report)) == {"http://www.w3.org/2000/svg"}
    assert "<link" not in report and "src=" not in report and "@import" not in report
    assert "gpt<4o>" not in report and "gpt&lt;4o&gt; &amp; &quot;friends&quot;" in report
    for heading in (
        "Leaderboard",
        "FollowBench: hard satisfaction by level",
        "CFBench: easy and hard",
        "InFoBench: DRFR by constraint type",
        "EIFBench: GAcc by scenario",
        "Cost against score",
        "Run analytics",
        "Paired differences",
    ):
        assert f"<h2>{heading}</h2>" in report
    assert report.count("<svg") == 6


def test_html_without_analytics_or_data() -> None:
    empty = metrics_of(pl.DataFrame(schema=frame([]).schema))
    page = render_html(empty, CATALOG, None, None)
    assert "No metrics." in page and "No call records." in page and "<svg" not in page


def chromium(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp / 'profile'}",
    ]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_html_renders_in_chromium(report: str, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(report, encoding="utf-8")
    dom = chromium("--dump-dom", "--enable-logging=stderr", "--v=0", page.as_uri(), tmp=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [ln for ln in dom.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]
    assert console == []
    svgs = re.findall(r"<svg.*?</svg>", dom.stdout, flags=re.S)
    assert len(svgs) == 6
    for svg in svgs:
        marks = len(re.findall(r"<(?:circle|rect|polyline)\b", svg))
        assert marks >= 10, svg[:200]
    shot = tmp_path / "report.png"
    out = chromium(
        f"--screenshot={shot}", "--window-size=1400,2400", "--hide-scrollbars", page.as_uri(), tmp=tmp_path
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert shot.stat().st_size > 50_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
