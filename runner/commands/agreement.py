"""`ifsweep agreement RUN_DIR`: how much the run's judges agree, and how the leaderboard moves between
them. The statistics are the metrics package's (metrics/agreement.py); this module picks the panel,
hands the engine each benchmark's ranking metric, and renders text or JSON."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ifsweep.runner.commands.rundir import compute, planned_rows, read_run_dir
from ifsweep.runner.commands.textwidth import cell
from ifsweep.runner.errors import UsageError

if TYPE_CHECKING:
    from ifsweep.metrics import Agreement
    from ifsweep.runner.store.current import RunReading

_NAMES = {
    "raw": "raw agreement",
    "cohen_kappa": "Cohen's kappa",
    "fleiss_kappa": "Fleiss' kappa",
    "krippendorff_alpha": "Krippendorff's alpha",
}


def run_agreement(
    run_dir: Path,
    *,
    judges: Sequence[str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    reading: RunReading | None = None,
) -> Agreement:
    """The agreement of `judges` (default: the configured judges that have verdicts, or every judge
    the run's rows carry when the config names fewer than two) on a run directory's verdicts of the
    instances its plans select (the run's reading: `reading`, or read here)."""
    import polars as pl

    from ifsweep import metrics

    reading = reading if reading is not None else read_run_dir(run_dir)
    rows = planned_rows(reading).collect()
    named = [j for j in metrics.judges_in(rows) if j is not None]
    if judges is None:
        configured = [j for j in reading.panel if j in named]
        chosen = configured if len(configured) > 1 else named
    else:
        unknown = [j for j in judges if j not in named]
        if unknown:
            known = ", ".join(named) or "none"
            raise UsageError(f"{run_dir}: no verdicts of judge {unknown[0]!r} (judges in the run: {known})")
        chosen = list(dict.fromkeys(judges))
    if len(chosen) < 2:
        return metrics.Agreement(tuple(chosen), (), (), resamples, seed)
    mine = rows.filter(pl.col("judge").is_in(chosen))
    stats = metrics.agreement_stats(mine, chosen, resamples=resamples, seed=seed, confidence=confidence)
    scores, catalog = compute(mine)
    primary = {
        b: catalog.primary(b)
        for b in sorted(set(scores.get_column("benchmark").to_list()))
        if catalog.get(b) is not None
    }
    ranks = metrics.rank_changes(scores, primary, chosen)
    return metrics.Agreement(tuple(chosen), tuple(stats), tuple(ranks), resamples, seed)


def render_agreement(found: Agreement, fmt: str = "text") -> str:
    """`found` as JSON, or as text: per benchmark the pairwise and panel statistics over every
    constraint type, then per constraint type, then the rank changes."""
    import json

    if fmt == "json":
        return json.dumps(found.as_json(), indent=1, ensure_ascii=False, allow_nan=False)
    if len(found.judges) < 2:
        return f"agreement needs two or more judges; the run has {', '.join(found.judges) or 'none'}"
    lines = [f"judges: {', '.join(found.judges)}  (95% bootstrap intervals over instances)", ""]
    head = f"{'benchmark':14s} {'constraint type':22s} {'statistic':22s} {'judges':28s} {'value':>7s}"
    head += f" {'interval':>17s} {'units':>7s}"
    lines += [head, "-" * len(head)]
    for s in found.stats:
        value = "-" if s.value is None else f"{s.value:.3f}"
        ci = "" if s.ci_low is None or s.ci_high is None else f"[{s.ci_low:.3f}, {s.ci_high:.3f}]"
        who = " & ".join(s.judges) if len(s.judges) == 2 else "panel"
        # Constraint types and labels may be Chinese: columns by display width, not by characters.
        lines.append(
            f"{cell(s.benchmark, 14)} {cell(s.constraint_type, 22)} "
            f"{cell(_NAMES.get(s.statistic, s.statistic), 22)} {cell(who, 28)} {value:>7s} {ci:>17s} "
            f"{s.units:7d}"
        )
    if found.ranks:
        head = f"{'benchmark':14s} {'metric':8s} {'judges':28s} {'models':>6s} {'tau-b':>7s} {'max move':>8s}"
        lines += [
            "",
            "leaderboard sensitivity (Kendall's tau-b of the judges' scores)",
            head,
            "-" * len(head),
        ]
        for r in found.ranks:
            tau = "-" if r.tau is None else f"{r.tau:.3f}"
            moved = f"  ({', '.join(r.moved)})" if r.moved else ""
            lines.append(
                f"{cell(r.benchmark, 14)} {cell(r.metric, 8)} {cell(r.judge_a + ' & ' + r.judge_b, 28)} "
                f"{r.models:6d} {tau:>7s} {r.max_change:8d}{moved}"
            )
    return "\n".join(lines)
