"""Everything the instance page shows of one (benchmark, model, instance), read from the shards by key.

Prompts are not in the shards: the generation's messages come from the benchmark data (sources.py) and
each judge call's messages are rebuilt the way the pipeline built them (the benchmark's plan for this
answer, each turn after the earlier replies, each re-ask after the unparsed replies). A rebuilt prompt is
shown only when it hashes to the key of the record it stands beside: the key covers exactly what was
sent (runner.store.keys), so a match proves these are the messages, and a mismatch shows nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ifsweep.benchmarks import Benchmark, Instance, Message
from ifsweep.runner.store.keys import generation_key, judge_key
from ifsweep.runner.store.manifest import Manifest
from ifsweep.runner.view.index import RunIndex
from ifsweep.runner.view.marks import Entry
from ifsweep.runner.view.sources import InstanceSource

__all__ = ["Detail", "JudgeView", "Turn", "instance_detail"]

Reader = Callable[[str], dict[str, Any] | None]


@dataclass(frozen=True, slots=True)
class Turn:
    """One stored judge call: its record, and the messages sent when they could be proven."""

    task_idx: int
    turn_idx: int
    ask: int
    record: Mapping[str, Any]
    messages: tuple[Message, ...] | None
    decides: tuple[int, ...] = ()  # the constraints its reply decides (known when rebuilt from the plan)


@dataclass(frozen=True, slots=True)
class JudgeView:
    judge: str | None
    verdict: Mapping[str, Any] | None
    turns: tuple[Turn, ...]


@dataclass(frozen=True, slots=True)
class Detail:
    benchmark: str
    model: str
    instance_id: str
    instance: Instance | None
    data_note: str  # why the prompt and constraint texts are missing ("" when shown)
    prompt_proven: bool  # the instance's messages hash to the generation's key
    generation: Mapping[str, Any] | None
    judges: tuple[JudgeView, ...]
    types: tuple[str | None, ...]
    other_models: tuple[str, ...]
    panel: tuple[str | None, ...] = field(default=())


def instance_detail(
    index: RunIndex,
    source: InstanceSource,
    benchmark: str,
    model: str,
    instance_id: str,
    panel: Sequence[str | None] = (),
) -> Detail | None:
    """The page's content, or None when the run holds nothing for this instance of this model."""
    entry = index.groups.get((benchmark, model), {}).get(instance_id)
    if entry is None:
        return None
    gen = index.record(entry.gen_key) if entry.gen_key else None
    inst, found = source.instance(benchmark, instance_id)
    manifest = source.manifest
    proven = inst is not None and gen is not None and _gen_proven(manifest, model, inst, str(gen.get("key")))
    calls = [r for r in (index.record(k) for k in entry.calls) if r is not None]
    judges = [m.judge for m in entry.marks]
    judges += list(dict.fromkeys(str(c.get("judge")) for c in calls if c.get("judge") not in judges))
    order = [j for j in panel if j in judges] + [j for j in judges if j not in panel]
    views = tuple(
        _judge_view(index, entry, j, calls, gen, inst if proven else None, found.bench, manifest, benchmark)
        for j in order
    )
    others = tuple(m for (b, m), group in index.groups.items() if b == benchmark and instance_id in group)
    return Detail(
        benchmark=benchmark,
        model=model,
        instance_id=instance_id,
        instance=inst,
        data_note=found.reason if inst is None else ("" if proven or gen is None else _MISMATCH),
        prompt_proven=proven,
        generation=gen,
        judges=views,
        types=index.types.get((benchmark, instance_id), ()),
        other_models=others,
        panel=tuple(order),
    )


_MISMATCH = (
    "the benchmark data found does not hash to this answer's key (another model setting or data "
    "version): its prompt is not shown"
)


def _msgs(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [m.as_dict() for m in messages]


def _gen_proven(manifest: Manifest | None, model: str, inst: Instance, key: str) -> bool:
    entry = None if manifest is None else manifest.models.get(model)
    if entry is None:
        return False
    return generation_key(entry.endpoint, entry.keyed_params, _msgs(inst.messages)) == key


def _judge_view(
    index: RunIndex,
    entry: Entry,
    judge: str | None,
    calls: Sequence[Mapping[str, Any]],
    gen: Mapping[str, Any] | None,
    inst: Instance | None,
    bench: Benchmark | None,
    manifest: Manifest | None,
    label: str,
) -> JudgeView:
    mark = entry.mark(judge)
    verdict = index.record(mark.key) if mark is not None else None
    turns: list[Turn] = []
    spec = None if manifest is None or judge is None else manifest.judges.get(judge)
    settings = {} if manifest is None else dict(getattr(manifest.benchmarks.get(label), "settings", {}))
    if inst is not None and bench is not None and gen is not None and spec is not None:
        scoring = str((verdict or {}).get("scoring") or "paper")
        reask = settings.get("reask", 0)

        def read(key: str) -> dict[str, Any] | None:
            return index.record(key)

        turns = _rebuilt(bench, inst, str(gen.get("text") or ""), scoring, int(reask), spec, read)
    # Calls the rebuilt conversation does not account for (no data, or not this conversation): as stored.
    shown = {str(t.record.get("key")) for t in turns}
    rest = [_stored(c) for c in calls if c.get("judge") == judge and c.get("key") not in shown]
    turns += sorted(rest, key=lambda t: (t.task_idx, t.turn_idx, t.ask))
    return JudgeView(judge, verdict, tuple(turns))


def _stored(rec: Mapping[str, Any]) -> Turn:
    def at(name: str) -> int:
        v = rec.get(name)
        return v if isinstance(v, int) and not isinstance(v, bool) else -1

    return Turn(at("task_idx"), at("turn_idx"), at("ask"), rec, None)


def _rebuilt(
    bench: Benchmark,
    inst: Instance,
    answer: str,
    scoring: Any,
    reask: int,
    spec: Any,
    read: Reader,
) -> list[Turn]:
    """The judge's calls as the pipeline made them (runner/engine/pipeline.py `_judge_task`), each found
    by the key of its rebuilt messages; a conversation ends where the store has no more of it."""
    out: list[Turn] = []
    for task in bench.plan(inst, answer, scoring).judge_tasks:
        replies: list[str] = []
        for turn_idx in range(len(task.turns)):
            unparsed: list[str] = []
            reply, stop = None, True
            for ask in range(reask + 1):
                messages = task.messages_for_ask(turn_idx, tuple(replies), tuple(unparsed))
                rec = read(judge_key(spec.endpoint, spec.keyed_params, _msgs(messages), ask))
                if rec is None:
                    break
                decides = task.turns[turn_idx].constraint_idxs
                out.append(Turn(task.task_idx, turn_idx, ask, rec, messages, decides))
                if rec.get("status") == "error":
                    break
                reply = str(rec.get("text") or "")
                outcome = bench.parse(inst, task, turn_idx, reply, scoring)
                stop = outcome.stop
                if outcome.parsed:
                    break
                unparsed.append(reply)
            if reply is None or stop:
                break
            replies.append(reply)
    return out
