"""After a run or an import: does every planned (model, instance) have its own verdict record?

Counters say how many pairs finished, not that each left a verdict the report can see: two instances
whose verdicts shared a key would count twice and report once. This check looks in the store, by each
pair's own key, and fails loudly on a missing, shared or foreign record, or one whose rows (with the
constraints its benchmark leaves unscored) do not account for every constraint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ifsweep.benchmarks import Instance
from ifsweep.providers.records import EndpointSpec
from ifsweep.runner.engine.pipeline import BenchJob, Pipeline, SupportsComplete
from ifsweep.runner.store.seen import Owner, SeenVerdicts, shared_keys, verdict_problem
from ifsweep.runner.store.shards import RunStore

__all__ = [
    "IncompleteVerdicts",
    "Planned",
    "check_sweep_verdicts",
    "check_verdicts",
    "planned",
    "planned_verdicts",
]

_SHOWN = 5  # problems spelled out in the message; the rest are counted


class IncompleteVerdicts(RuntimeError):
    """Planned pairs without a verdict of their own. `problems` lists each."""

    def __init__(self, problems: list[str], planned: int):
        shown = "\n".join(f"  - {p}" for p in problems[:_SHOWN])
        more = f"\n  ... and {len(problems) - _SHOWN} more" if len(problems) > _SHOWN else ""
        super().__init__(
            f"{len(problems)} of {planned} planned (model, instance) pairs have no verdict of their own; "
            f"reports would leave them out:\n{shown}{more}"
        )
        self.problems = problems


@dataclass(frozen=True, slots=True)
class Planned:
    """One pair that must end with a verdict: its verdict key, whose it must be and what it must be
    derived from (its basis: a verdict left from other code or another answer does not count)."""

    key: str
    model: str
    benchmark: str  # the table's report name
    instance: Instance
    judge: str | None = None  # whose verdict (None: a sweep without judges)
    basis: str | None = None  # None: any basis


def planned(
    pipeline: Pipeline,
    spec: EndpointSpec,
    job: BenchJob,
    inst: Instance,
    unscored: frozenset[int] = frozenset(),
    judge: SupportsComplete | None = None,
) -> Planned:
    """The verdict of `judge` (default: the pipeline's first judge, or none) the pair must end with."""
    judge = judge if judge is not None else pipeline.panel()[0]
    gen_key = pipeline.generation_key(spec, inst)
    ref = pipeline.verdict_ref(gen_key, spec, job, inst, unscored, judge)
    who = judge.spec.label if judge is not None else None
    return Planned(ref.key, spec.label, job.cfg.label, inst, who, ref.basis)


def planned_verdicts(
    pipeline: Pipeline,
    spec: EndpointSpec,
    job: BenchJob,
    inst: Instance,
    unscored: frozenset[int] = frozenset(),
) -> list[Planned]:
    """Every verdict one pair must end with: one per judge of the panel."""
    return [planned(pipeline, spec, job, inst, unscored, judge) for judge in pipeline.panel()]


def check_sweep_verdicts(
    store: RunStore,
    seen: SeenVerdicts,
    owners: Callable[[], Iterable[Owner]],
    pairs: Callable[[], Iterable[Planned]],
) -> None:
    """After a sweep: the verdicts the pipeline saw sound (runner/store/seen.py), whose keys it computed
    once, are one for each owner of the plan (`owners`: read from the plan, not from the pipeline); else
    the full check, which names what is wrong."""
    if not seen.all_sound(owners()):
        check_verdicts(store, pairs)


def check_verdicts(store: RunStore, pairs: Callable[[], Iterable[Planned]]) -> None:
    """Raise IncompleteVerdicts unless every pair `pairs()` yields has its own complete verdict record.
    `pairs` is asked again only to name the pairs that share a key. Memory: 16 bytes a pair."""
    raw = bytearray()
    problems: list[str] = []
    count = 0
    for p in pairs():
        count += 1
        raw += bytes.fromhex(p.key)
        problem = _record_problem(store, p)
        if problem is not None:
            problems.append(f"{_who(p)}: {problem}")
    shared = shared_keys(raw)
    if shared:
        owners: dict[str, list[str]] = {}
        for p in pairs():
            if p.key in shared:
                owners.setdefault(p.key, []).append(_who(p))
        for who in owners.values():
            problems += [f"{w}: shares its verdict key with {who[0]}" for w in who[1:]]
    if problems:
        raise IncompleteVerdicts(problems, count)


def _who(p: Planned) -> str:
    judge = f" (judge {p.judge})" if p.judge is not None else ""
    return f"{p.model} / {p.benchmark} / {p.instance.instance_id}{judge}"


def _record_problem(store: RunStore, p: Planned) -> str | None:
    rec = store.get(p.key)
    if rec is None:
        return "no verdict record"
    owner = (p.model, p.benchmark, p.instance.instance_id, p.judge)
    return verdict_problem(rec, owner, p.basis, len(p.instance.constraints))
