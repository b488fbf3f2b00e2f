"""Plain reports: a terminal leaderboard, JSON and CSV."""

from __future__ import annotations

import json
import math
from typing import Any

import polars as pl

from ifsweep.metrics.catalog import Catalog
from ifsweep.metrics.corrected import CORRECTED_COLUMNS
from ifsweep.metrics.leaderboard import benchmarks_in, header, leaderboard, partial_note, value_texts
from ifsweep.metrics.render.estimates import ESTIMATE_KEYS

# planned / done: of a run directory's table, the instances the pair's plan selects and those judged.
_JSON_KEYS = ("benchmark", "model", "judge", "metric", "slice", "value", "n", "planned", "done")


def _grid(header: list[str], body: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return [line(header), "  ".join("-" * w for w in widths), *(line(r) for r in body)]


def render_table(metrics: pl.DataFrame, catalog: Catalog) -> str:
    """A terminal leaderboard: one block per benchmark, one line per model, headline metrics in percent
    (or in levels, as FollowBench's CSL) with their 95% interval when computed, then coverage."""
    out: list[str] = []
    for bench in benchmarks_in(metrics, catalog):
        board = leaderboard(metrics, catalog, bench)
        names = [*catalog.headline(bench), "coverage"]
        body = [
            [str(r["model"]), *value_texts(r, catalog, bench, names)] for r in board.iter_rows(named=True)
        ]
        out.append(f"{catalog.display(bench)} ({board.height} models)")
        out.extend(_grid(["model", *(header(catalog, bench, m) for m in names)], body))
        if note := partial_note(metrics, bench):
            out.append(note)
        out.append("")
    return "\n".join(out).rstrip() + "\n" if out else "no metrics\n"


def _clean(v: Any) -> Any:
    return None if isinstance(v, float) and math.isnan(v) else v


def render_json(metrics: pl.DataFrame) -> str:
    """A JSON list of {benchmark, model, judge, metric, slice, value, n} (+ ci_low, ci_high when
    computed; + the corrected columns of `report --correct`, null but on headline "all" rows; + estimate,
    est_low, est_high, units_done, units_planned for a partial run)."""
    keys = [
        *(k for k in _JSON_KEYS if k in metrics.columns),
        *(k for k in ("ci_low", "ci_high") if k in metrics.columns),
        *(k for k in CORRECTED_COLUMNS if k in metrics.columns),
        *(k for k in ESTIMATE_KEYS if k in metrics.columns),  # a partial run's (render/estimates.py)
    ]
    rows = [{k: _clean(r[k]) for k in keys} for r in metrics.select(keys).iter_rows(named=True)]
    return json.dumps(rows, ensure_ascii=False, indent=1, allow_nan=False) + "\n"


def render_csv(metrics: pl.DataFrame) -> str:
    return metrics.write_csv()
