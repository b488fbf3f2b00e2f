"""The corrected FollowBench leaderboard on seeded synthetic verdict rows (issue 33, item 5): a tree
metric (HSR: categories within a level, then levels) with rule-decided instances beside judged ones,
a judge that says YES on 25% of the true NOs, and gold (the truth) on a uniform random sample of 150
judged instances of each model. Over 20 seeds the PPI++ interval holds the true HSR and SSR in at least
18, where the judge's own value is biased up; Rogan-Gladen likewise for SSR. The rule-decided instances
enter as they are: a world where only they differ from the judged ones moves the corrected value."""

from __future__ import annotations

import numpy as np
import polars as pl

from ifsweep.metrics import compute_metrics
from ifsweep.metrics.corrected import corrected_scores
from ifsweep.runner.commands.rundir import metric_catalog

BENCH = "followbench"
CATEGORIES = ("content", "style", "mixed")  # mixed: decided by rules, as FollowBench's summaries are
GROUPS = 40  # per category; five levels each


def world(seed: int) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(judge rows, truth rows, gold labels) for models a (true yes-rate 0.6) and b (0.75)."""
    rng = np.random.default_rng(seed)
    judged: list[dict[str, object]] = []
    truth: list[dict[str, object]] = []
    for model, p in (("a", 0.6), ("b", 0.75)):
        for cat in CATEGORIES:
            for g in range(GROUPS):
                for level in range(1, 6):
                    quality = rng.beta(4 * p, 4 * (1 - p))  # constraints of one answer move together
                    iid = f"{cat}:{g}:{level}"
                    for c in range(level):
                        y = bool(rng.random() < quality)
                        rule = cat == "mixed"
                        v = y or (not rule and bool(rng.random() < 0.25))
                        row = {
                            "benchmark": BENCH,
                            "model": model,
                            "judge": "lenient",
                            "instance_id": iid,
                            "group_id": str(g),
                            "level": level,
                            "category": cat,
                            "split": None,
                            "instruction_idx": None,
                            "constraint_idx": c,
                            "constraint_type": None,
                            "priority": None,
                            "source": "rule" if rule else "judge",
                            "status": "ok",
                        }
                        judged.append(row | {"satisfied": v})
                        truth.append(row | {"satisfied": y})
    rows, true = pl.DataFrame(judged), pl.DataFrame(truth)
    gold = []
    for model in ("a", "b"):
        ids = sorted({r["instance_id"] for r in judged if r["model"] == model and r["source"] == "judge"})
        chosen = set(rng.choice(ids, 150, replace=False).tolist())
        gold.append(
            true.filter((pl.col("model") == model) & pl.col("instance_id").is_in(list(chosen)))
            .filter(pl.col("source") == "judge")
            .select(
                "benchmark",
                "model",
                "instance_id",
                pl.lit(None, pl.Int64).alias("instruction_idx"),
                "constraint_idx",
                pl.col("satisfied").alias("gold"),
            )
        )
    return rows, true, pl.concat(gold)


def values(table: pl.DataFrame, metric: str) -> dict[str, float]:
    part = table.filter((pl.col("metric") == metric) & (pl.col("slice") == "all"))
    return {str(m): float(v) for m, v in part.select("model", "value").iter_rows()}


def test_ppi_and_rg_hold_the_truth_of_a_tree_metric_with_rule_instances() -> None:
    catalog = metric_catalog()[0]
    held = {("ppi", "HSR"): 0, ("ppi", "SSR"): 0, ("rg", "SSR"): 0}
    judge_held = 0
    seeds = range(20)
    for seed in seeds:
        rows, true, gold = world(seed)
        truth = {m: values(compute_metrics(true, catalog), m) for m in ("HSR", "SSR")}
        for method in ("ppi", "rg"):
            found = corrected_scores(rows, catalog, gold, method)
            for c in found.scores:
                key = (method, c.metric)
                if key not in held:
                    continue
                lo, hi = (c.ci_low_ppi, c.ci_high_ppi) if method == "ppi" else (c.ci_low_rg, c.ci_high_rg)
                assert lo is not None and hi is not None, c
                held[key] += lo <= truth[c.metric][c.model] <= hi
                if method == "ppi":
                    assert c.n_gold == 150 and c.value is not None
                    want = values(compute_metrics(rows, catalog), c.metric)[c.model]
                    assert abs(c.value - want) < 1e-12
                    if c.metric == "HSR":
                        judge_held += abs(c.value - truth["HSR"][c.model]) < 0.02
    n = 2 * len(seeds)  # two models a seed
    assert all(k >= 0.9 * n for k in held.values()), held
    assert judge_held == 0  # the judge alone is biased up by more than 2 points every time


def test_rule_decided_instances_are_added_as_they_are() -> None:
    """Make every rule-decided constraint fail: the corrected HSR falls by exactly the rule cells' part
    of the judged value (a third of each level's mean), whatever the gold says about the others."""
    catalog = metric_catalog()[0]
    rows, _, gold = world(0)
    failed = rows.with_columns(
        pl.when(pl.col("source") == "rule").then(False).otherwise(pl.col("satisfied")).alias("satisfied")
    )
    before = {c.model: c for c in corrected_scores(rows, catalog, gold, "ppi").scores if c.metric == "HSR"}
    after = {c.model: c for c in corrected_scores(failed, catalog, gold, "ppi").scores if c.metric == "HSR"}
    for model in ("a", "b"):
        drop_judge = (before[model].value or 0.0) - (after[model].value or 0.0)
        drop_ppi = (before[model].value_ppi or 0.0) - (after[model].value_ppi or 0.0)
        assert drop_judge > 0.05
        assert abs(drop_ppi - drop_judge) < 1e-12
