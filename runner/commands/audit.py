"""`ifsweep audit RUN_DIR [--gold FILE] [--format text|markdown|json]`: how right each judge of a run is
against gold labels. The statistics are the metrics package's (metrics/audit.py); this module reads the
run and the gold, picks the judges (the configured panel and its majority) and renders the table."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ifsweep.runner.commands.gold import GoldSet, bind_gold, read_gold
from ifsweep.runner.commands.rundir import require_run_dir
from ifsweep.runner.commands.textwidth import cell
from ifsweep.runner.errors import UsageError

if TYPE_CHECKING:
    import polars as pl

    from ifsweep.metrics.audit import AuditStat
    from ifsweep.metrics.corrected import Corrections
    from ifsweep.runner.store.current import RunReading

__all__ = [
    "CORRECTIONS",
    "Audit",
    "ReportAudit",
    "add_audit_parser",
    "check_correction",
    "load_gold",
    "render_audit",
    "report_audit",
    "run_audit",
    "stored_answers",
]


@dataclass(frozen=True, slots=True)
class Audit:
    """A run's judges against its gold: the gold's summary and every statistic."""

    judges: tuple[str, ...]
    gold: GoldSet
    stats: tuple[AuditStat, ...]
    resamples: int
    seed: int
    whole_answer: tuple[WholeAnswer, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "judges": list(self.judges),
            "gold": self.gold.summary(),
            "resamples": self.resamples,
            "seed": self.seed,
            "audit": [s.as_json() for s in self.stats],
            "whole_answer": [w.as_json() for w in self.whole_answer],
        }


@dataclass(frozen=True, slots=True)
class WholeAnswer:
    """A judge against the rules that decide a whole answer (one pass/fail naming no constraint), per
    benchmark: a bound, not a rate. `yes_on_fail`: the share of the instances the rule fails where the
    judge said every constraint is satisfied (a judge false-yes, or the rule's own strictness);
    `no_on_pass`: the share of those the rule passes where the judge said some constraint is not."""

    benchmark: str
    judge: str
    instances: int  # judged (every audit row ok)
    rule_fail: int
    yes_on_fail: float | None
    rule_pass: int
    no_on_pass: float | None

    def as_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "judge": self.judge,
            "instances": self.instances,
            "rule_fail": self.rule_fail,
            "judge_all_yes_on_rule_fail": self.yes_on_fail,
            "rule_pass": self.rule_pass,
            "judge_any_no_on_rule_pass": self.no_on_pass,
        }


def stored_answers(run_dir: Path) -> dict[tuple[str, str, str], str | None]:
    """Per (benchmark, model, instance_id), the text of the newest generation stored for it."""
    import polars as pl

    from ifsweep.runner.store.compact import load_call_records

    calls = load_call_records(run_dir).filter(pl.col("kind") == "generation").sort("ts", nulls_last=False)
    out: dict[tuple[str, str, str], str | None] = {}
    for b, m, i, text in calls.select("benchmark", "model", "instance_id", "text").iter_rows():
        out[(str(b), str(m), str(i))] = text
    return out


def load_gold(run_dir: Path, gold: Path, rows: pl.DataFrame) -> GoldSet:
    """A gold file read and bound to the run whose verdict rows are `rows`."""
    return bind_gold(read_gold(gold), rows, stored_answers(run_dir), str(gold))


def run_audit(
    run_dir: Path,
    *,
    gold: Path | None,
    judges: Sequence[str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
    data_dirs: Sequence[Path] = (),
) -> Audit:
    """Every audit statistic of the run's judges (default: the configured ones with verdicts, or every
    judge in the rows) and, with two or more, of their majority, against `gold`; None: against the rules
    of the rule-decided instances the judges also judged (audit rows), with the whole-answer rules apart."""
    import polars as pl

    from ifsweep import metrics
    from ifsweep.metrics.audit import audit_stats
    from ifsweep.runner.store.current import read_run

    require_run_dir(run_dir)
    reading = read_run(run_dir)  # the current verdicts of the planned instances (docs/design/reading.md)
    assert reading.rows is not None
    if gold is None:
        rows, found, whole = _rule_gold(run_dir, reading, data_dirs)
    else:
        rows, whole = reading.rows.collect(), []
        found = load_gold(run_dir, gold, rows)
    chosen = _judges(run_dir, rows, reading.panel, judges)
    mine = rows.filter(pl.col("judge").is_in(chosen))
    panel = list(chosen)
    if len(chosen) > 1:
        mine = pl.concat([mine, metrics.majority_rows(mine, chosen).collect()], how="diagonal_relaxed")
        panel.append(metrics.MAJORITY)
    stats = audit_stats(mine, found.labels, panel, resamples=resamples, seed=seed)
    bounds = tuple(_whole_answer(mine, whole, panel))
    return Audit(tuple(panel), found, tuple(stats), resamples, seed, bounds)


def _judges(
    run_dir: Path, rows: pl.DataFrame, configured: Sequence[str], asked: Sequence[str] | None
) -> list[str]:
    from ifsweep import metrics

    named = [j for j in metrics.judges_in(rows) if j is not None]
    if asked is None:
        return [j for j in configured if j in named] or named
    unknown = [j for j in asked if j not in named]
    if unknown:
        raise UsageError(
            f"{run_dir}: no verdicts of judge {unknown[0]!r} (judges in the run: {', '.join(named)})"
        )
    return list(dict.fromkeys(asked))


RULE_GOLD = "rule checks (counting, format and keyword constraints; not a random sample: audit only)"
Whole = tuple[str, str, str, bool]  # benchmark, model, instance_id, the rule passed


def _rule_gold(
    run_dir: Path, reading: RunReading, data_dirs: Sequence[Path]
) -> tuple[pl.DataFrame, GoldSet, list[Whole]]:
    """Without a gold file: the audit rows of the run's rule-decided instances (a benchmark option,
    audit_rule_items), as judge rows, and the rules' gold on them."""
    import polars as pl

    from ifsweep.runner.store.compact import load_verdict_rows
    from ifsweep.runner.view.sources import InstanceSource

    audit = load_verdict_rows(run_dir, audit=True).filter(pl.col("source") == "audit")
    if audit.height == 0:
        raise UsageError(
            f"{run_dir}: no gold to audit against: pass --gold FILE, or set the benchmark option that has "
            "the judges also judge rule-decided instances (audit_rule_items, docs/metrics.md) and run again"
        )
    answers = stored_answers(run_dir)
    source = InstanceSource(reading.manifest, data_dirs)  # the run's data, checked by its hash
    per: list[tuple[str, str, str, int, bool]] = []
    whole: list[Whole] = []
    for b, m, i in audit.select("benchmark", "model", "instance_id").unique().sort(pl.all()).iter_rows():
        inst, found = source.instance(b, i)
        if inst is None or found.bench is None:
            raise UsageError(f"{run_dir}: rule gold of {i!r} on {b!r} needs its data: {found.reason}")
        # BenchmarkBase's method (None by default); a plugin outside it has no rule gold.
        rule_gold = getattr(found.bench, "rule_gold", None)
        said = None if rule_gold is None else rule_gold(inst, answers.get((b, m, i)) or "")
        if said is not None and said[0] == "per_constraint":
            per += [(b, m, i, k, v) for k, v in enumerate(said[1])]
        elif said is not None:
            whole.append((b, m, i, said[1][0]))
    labels = pl.DataFrame(
        per, schema=["benchmark", "model", "instance_id", "constraint_idx", "gold"], orient="row"
    )
    n = len({p[:3] for p in per})
    gold = GoldSet(
        RULE_GOLD, labels.with_columns(pl.lit(None, pl.String).alias("sample")), len(per), n, 0, 0, ()
    )
    return audit.with_columns(pl.lit("judge").alias("source")), gold, whole


