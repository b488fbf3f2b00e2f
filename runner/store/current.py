"""One reading of a run directory: which verdicts are current, for which plan, and how far the plan is.

Every command that reads results asks this module once (`read_run`, or `reading_of` for `status`,
which feeds it from its own single pass over the shards) and takes everything from the record it
returns: the plan of each (benchmark, model), the one current verdict per slot that counts, the judges
the run knows and what became of those dropped, and whether the run is complete or partial. No reader
filters by the plan or decides what "done" means on its own (docs/design/reading.md).

A pair's plan: for the models and tables of the newest config, the instances that config selected (the
manifest's `instances`); for a model an earlier config ran and the newest leaves out, the plan it ran
under (the manifest's `earlier_plans`); for a (benchmark, model) no config planned (an import), every
instance its verdicts hold (the import's own plan). An instance of the plan is done when each judge the
pair needs has an error-free current verdict of it: the configured panel for the newest config's pairs,
else every judge that judged the pair.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ifsweep.runner.store.manifest import Manifest, ManifestError, newest_tables, read_manifest
from ifsweep.runner.store.shards import DamageReport

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "JudgeState",
    "PairPlan",
    "PairProgress",
    "RunReading",
    "Verdict",
    "plans_of",
    "read_run",
    "reading_of",
    "selects",
]

Group = tuple[str, str]  # (benchmark table, model id)
# One current verdict: (benchmark, model, judge or None, instance id, in error).
Verdict = tuple[str, str, str | None, str, bool]
Origin = Literal["config", "earlier", "found"]


@dataclass(frozen=True, slots=True)
class PairPlan:
    """What one (benchmark, model) was planned to cover. `instances` None: every instance its verdicts
    hold (no config planned it: an import, or a run whose manifest kept no plan)."""

    benchmark: str
    model: str
    instances: frozenset[str] | None
    origin: Origin  # the newest config's, an earlier config's, or found in the verdicts
    judges: tuple[str, ...] | None = None  # whose verdicts an instance needs; None: those that judged it


@dataclass(frozen=True, slots=True)
class PairProgress:
    """How far one (benchmark, model) is along its plan."""

    benchmark: str
    model: str
    planned: int
    done: int  # instances of the plan with an error-free current verdict of every judge it needs
    failed: int  # instances of the plan with a current verdict in error
    beyond: int  # instances judged that the plan does not select (a `limit` lowered since): left out
    origin: Origin

    @property
    def complete(self) -> bool:
        return self.done >= self.planned and not self.failed


@dataclass(frozen=True, slots=True)
class JudgeState:
    """A judge the run knows. `role`: "panel" (configured now), "dropped" (an earlier config's: its
    verdicts stay and are shown when asked for, but no pair waits for it), "unlisted" (its verdicts
    name a judge no config had: an import's)."""

    judge: str
    role: Literal["panel", "dropped", "unlisted"]
    verdicts: int  # current verdicts of planned instances
    failed: int  # of those, in error


@dataclass(frozen=True, slots=True)
class RunReading:
    """The run directory as every reader sees it. `rows` (the report's path only): the current verdict
    rows of planned instances, lazily, in `metrics.VERDICT_SCHEMA`."""

    run_dir: Path
    manifest: Manifest | None
    plans: Mapping[Group, PairPlan]
    progress: tuple[PairProgress, ...]  # sorted by benchmark, then model
    judges: tuple[JudgeState, ...]
    damaged: tuple[DamageReport, ...] = ()
    rows: pl.LazyFrame | None = field(default=None, compare=False)

    @property
    def panel(self) -> tuple[str, ...]:
        """The configured judges, in config order."""
        return self.manifest.judge_order if self.manifest is not None else ()

    @property
    def complete(self) -> bool:
        """Every pair's plan done without error, and no damaged line hid a record."""
        return bool(self.progress) and not self.damaged and all(p.complete for p in self.progress)

    @property
    def planned(self) -> int:
        return sum(p.planned for p in self.progress)

    @property
    def done(self) -> int:
        return sum(p.done for p in self.progress)

    @property
    def beyond(self) -> int:
        return sum(p.beyond for p in self.progress)

    def of(self, benchmark: str, model: str) -> PairProgress | None:
        return next((p for p in self.progress if (p.benchmark, p.model) == (benchmark, model)), None)

    def selects(self, benchmark: str, model: str, instance_id: str) -> bool:
        """Whether the pair's plan selects the instance (every instance, for a pair no config planned)."""
        plan = self.plans.get((benchmark, model))
        return plan is None or plan.instances is None or instance_id in plan.instances

    def needs(self, benchmark: str, model: str, judge: str | None) -> bool:
        """Whether the pair waits for `judge`'s verdict (a dropped judge's never counts against it)."""
        plan = self.plans.get((benchmark, model))
        return plan is None or plan.judges is None or not plan.judges or judge in plan.judges

    def model_order(self, models: Iterable[str]) -> list[str]:
        """`models` as reports list them: the newest config's order, then any other in natural order."""
        from ifsweep.runner.watch.board import natural_key

        configured = self.manifest.model_order if self.manifest is not None else ()
        present = set(models)
        rest = sorted(present - set(configured), key=natural_key)
        return [m for m in configured if m in present] + rest


def plans_of(manifest: Manifest | None) -> dict[Group, PairPlan]:
    """Every (benchmark, model) plan the manifest records: the newest config's and earlier ones."""
    if manifest is None:
        return {}
    out: dict[Group, PairPlan] = {}
    for bench, plans in manifest.earlier_plans.items():
        for p in plans:
            for model in p.models:
                out[(bench, model)] = PairPlan(bench, model, frozenset(p.instances), "earlier")
    benches, models = newest_tables(manifest)
    panel = manifest.judge_order
    for bench in benches:
        entry = manifest.benchmarks.get(bench)
        instances = None if entry is None or entry.instances is None else frozenset(entry.instances)
        for model in models:
            out[(bench, model)] = PairPlan(bench, model, instances, "config", panel or None)
    return out


def reading_of(
    run_dir: Path,
    manifest: Manifest | None,
    verdicts: Iterable[Verdict] | pl.DataFrame,
    *,
    damaged: Sequence[DamageReport] = (),
    rows: pl.LazyFrame | None = None,
) -> RunReading:
    """The reading of a run from its manifest and its current verdicts (one per slot: Verdict tuples,
    or a frame of their five columns, `benchmark`, `model`, `judge`, `instance_id`, `failed`): the pure
    core that `read_run` (verdict rows) and `status` (the shards' digest) both feed. Vectorized: a
    few group-bys over the verdicts, a Python step per (benchmark, model) only."""
    import polars as pl

    frame = verdicts if isinstance(verdicts, pl.DataFrame) else _verdict_frame(verdicts)
    plans = dict(plans_of(manifest))
    # Each judge a bit: per instance, the bits of the judges with an error-free verdict, and in error.
    bits: dict[str | None, int] = {}
    for j in (
        *(manifest.judge_order if manifest is not None else ()),
        *(manifest.judges if manifest else ()),
        *frame["judge"].unique(maintain_order=True).to_list(),
    ):
        bits.setdefault(j, 1 << len(bits))
    marks = _marks(frame, bits)
    for group in marks.select("benchmark", "model").unique().iter_rows():
        if group not in plans:
            plans[group] = PairPlan(group[0], group[1], None, "found")
    counts, masks = _counted(marks, plans, bits)
    progress = tuple(_progress(plans[g], counts.get(g)) for g in sorted(plans))
    return RunReading(
        run_dir, manifest, plans, progress, _judges(manifest, bits, masks), tuple(damaged), rows
    )


_JUDGE_NONE = "\x00"  # a verdict without a judge, as the bits' frame names it


def _verdict_frame(verdicts: Iterable[Verdict]) -> pl.DataFrame:
    import polars as pl

    text = pl.String()
    schema = {"benchmark": text, "model": text, "judge": text, "instance_id": text, "failed": pl.Boolean()}
    return pl.DataFrame(list(verdicts), schema=schema, orient="row")


def _marks(frame: pl.DataFrame, bits: Mapping[str | None, int]) -> pl.DataFrame:
    """Per (benchmark, model, instance): `ok`, the bits of the judges with an error-free verdict of it,
    and `bad`, of those whose verdict is in error."""
    import polars as pl

    names = {(_JUDGE_NONE if j is None else j): b for j, b in bits.items()}
    bit = pl.col("judge").fill_null(_JUDGE_NONE).replace_strict(names, return_dtype=pl.Int64)
    failed = pl.col("failed").fill_null(False)
    if frame.is_empty():  # the group-by would not know its columns' types
        text = pl.String()
        schema = {"benchmark": text, "model": text, "instance_id": text, "ok": pl.Int64(), "bad": pl.Int64()}
        return pl.DataFrame(schema=schema)
    return frame.group_by("benchmark", "model", "instance_id").agg(
        bit.filter(~failed).bitwise_or().fill_null(0).alias("ok"),
        bit.filter(failed).bitwise_or().fill_null(0).alias("bad"),
    )


_Counts = tuple[int, int, int, int, int]  # (instances found, inside the plan, done, failed, found ids)


def _counted(
    marks: pl.DataFrame, plans: Mapping[Group, PairPlan], bits: Mapping[str | None, int]
) -> tuple[dict[Group, _Counts], dict[tuple[int, int], int]]:
    """Per pair: instances found, those the plan selects, done and failed among them; and over every
    planned instance, how many carry each (ok, bad) pair of marks (for `_judges`)."""
    import polars as pl

    inside = selects(plans)
    # What each pair waits for: its plan's judges, else every judge that judged it.
    judged = marks.group_by("benchmark", "model").agg((pl.col("ok") | pl.col("bad")).bitwise_or().alias("n"))
    needs = {(b, m): _need(plans.get((b, m)), bits, n) for b, m, n in judged.iter_rows()}
    need_frame = pl.DataFrame(
        [(b, m, n) for (b, m), n in needs.items()],
        schema={"benchmark": pl.String, "model": pl.String, "need": pl.Int64},
        orient="row",
    )
    marked = marks.join(need_frame, on=["benchmark", "model"]).with_columns(inside.alias("inside"))
    bad = (pl.col("bad") & pl.col("need")) != 0
    done = ~bad & ((pl.col("ok") & pl.col("need")) == pl.col("need"))
    per = marked.group_by("benchmark", "model").agg(
        pl.len().alias("found"),
        pl.col("inside").sum(),
        (done & pl.col("inside")).sum().alias("done"),
        (bad & pl.col("inside")).sum().alias("failed"),
    )
    counts = {(b, m): (n, i, d, f, n) for b, m, n, i, d, f in per.iter_rows()}
    masks = marked.filter("inside").group_by("ok", "bad").len()
    return counts, {(ok, bad): n for ok, bad, n in masks.iter_rows()}


def selects(plans: Mapping[Group, PairPlan]) -> pl.Expr:
    """RunReading.selects as an expression over `benchmark`, `model` and `instance_id` columns: true
    where the pair's plan selects the instance (every instance, for a pair without a list)."""
    import polars as pl

    pair = pl.concat_str("benchmark", "model", separator="\x1f")
    inside = pl.lit(True)
    # Pairs sharing one instance list share one is_in (a 40-model run has one or two lists).
    by_list: dict[frozenset[str], list[str]] = {}
    for g, p in plans.items():
        if p.instances is not None:
            by_list.setdefault(p.instances, []).append("\x1f".join(g))
    for ids, groups in by_list.items():
        inside = inside & ~(pair.is_in(groups) & ~pl.col("instance_id").is_in(list(ids)))
    return inside


def _need(plan: PairPlan | None, bits: Mapping[str | None, int], judged: int) -> int:
    if plan is None or not plan.judges:
        return judged
    need = 0
    for j in plan.judges:
        need |= bits[j]
    return need


def _progress(plan: PairPlan, counts: _Counts | None) -> PairProgress:
    """One pair's progress from its counts (None: no verdict of it yet)."""
    found, inside, done, failed, _ = counts if counts is not None else (0, 0, 0, 0, 0)
    planned = len(plan.instances) if plan.instances is not None else found
    return PairProgress(plan.benchmark, plan.model, planned, done, failed, found - inside, plan.origin)


def _judges(
    manifest: Manifest | None, bits: Mapping[str | None, int], masks: Mapping[tuple[int, int], int]
) -> tuple[JudgeState, ...]:
    from ifsweep.runner.watch.board import natural_key

    counts: dict[str, list[int]] = {}
    for judge, bit in bits.items():
        if judge is None:
            continue
        judged = sum(n for (ok, bad), n in masks.items() if (ok | bad) & bit)
        in_error = sum(n for (_, bad), n in masks.items() if bad & bit)
        if judged:
            counts[judge] = [judged, in_error]
    panel = manifest.judge_order if manifest is not None else ()
    known = set(manifest.judges) if manifest is not None else set()
    names = [*panel, *sorted((set(counts) | known) - set(panel), key=natural_key)]
    return tuple(
        JudgeState(
            j,
            "panel" if j in panel else "dropped" if j in known else "unlisted",
            counts.get(j, [0, 0])[0],
            counts.get(j, [0, 0])[1],
        )
        for j in names
    )


def read_run(run_dir: Path) -> RunReading:
    """The reading of a run directory from its current verdict rows (the compacted Parquet while it is
    current, else the shards, read once): what `report`, `agreement`, `view`, the library and
    `compact` take everything from. Its `rows` hold the planned instances' rows only."""
    import polars as pl

    from ifsweep import metrics
    from ifsweep.runner.store.compact import held_rows, verdict_rows, without_audit

    run_dir = Path(run_dir)
    manifest = _manifest(run_dir)
    damaged: list[DamageReport] = []
    rows, held = verdict_rows(run_dir, damaged=damaged)
    slots = metrics.streamed(
        rows.group_by("benchmark", "model", "judge", "instance_id").agg(
            (pl.col("status") == "error").any().alias("failed")
        )
    )
    found = slots.select(
        pl.col("benchmark").cast(pl.String),
        pl.col("model").cast(pl.String),
        pl.col("judge").cast(pl.String),
        pl.col("instance_id").cast(pl.String),
        pl.col("failed").fill_null(False),
    )
    plain = reading_of(run_dir, manifest, found, damaged=damaged)
    if held is None:  # over the compacted Parquet: a scan, streamed in batches whatever its size
        planned = _planned_rows(rows, plain.plans)
    else:
        # Rows read from the shards are in memory already: which of them the plan keeps is found once,
        # as a mask, not by each of report's metric passes again (16 over four benchmarks, each testing
        # strings: at full size 1.2 s of them -> 0.4 s), and no filtered copy is held (50 MB).
        at = pl.col("_at")
        kept = _planned_rows(without_audit(held_rows(held).with_row_index("_at")), plain.plans).select(at)
        index = kept.collect().to_series()
        planned = held_rows(held)
        if index.len() < held.height:
            planned = planned.filter(
                pl.lit(pl.zeros(held.height, pl.Boolean, eager=True).scatter(index, True))
            )
    return RunReading(
        plain.run_dir,
        plain.manifest,
        plain.plans,
        plain.progress,
        plain.judges,
        plain.damaged,
        planned,
    )


def _manifest(run_dir: Path) -> Manifest | None:
    try:
        return read_manifest(run_dir)
    except ManifestError:
        return None  # readers of an unreadable manifest see every verdict, as of a run with none


def _planned_rows(rows: pl.LazyFrame, plans: Mapping[Group, PairPlan]) -> pl.LazyFrame:
    """`rows` of the instances each pair's plan selects; pairs without a plan of instances keep all."""
    import polars as pl

    narrowed = {g: p.instances for g, p in plans.items() if p.instances is not None}
    if not narrowed:
        return rows
    bench, model = pl.col("benchmark").cast(pl.String), pl.col("model").cast(pl.String)
    inst = pl.col("instance_id").cast(pl.String)
    # Pairs sharing one instance list share one is_in (a 40-model run has one or two lists).
    by_list: dict[frozenset[str], list[Group]] = {}
    for g, ids in narrowed.items():
        by_list.setdefault(ids, []).append(g)
    keep = ~pl.concat_str(bench, model, separator="\x1f").is_in(["\x1f".join(g) for g in narrowed])
    for ids, groups in by_list.items():
        mine = pl.concat_str(bench, model, separator="\x1f").is_in(["\x1f".join(g) for g in groups])
        keep = keep | (mine & inst.is_in(list(ids)))
    return rows.filter(keep)
