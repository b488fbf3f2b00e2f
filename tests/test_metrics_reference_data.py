"""Cross-check against the CFBench reference code's own per-item scores in its released judge files.

Each record of CFBench/output/judge/*_eval.json holds the judge's 0/1 per checklist item and the
reference code's `judge_metric` {CSR, ISR, PSR}; our metrics over the same verdicts must agree (CSR up
to the reference's rounding to two decimals).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest
from test_metrics import frame, metrics_of, row

DATA = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "CFBench" / "output" / "judge"
PRIORITY = {"主需": "primary", "次需": "secondary"}


@pytest.mark.skipif(not DATA.is_dir(), reason="shared benchmark data is absent")
def test_cfbench_scores_match_the_reference_judge_files() -> None:
    rows, want = [], {}
    for path in sorted(DATA.glob("*_eval.json")):
        for rec in json.loads(path.read_text(encoding="utf-8")):
            scores, criteria = rec["judge_score"], rec["criteria"]
            if len(scores) != len(criteria) or not set(scores) <= {"0", "1"}:
                continue  # the reference could not parse this reply either
            model = f"{path.stem}#{rec['idx']}"  # one instance per model: its "all" slice is that item
            want[model] = rec["judge_metric"]
            for i, (crit, score) in enumerate(zip(criteria, scores, strict=True)):
                rows.append(
                    row(
                        "cfbench",
                        model,
                        str(rec["idx"]),
                        i,
                        score == "1",
                        priority=PRIORITY[crit[1]],
                        split=rec["split"],
                    )
                )
    assert len(want) >= 50
    got = metrics_of(frame(rows)).filter(pl.col("slice") == "all")
    checked = 0
    for r in got.filter(pl.col("metric") != "coverage").iter_rows(named=True):
        # The reference rounds each item's CSR to two decimals; we do not round (the brief's rule).
        tol = 0.005 + 1e-12 if r["metric"] == "CSR" else 1e-9
        assert math.isclose(r["value"], float(want[r["model"]][r["metric"]]), abs_tol=tol), r
        checked += 1
    assert checked == 3 * len(want)