def _whole_answer(rows: pl.DataFrame, whole: list[Whole], judges: Sequence[str]) -> Iterator[WholeAnswer]:
    """Each judge's instance-level verdict (all constraints YES) against the whole-answer rules."""
    import polars as pl

    if not whole:
        return
    rules = pl.DataFrame(whole, schema=["benchmark", "model", "instance_id", "passed"], orient="row")
    per = (
        rows.group_by("benchmark", "judge", "model", "instance_id")
        .agg(
            (pl.col("status") == "ok").all().alias("ok"),
            pl.col("satisfied").fill_null(False).all().alias("yes"),
        )
        .filter(pl.col("ok"))
        .join(rules, on=["benchmark", "model", "instance_id"])
    )
    for bench, judge in sorted({(b, j) for b, j in per.select("benchmark", "judge").iter_rows()}):
        if judge not in judges:
            continue
        part = per.filter((pl.col("benchmark") == bench) & (pl.col("judge") == judge))
        fail, ok = part.filter(~pl.col("passed")), part.filter(pl.col("passed"))
        yes_on_fail = float(fail.get_column("yes").mean()) if fail.height else None  # type: ignore[arg-type]
        no_on_pass = 1.0 - float(ok.get_column("yes").mean()) if ok.height else None  # type: ignore[arg-type]
        yield WholeAnswer(bench, judge, part.height, fail.height, yes_on_fail, ok.height, no_on_pass)


