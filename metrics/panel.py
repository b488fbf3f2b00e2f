"""A panel of judges in verdict rows: which judges there are, one judge's rows, and the majority vote.

Every row carries the judge whose verdict record it came from (rule-decided rows too: each judge's
record repeats them, so each judge's rows are a complete run). `majority_rows` builds the rows of a
judge named "majority" that reports treat like any other (docs/metrics.md states its rule).
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from ifsweep.metrics.instances import as_lazy, streamed
from ifsweep.metrics.schema import CONSTRAINT_KEY

MAJORITY = "majority"
ALL = "all"
UNIT_KEY: tuple[str, ...] = ("benchmark", "model", "instance_id", *CONSTRAINT_KEY)


def with_judge(rows: pl.LazyFrame | pl.DataFrame) -> pl.LazyFrame:
    """`rows` lazily, with a null judge column where they have none (files written without one)."""
    lf = as_lazy(rows)
    if "judge" not in lf.collect_schema():
        lf = lf.with_columns(pl.lit(None, pl.String).alias("judge"))
    return lf


def judges_in(rows: pl.LazyFrame | pl.DataFrame) -> list[str | None]:
    """The judges rows carry, sorted (a null judge, rows of a run without one, first)."""
    found = streamed(with_judge(rows).select(pl.col("judge").unique())).get_column("judge")
    return sorted(found.to_list(), key=lambda j: (j is not None, j or ""))


def one_judge(rows: pl.LazyFrame | pl.DataFrame, judge: str | None) -> pl.LazyFrame:
    """The rows of `judge` alone (None: the rows decided without a judge)."""
    return with_judge(rows).filter(pl.col("judge").is_null() if judge is None else pl.col("judge") == judge)


def majority_rows(rows: pl.LazyFrame | pl.DataFrame, judges: Sequence[str]) -> pl.LazyFrame:
    """Per constraint of each (benchmark, model, instance), the majority verdict of `judges`:

    - a judge's vote is its `satisfied` where its row's status is ok; unparsed, error or no row at all
      is an abstention;
    - more votes for one side than the other decide (status ok); a tie, votes or none, is unparsed,
      except that when nobody voted and some judge's row is an error the row is an error;
    - a rule-decided row is the same under every judge and is kept as it is.

    The rows carry judge "majority"; every other column is the first judge's (they describe the
    instance and constraint, which all judges share)."""
    lf = with_judge(rows).filter(pl.col("judge").is_in(list(judges)))
    order = {j: i for i, j in enumerate(judges)}
    lf = lf.with_columns(
        pl.col("judge").replace_strict(order, default=len(order), return_dtype=pl.Int64).alias("_order")
    ).sort([*UNIT_KEY, "_order"])
    ok = pl.col("status") == "ok"
    voted = lf.group_by(list(UNIT_KEY), maintain_order=True).agg(
        pl.all().exclude("_order").first(),
        (ok & pl.col("satisfied")).sum().alias("_yes"),
        (ok & ~pl.col("satisfied")).sum().alias("_no"),
        (pl.col("status") == "error").any().alias("_error"),
    )
    rule = pl.col("source") == "rule"
    decided = pl.col("_yes") != pl.col("_no")
    return voted.with_columns(
        pl.lit(MAJORITY, pl.String).alias("judge"),
        pl.when(rule)
        .then(pl.col("satisfied"))
        .when(decided)
        .then(pl.col("_yes") > pl.col("_no"))
        .otherwise(pl.lit(None, pl.Boolean))
        .alias("satisfied"),
        pl.when(rule)
        .then(pl.col("status"))
        .when(decided)
        .then(pl.lit("ok"))
        .when((pl.col("_yes") + pl.col("_no") == 0) & pl.col("_error"))
        .then(pl.lit("error"))
        .otherwise(pl.lit("unparsed"))
        .alias("status"),
    ).drop("_yes", "_no", "_error")


def select_judges(
    rows: pl.LazyFrame | pl.DataFrame, choice: str | None, panel: Sequence[str] = ()
) -> tuple[pl.LazyFrame, list[str | None]]:
    """The rows a report shows and the judges it shows them for. `choice`: a judge's id, "all" (every
    judge the rows carry), "majority" (the vote of `panel`, or of every judge when `panel` is empty),
    or None: the first judge of `panel`, else the only or first judge the rows carry. `panel`: the
    configured judges, in config order (a judge left out of the config is shown only when named)."""
    found = judges_in(rows)
    named = [j for j in found if j is not None]
    if choice == ALL:
        return with_judge(rows), found
    if choice == MAJORITY:
        voters = [j for j in panel if j in named] or named
        if not voters:
            raise ValueError("--judge majority: the rows carry no judge's verdicts")
        return majority_rows(rows, voters), [MAJORITY]
    if choice is None:
        default = next((j for j in panel if j in named), None)
        if default is None:
            default = named[0] if named else None
        choice_j: str | None = default
    else:
        if choice not in named:
            known = ", ".join(str(j) for j in named) or "none"
            raise ValueError(f"--judge {choice}: no verdicts of that judge (judges in the run: {known})")
        choice_j = choice
    # Rows decided without a judge (a run with no judge at all) belong to every choice.
    keep = pl.col("judge").is_null() | (pl.col("judge") == choice_j) if choice_j is not None else None
    lf = with_judge(rows)
    return (lf.filter(keep) if keep is not None else lf), [choice_j]
