"""Run analytics and the text, JSON, CSV and Markdown reports."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from test_metrics import CATALOG, Row, frame, metrics_of, row

from ifsweep import metrics
from ifsweep.metrics import analytics, render_csv, render_json, render_markdown, render_table

NASTY = ('gpt<4o> & "friends"', "claude|sonnet", "llama-3.1-8b")


def demo_rows(models: tuple[str, ...] = NASTY, seed: int = 0, scale: int = 1) -> list[Row]:
    """A small sweep over all four benchmarks where model i is better than model i+1."""
    rnd = random.Random(seed)
    rows: list[Row] = []
    for mi, m in enumerate(models):
        skill = 0.9 - 0.6 * mi / max(len(models) - 1, 1)
        for g in range(6 * scale):
            cat = ("content", "format", "style")[g % 3]
            for lv in range(1, 6):
                for c in range(lv):
                    rows.append(
                        row(
                            "followbench",
                            m,
                            f"fb-{g}-{lv}",
                            c,
                            rnd.random() < skill ** (0.3 * lv),
                            group_id=f"g{g}",
                            level=lv,
                            category=cat,
                        )
                    )
        for i in range(20 * scale):
            split = "easy" if i % 2 else "hard"
            for c in range(4):
                rows.append(
                    row(
                        "cfbench",
                        m,
                        f"cf-{i}",
                        c,
                        rnd.random() < skill + (0.05 if split == "easy" else -0.1),
                        split=split,
                        priority="primary" if c < 2 else "secondary",
                    )
                )
                rows.append(
                    row(
                        "infobench",
                        m,
                        f"ib-{i}",
                        c,
                        rnd.random() < skill,
                        split=split,
                        constraint_type=("Content", "Format|Style", "Linguistic", "Number")[c],
                    )
                )
            status = "unparsed" if i == 3 and mi == 1 else "ok"
            for c in range(6):
                rows.append(
                    row(
                        "eifbench",
                        m,
                        f"ef-{i}",
                        c,
                        rnd.random() < skill,
                        instruction_idx=c // 2,
                        split=("party", "work", "travel")[i % 3],
                        status=status if c == 0 else "ok",
                    )
                )
    return rows


def demo_calls(models: tuple[str, ...] = NASTY) -> pl.DataFrame:
    recs: list[dict[str, Any]] = []
    for mi, m in enumerate(models):
        for b in ("followbench", "cfbench", "infobench", "eifbench"):
            for i in range(10):
                recs.append(
                    dict(
                        kind="generation",
                        model=m,
                        judge=None,
                        benchmark=b,
                        status=("ok", "ok", "empty", "truncated", "refused", "ok", "ok", "ok", "error", "ok")[
                            i
                        ],
                        cost_usd=0.001 * (mi + 1),
                        input_tokens=100,
                        output_tokens=50 + i,
                        latency_s=float(i + 1),
                        attempts=1 + (i == 0),
                        rate_limited=int(i == 0),
                        error_kind="server" if i == 8 else None,
                    )
                )
                recs.append(
                    dict(
                        kind="judgment",
                        model=m,
                        judge="j",
                        benchmark=b,
                        status="unparsed" if i < 2 else "ok",
                        cost_usd=0.0005,
                        input_tokens=300,
                        output_tokens=20,
                        latency_s=0.5,
                        attempts=1,
                        rate_limited=0,
                        error_kind=None,
                    )
                )
    return pl.DataFrame(recs)


@pytest.fixture(scope="module")
def demo() -> pl.DataFrame:
    return metrics_of(frame(demo_rows()), ci=True, resamples=200)


def test_analytics_per_model_and_benchmark(demo: pl.DataFrame) -> None:
    a = analytics(demo_calls(), demo)
    assert a.height == 12
    r = a.filter((pl.col("model") == NASTY[1]) & (pl.col("benchmark") == "eifbench")).row(0, named=True)
    assert math.isclose(r["spent_usd"], 10 * 0.002 + 10 * 0.0005)
    assert math.isclose(r["generation_usd"], 0.02) and math.isclose(r["judging_usd"], 0.005)
    assert (r["calls"], r["generation_calls"], r["judgment_calls"]) == (20, 10, 10)
    assert r["input_tokens"] == 10 * 100 + 10 * 300
    assert r["output_tokens"] == sum(50 + i for i in range(10)) + 200
    assert (r["retries"], r["rate_limited"]) == (1, 1)
    assert r["latency_p50_s"] == 5.5 and math.isclose(r["latency_p95_s"], 9.55)
    assert r["judge_unparsed_rate"] == 0.2
    assert (r["empty"], r["truncated"], r["refused"], r["errors"]) == (1, 1, 1, 1)
    assert r["coverage"] == 19 / 20  # one EIFBench task of this model had an unparsed verdict


def test_analytics_without_judgments_and_missing_columns(demo: pl.DataFrame) -> None:
    calls = demo_calls().filter(pl.col("kind") == "generation")
    assert analytics(calls, demo)["judge_unparsed_rate"].null_count() == 12
    with pytest.raises(ValueError, match="field 'latency_s'"):
        analytics(calls.drop("latency_s"), demo)


def test_render_table_ranks_models(demo: pl.DataFrame) -> None:
    text = render_table(demo, CATALOG)
    assert (
        text.index("FollowBench") < text.index("CFBench") < text.index("InFoBench") < text.index("EIFBench")
    )
    cf = text[text.index("CFBench") : text.index("InFoBench")]
    assert cf.index(NASTY[0]) < cf.index(NASTY[1]) < cf.index(NASTY[2])
    assert "HSR %" in text and "CSL" in text and "coverage %" in text and "[" in text
    assert render_table(metrics_of(frame(demo_rows()[:5])), CATALOG).count("\n") >= 3


def test_render_json_and_csv_round_trip(demo: pl.DataFrame) -> None:
    data = json.loads(render_json(demo))
    assert len(data) == demo.height
    assert set(data[0]) == {
        "benchmark",
        "model",
        "judge",
        "metric",
        "slice",
        "value",
        "n",
        "ci_low",
        "ci_high",
    }
    assert data[0]["model"] in NASTY
    assert pl.DataFrame(data, schema=demo.schema).equals(demo)
    plain = json.loads(render_json(demo.drop("ci_low", "ci_high")))
    assert set(plain[0]) == {"benchmark", "model", "judge", "metric", "slice", "value", "n"}
    back = pl.read_csv(render_csv(demo).encode(), schema=demo.schema)
    assert back.equals(demo)


def test_render_markdown_writes_charts(demo: pl.DataFrame, tmp_path: Path) -> None:
    md = render_markdown(demo, CATALOG, analytics(demo_calls(), demo), tmp_path)
    assert "## FollowBench" in md and "## Run analytics" in md
    assert 'gpt&lt;4o&gt; &amp; "friends"' in md and "claude\\|sonnet" in md
    svgs = sorted(p.name for p in tmp_path.glob("*.svg"))
    assert svgs == [
        "cfbench_by_split_1.svg",
        "cfbench_by_split_2.svg",
        "eifbench_by_scenario.svg",
        "followbench_hsr_by_level.svg",
        "infobench_by_type.svg",
    ]
    for name in svgs:
        assert f"]({name})" in md
        text = (tmp_path / name).read_text()
        assert text.startswith("<svg") and text.rstrip().endswith("</svg>") and text.count("<svg") == 1
        assert "<" + "script" not in text
    assert "matplotlib" in md  # not installed here: the note says the PNGs were skipped


def test_facade() -> None:
    assert all(hasattr(metrics, n) for n in metrics.__all__)