# ------------------------------------------------------------------------------------------- render

_COLUMNS = ("accuracy", "kappa_gold", "false_yes", "false_no", "net_bias")
_HEADS = ("accuracy", "kappa vs gold", "false-yes", "false-no", "net bias")


def _cells(found: Audit) -> list[tuple[tuple[str, str, str, str | None], dict[str, AuditStat]]]:
    """The statistics by (benchmark, judge, constraint type, model), "all" first, pooled first."""
    by: dict[tuple[str, str, str, str | None], dict[str, AuditStat]] = {}
    for s in found.stats:
        by.setdefault((s.benchmark, s.judge, s.constraint_type, s.model), {})[s.statistic] = s
    return sorted(
        by.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] != "all", kv[0][2], kv[0][3] or "")
    )


def render_audit(found: Audit, fmt: str = "text") -> str:
    """`found` as JSON, a Markdown table or a text table: per benchmark, judge, constraint type and
    model (pooled: "all models"), the gold units and instances and each statistic with its interval."""
    import json

    if fmt == "json":
        return json.dumps(found.as_json(), indent=1, ensure_ascii=False, allow_nan=False)
    g = found.gold
    lines = [
        f"gold: {g.source}: {g.instances} instances, {g.labels.height} constraints "
        f"({g.partial} partly labelled instances left out, {g.tied} tied units); "
        f"95% bootstrap intervals over gold instances; n/a: fewer than 5 units",
    ]
    if g.annotators:
        kappas = [s for s in g.agreement if s.statistic == "cohen_kappa" and s.constraint_type == "all"]
        shown = ", ".join(f"{' & '.join(s.judges)} {s.value:.3f}" for s in kappas if s.value is not None)
        lines.append(f"annotators: {', '.join(g.annotators)}; their Cohen's kappa: {shown or 'n/a'}")
    if not found.stats:
        lines.append("no verdict of these judges parsed on a gold unit: nothing to measure")
    from ifsweep.metrics.render.corrected import stat_text

    heads = ("benchmark", "judge", "constraint type", "model", "units", "inst", *_HEADS)
    body = []
    for (bench, judge, ctype, model), st in _cells(found):
        first = st["accuracy"]
        body.append(
            (
                bench,
                judge,
                ctype,
                model or "all models",
                str(first.units),
                str(first.instances),
                *(stat_text(st.get(c)) for c in _COLUMNS),
            )
        )
    if fmt == "markdown":
        lines += ["", "| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        return "\n".join(lines + _bounds(found))
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(heads)]
    widths = [min(w, 26) for w in widths]
    lines += ["", " ".join(cell(h, w) for h, w in zip(heads, widths, strict=True))]
    lines.append("-" * len(lines[-1]))
    lines += [" ".join(cell(v, w) for v, w in zip(r, widths, strict=True)) for r in body]
    return "\n".join(lines + _bounds(found))


