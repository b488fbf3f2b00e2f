"""CFBench's reference-mode scores: per item `judge_metric` {CSR, ISR, PSR} and the per-file row of
output/scores.xlsx, computed as code/evalaute.py computes them (numpy means, 2-decimal rounding at each
step), so that imported reference outputs reproduce the stored numbers exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ifsweep.benchmarks.cfbench._parse import ReferenceParse, reference_parse
from ifsweep.benchmarks.records import Instance

__all__ = ["SCORE_COLUMNS", "reference_file_scores", "reference_item_metric", "reference_metric_of"]

# The columns of the reference's scores.xlsx after `time` and `name`, in its order.
SCORE_COLUMNS = (
    "CSR_easy",
    "ISR_easy",
    "PSR_easy",
    "CSR_hard",
    "ISR_hard",
    "PSR_hard",
    "CSR",
    "ISR",
    "PSR",
)


def _round_mean(values: Sequence[float]) -> float:
    # numpy's pairwise mean and round-half-even of x*100, as the reference's round(np.mean(v), 2).
    return float(np.round(np.mean(np.asarray(values, dtype=np.float64)), 2))


def reference_metric_of(instance: Instance, parsed: ReferenceParse) -> dict[str, float]:
    """`_score_compute` of the reference for an already parsed reply."""
    scores = parsed.scores
    csr = _round_mean(scores)
    isr = 0.0 if csr < 1 else 1.0  # from the rounded CSR, as the reference does
    if parsed.parsing == "-1":
        psr = 0.0
    elif parsed.parsing == "0":
        psr = 1.0 if csr > 0.8 else 0.0
    else:
        primary = [s for s, c in zip(scores, instance.constraints, strict=True) if c.priority == "primary"]
        secondary = [s for s, c in zip(scores, instance.constraints, strict=True) if c.priority != "primary"]
        if 0 in primary:
            psr = 0.0
        elif not primary:
            psr = 1.0 if csr > 0.8 else 0.0
        elif not secondary:
            psr = 1.0
        else:
            psr = 1.0 if 0.5 + 0.5 * _round_mean(secondary) > 0.8 else 0.0
    return {"CSR": csr, "ISR": isr, "PSR": psr}


def reference_item_metric(instance: Instance, reply: str) -> dict[str, float]:
    """The `judge_metric` the reference stores for this judge reply to this instance."""
    return reference_metric_of(instance, reference_parse(instance, reply))


def reference_file_scores(items: Iterable[tuple[str | None, Mapping[str, float]]]) -> dict[str, float | None]:
    """One row of scores.xlsx from (split, judge_metric) pairs in file order. A split with no items is
    None where the reference writes NaN (an empty cell)."""
    buckets: dict[str, dict[str, list[float]]] = {
        suffix: {"CSR": [], "ISR": [], "PSR": []} for suffix in ("_easy", "_hard", "")
    }
    for split, metric in items:
        targets = [""] + ([f"_{split}"] if split in ("easy", "hard") else [])
        for suffix in targets:
            for name, values in buckets[suffix].items():
                values.append(metric[name])
    return {
        f"{name}{suffix}": _round_mean(values) if values else None
        for suffix, metrics in buckets.items()
        for name, values in metrics.items()
    }
