"""What a run's records add up to per (model, benchmark): dollars spent (the model's answers and the
judge's calls on them), and the pairs that ended in error, by kind.

One tally serves both the sweep's summary.json and `ifsweep status`, so the two never disagree: the
sweep feeds it every record already stored when it starts and then every record it appends; status
feeds it the shards.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ifsweep.runner.store.keys import verdict_slot

if TYPE_CHECKING:
    from ifsweep.providers.records import Completion

Group = tuple[str, str]  # (model label, benchmark label)
Pair = tuple[str, str, str]  # (model label, benchmark label, instance id)

# Decimal places spend figures are rounded to in summary.json and `ifsweep status`: sums of many
# float costs differ in the last bits with the order they were added in.
SPEND_DECIMALS = 10


def group_of(rec: Mapping[str, Any]) -> Group:
    """The (model, benchmark) a call or verdict record belongs to; a judgment belongs to the model
    whose answer it judged."""
    return str(rec.get("model")), str(rec.get("benchmark"))


def _cost(rec: Mapping[str, Any]) -> float:
    return _number(rec, "cost_usd")


def _number(rec: Mapping[str, Any], name: str) -> float:
    v = rec.get(name)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0.0


@dataclass(slots=True)
class GroupSpend:
    generation_usd: float = 0.0
    judge_usd: float = 0.0
    # Prompt tokens paid for, those the providers' prefix caches served, and the dollars that saved.
    input_tokens: int = 0
    cached_tokens: int = 0
    cache_saved_usd: float = 0.0

    @property
    def total_usd(self) -> float:
        return self.generation_usd + self.judge_usd


@dataclass(slots=True)
class SpendTally:
    """Dollars per (model, benchmark). Every call record counts, superseded errors too: they were paid."""

    groups: dict[Group, GroupSpend] = field(default_factory=dict)

    def add(self, rec: Mapping[str, Any]) -> None:
        kind = rec.get("kind")
        if kind not in ("generation", "judgment"):
            return
        g = self.groups.get(group_of(rec))
        if g is None:
            g = self.groups[group_of(rec)] = GroupSpend()
        if kind == "judgment":
            g.judge_usd += _cost(rec)
        else:
            g.generation_usd += _cost(rec)
        g.input_tokens += int(_number(rec, "input_tokens"))
        g.cached_tokens += int(_number(rec, "cached_tokens"))
        g.cache_saved_usd += _number(rec, "cache_saved_usd")

    def fields(self, group: Group) -> dict[str, float | int]:
        """{spent_usd, judge_usd, input_tokens, cached_tokens, cache_saved_usd} of one (model, benchmark):
        its answers plus its judge calls, the judge calls alone, and what prefix caching served and saved."""
        g = self.groups.get(group, GroupSpend())
        return {
            "spent_usd": round(g.total_usd, SPEND_DECIMALS),
            "judge_usd": round(g.judge_usd, SPEND_DECIMALS),
            "input_tokens": g.input_tokens,
            "cached_tokens": g.cached_tokens,
            "cache_saved_usd": round(g.cache_saved_usd, SPEND_DECIMALS),
        }


def _newer_wins(old: tuple[bool, Any] | None, is_error: bool) -> bool:
    # Records of one key in read order: a success is never replaced by a later error (a concurrent
    # writer's stale retry), as the store's own index decides.
    return old is None or not is_error or old[0]


@dataclass(slots=True)
class ErrorTally:
    """The pairs with a verdict in error (its newest record for that key), and why: the answer's error
    kind, or "judge:KIND" when the answer was fine and a judge call failed."""

    _calls: dict[str, tuple[bool, str]] = field(default_factory=dict)  # gen key -> (error, kind)
    _judge: dict[str, tuple[bool, Pair, str]] = field(default_factory=dict)  # key -> (error, pair, kind)
    # key -> (error, pair, gen key, judge)
    _verdicts: dict[str, tuple[bool, Pair, str, str | None]] = field(default_factory=dict)

    def add(self, rec: Mapping[str, Any]) -> None:
        kind, key = rec.get("kind"), str(rec.get("key"))
        is_error = rec.get("status") == "error"
        if kind == "verdict":
            key = verdict_slot(rec)  # one per slot, in a directory of older verdict keys too
            is_error = is_error or any(r.get("status") == "error" for r in rec.get("rows") or [])
        if not _newer_wins(self._slot(kind).get(key), is_error):
            return
        pair = (*group_of(rec), str(rec.get("instance_id")))
        reason = str(rec.get("error_kind") or "other")
        if kind == "generation":
            self._calls[key] = (is_error, reason)
        elif kind == "judgment":
            self._judge[key] = (is_error, pair, reason)
        elif kind == "verdict":
            judge = rec.get("judge")
            self._verdicts[key] = (
                is_error,
                pair,
                str(rec.get("gen_key")),
                None if judge is None else str(judge),
            )

    def _slot(self, kind: object) -> Mapping[str, tuple[Any, ...]]:
        if kind == "generation":
            return self._calls
        return self._judge if kind == "judgment" else self._verdicts

    def by_kind(self, keep: Callable[[Pair, str | None], bool] | None = None) -> dict[str, int]:
        """{kind: pairs} over the pairs in error (the verdicts `keep` accepts, by pair and judge: a
        run's reading keeps its plan's instances and the judges they wait for), most frequent first."""
        judge_kinds: dict[Pair, str] = {}
        for is_error, pair, reason in self._judge.values():
            if is_error:
                judge_kinds.setdefault(pair, reason)
        # A pair counts once, however many verdicts it has (one per judge of a panel): its answer's
        # error if it has one, else the first judge error found.
        kinds: dict[Pair, str] = {}
        for is_error, pair, gen_key, judge in self._verdicts.values():
            if not is_error or (keep is not None and not keep(pair, judge)):
                continue
            gen = self._calls.get(gen_key)
            if gen is not None and gen[0]:
                kinds[pair] = gen[1]
            else:
                kinds.setdefault(pair, f"judge:{judge_kinds.get(pair, 'other')}")
        counts = Counter(kinds.values())
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def errors_message(errors: int, by_kind: Mapping[str, int]) -> str:
    """The line a sweep with pairs in error ends on (and `ifsweep status` repeats)."""
    kinds = ", ".join(f"{kind}: {n}" for kind, n in by_kind.items()) or "kind unknown"
    noun = "pair" if errors == 1 else "pairs"
    if any(kind.rsplit(":", 1)[-1] == "quota" for kind in by_kind):
        # A wait fixes nothing there: the account must get credit first.
        return (
            f"{errors} {noun} ended in error ({kinds}); quota: the provider's account has no credit left "
            "or is over its spend limit: add credit, then run again to retry them"
        )
    return f"{errors} {noun} ended in error ({kinds}); run again to retry them"


def spend_text(spent_usd: float, worst_case_usd: float) -> str:
    """What was spent; when part of it is the worst case of calls whose bill is unknown, which part."""
    if worst_case_usd <= 0:
        return f"${spent_usd:.4f} spent"
    paid = max(0.0, spent_usd - worst_case_usd)
    return (
        f"${spent_usd:.4f} spent (${paid:.4f} paid, as the providers reported; ${worst_case_usd:.4f} the "
        "worst case of calls cut off or cancelled in flight, whose bill is unknown)"
    )


# The pipeline's counters (runner/engine/pipeline.py fills them; the board and status read them): here,
# so a reader of a run never imports the pipeline.
@dataclass(slots=True)
class Calls:
    """Calls made and what they took: prompt and answer tokens, and seconds (summed)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0

    def add(self, c: Completion) -> None:
        self.calls += 1
        self.input_tokens += c.input_tokens
        self.output_tokens += c.output_tokens
        self.latency_s += c.latency_s


@dataclass(slots=True)
class JudgeCounters(Calls):
    """A share of the sweep: the calls it made (above) and its pairs: planned, done (`cached`: finished
    from stored results), in error. As it stands, one judge's share, for the board and summary.json."""

    planned: int = 0
    done: int = 0
    cached: int = 0
    errors: int = 0


@dataclass(slots=True)
class Counters(JudgeCounters):
    """One (model, benchmark)'s share: its pairs and the model's own calls, and the judge's calls on
    its answers apart."""

    judge: Calls = field(default_factory=Calls)
    unparsed: int = 0
    # Verdicts derived anew because what they depend on changed (the scoring code, above all): a resume
    # re-scores them from the stored replies, sending nothing it has.
    rescored: int = 0
    started: float = field(default_factory=time.monotonic)