def _bounds(found: Audit) -> list[str]:
    """The whole-answer rules' comparison, one line per benchmark and judge."""
    if not found.whole_answer:
        return []
    out = ["", "whole-answer rules (a bound, not a rate: a failed rule names no constraint):"]
    for w in found.whole_answer:
        yes = "n/a" if w.yes_on_fail is None else f"{w.yes_on_fail:.3f}"
        no = "n/a" if w.no_on_pass is None else f"{w.no_on_pass:.3f}"
        out.append(
            f"  {w.benchmark} {w.judge}: {w.instances} instances; judge all-YES where the rule fails: {yes} "
            f"(of {w.rule_fail}); judge some NO where the rule passes: {no} (of {w.rule_pass})"
        )
    return out


# ------------------------------------------------------------------------ corrected leaderboards

CORRECTIONS = ("ppi", "rg")


@dataclass(frozen=True, slots=True)
class ReportAudit:
    """What `report --gold FILE [--correct ppi|rg]` adds: the reported judges against the gold (their
    audit statistics) and, with a method, each judge's corrected headline metrics."""

    gold: GoldSet
    stats: tuple[AuditStat, ...]
    corrections: tuple[Corrections, ...]


def check_correction(gold: Path | None, correct: str | None, fmt: str) -> None:
    """The combinations of `report`'s --gold and --correct that make sense, else a UsageError naming the
    problem (exit 2)."""
    if correct is not None and correct not in CORRECTIONS:
        raise UsageError(f"--correct: expected ppi or rg, got {correct!r}")
    if correct is not None and gold is None:
        raise UsageError(f"--correct {correct}: needs --gold FILE (the labels it corrects with)")
    if gold is not None and correct is None and fmt != "html":
        raise UsageError(
            "--gold without --correct changes only the html report (its audit section): "
            "add --correct ppi or --correct rg"
        )


def report_audit(
    run_dir: Path, rows: pl.LazyFrame, gold: Path, correct: str | None, *, stats: bool = True
) -> ReportAudit:
    """The gold file bound to the run, with `stats` the reported judges' audit against it (the html
    report's section), and with `correct` each one's leaderboard corrected (`rows`: the rows the report
    shows, lazily: one judge's, the majority's, or every judge's apart)."""
    import polars as pl

    from ifsweep.metrics.audit import audit_stats
    from ifsweep.metrics.corrected import corrected_scores
    from ifsweep.runner.commands.rundir import metric_catalog
    from ifsweep.runner.store.current import read_run

    every = read_run(run_dir).rows
    assert every is not None
    found = load_gold(run_dir, gold, every.collect())
    judged = rows.filter(pl.col("source") == "judge").select(pl.col("judge").unique()).collect()
    judges = sorted({str(j) for j in judged.get_column("judge").to_list() if j is not None})
    audit = audit_stats(rows, found.labels, judges, resamples=200) if stats else []
    fixed: list[Corrections] = []
    if correct is not None:
        catalog = metric_catalog()[0]
        for judge in judges:
            mine = rows.filter(pl.col("judge") == judge)
            fixed.append(corrected_scores(mine, catalog, found.labels, correct))
    return ReportAudit(found, tuple(audit), tuple(fixed))


# ------------------------------------------------------------------------------------------ command


def add_audit_parser(sub: Any) -> None:
    """Add the `audit` subcommand to the CLI's subparsers."""
    c = sub.add_parser("audit", help="how right a run's judges are against gold labels")
    c.add_argument("run_dir", type=Path)
    c.add_argument(
        "--gold", type=Path, metavar="FILE", help="gold labels: JSONL, CSV or Parquet (docs/metrics.md)"
    )
    c.add_argument("--format", choices=["text", "markdown", "json"], default="text")
    c.add_argument("--judges", metavar="A,B,...", help="these judges (default: the configured ones)")
    c.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (0: no intervals)")
    c.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    c.add_argument(
        "--data", type=Path, action="append", default=[], metavar="DIR", help="the run's data, for rule gold"
    )
    c.set_defaults(handler=_cmd_audit)


def _cmd_audit(args: Any) -> int:
    if args.resamples < 0:
        raise UsageError(f"--resamples: expected a whole number >= 0, got {args.resamples}")
    judges = [j.strip() for j in args.judges.split(",") if j.strip()] if args.judges else None
    found = run_audit(
        args.run_dir,
        gold=args.gold,
        judges=judges,
        resamples=args.resamples,
        seed=args.seed,
        data_dirs=args.data,
    )
    print(render_audit(found, args.format))
    return 0
