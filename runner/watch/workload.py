"""What a sweep has left, in the units the ETA needs: per model and benchmark, pairs, generation calls,
judge calls and tokens per call (runner/watch/eta.py walks them forward).

The expected judge calls come from each benchmark's plan of an empty answer (`instance_load`, which
`ifsweep plan` counts from too),
counted once over its instances when the sweep starts: about 0.15 s for EIFBench's party set, whose
pairs ask about 80 judge calls each. What has been done comes from the live counters or, for
`ifsweep status`, from the run's shards; both are reduced to a `Tally`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from ifsweep.providers.pricing import estimate_tokens
from ifsweep.runner.watch.eta import INF, Lane, Phase
from ifsweep.runner.watch.outcomes import Counters

if TYPE_CHECKING:  # a reader of a run (`ifsweep status`) imports this module, never the engine
    from ifsweep.benchmarks import Instance
    from ifsweep.runner.engine.pipeline import BenchJob
    from ifsweep.runner.engine.scheduler import Work

JUDGE_REPLY_LOW = 32  # tokens of a bare verdict list, or YES/NO with a line of reasoning
# Calls of a benchmark seen before their mean tokens replace the estimate from its prompts.
MIN_SEEN = 5
# Judge replies of a benchmark that weigh as much as the share unparsed over every benchmark.
PRIOR_CALLS = 20
# Answer length assumed before any answer is in (tokens); judge prompts quote the answer.
DEFAULT_ANSWER_TOKENS = 256


@dataclass(frozen=True, slots=True)
class InstanceLoad:
    """What one pair will ask, read from the plan of an empty answer (the answer is not known yet)."""

    prompt_tokens: int  # the generation prompt (the providers' estimate)
    judge_calls: int
    judge_prompt_tokens: int  # summed over the judge calls, the judged answer left out
    judge_depth: int  # judge calls made one after another: turns of the longest task


def instance_load(job: BenchJob, inst: Instance) -> InstanceLoad:
    """The calls and prompt tokens one instance costs; `ifsweep plan` and the sweep's ETA both count
    from this. A multi-turn task's earlier judge replies count as short verdicts."""
    judge_calls = judge_tokens = depth = 0
    for task in job.bench.plan(inst, "", job.cfg.scoring).judge_tasks:
        replies: tuple[str, ...] = ()
        for t in range(len(task.turns)):
            judge_tokens += estimate_tokens([m.as_dict() for m in task.messages_for_turn(t, replies)])
            judge_calls += 1
            replies = (*replies, "x" * 4 * JUDGE_REPLY_LOW)
        depth = max(depth, len(task.turns))
    prompt = estimate_tokens([m.as_dict() for m in inst.messages])
    return InstanceLoad(prompt, judge_calls, judge_tokens, depth)


@dataclass(frozen=True, slots=True)
class BenchShape:
    """Per pair of one benchmark, on average over its instances."""

    judge_calls: float
    judge_depth: float
    prompt_tokens: float  # the generation prompt
    judge_prompt_tokens: float  # one judge call's prompt without the judged answer
    reask: int = 0  # times an unparsed judge reply is asked again (the benchmark's `reask`)

    def as_json(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def from_json(cls, where: str, obj: object) -> BenchShape:
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: expected an object")
        values = []
        for name in ("judge_calls", "judge_depth", "prompt_tokens", "judge_prompt_tokens"):
            v = obj.get(name)
            if not isinstance(v, int | float) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{where}.{name}: expected a number >= 0, got {v!r}")
            values.append(float(v))
        reask = obj.get("reask", 0)  # a summary written before it was kept: no re-asks foreseen
        if not isinstance(reask, int) or isinstance(reask, bool) or reask < 0:
            raise ValueError(f"{where}.reask: expected an integer >= 0, got {reask!r}")
        calls, depth, prompt, judge_prompt = values
        return cls(calls, depth, prompt, judge_prompt, reask)


def bench_shapes(work: Work) -> dict[str, BenchShape]:
    """Each benchmark's shape, in one pass over its (spooled) instances."""
    out = {}
    for job, instances in work.jobs:
        n = calls = depth = prompt = judge_prompt = 0
        for inst in instances:
            load = instance_load(job, inst)
            n += 1
            calls += load.judge_calls
            depth += load.judge_depth
            prompt += load.prompt_tokens
            judge_prompt += load.judge_prompt_tokens
        out[job.cfg.label] = BenchShape(
            calls / max(n, 1),
            depth / max(n, 1),
            prompt / max(n, 1),
            judge_prompt / max(calls, 1),
            job.cfg.reask,
        )
    return out


@dataclass(frozen=True, slots=True)
class Tally:
    """What one (model, benchmark) has done. `cached`: pairs finished from stored results, which cost
    no call. Tokens are prompt plus answer."""

    planned: int
    finished: int  # done or failed
    cached: int = 0
    gen_calls: int = 0
    judge_calls: int = 0
    gen_tokens: int = 0
    gen_output_tokens: int = 0
    judge_tokens: int = 0
    gen_latency_s: float = 0.0  # summed over the calls
    judge_latency_s: float = 0.0
    unparsed: int = 0  # judge replies no parser read (each is asked again while re-asks are left)

    @classmethod
    def of(cls, c: Counters) -> Tally:
        return cls(
            planned=c.planned,
            finished=c.done + c.errors,
            cached=c.cached,
            gen_calls=c.calls,
            judge_calls=c.judge.calls,
            gen_tokens=c.input_tokens + c.output_tokens,
            gen_output_tokens=c.output_tokens,
            judge_tokens=c.judge.input_tokens + c.judge.output_tokens,
            gen_latency_s=c.latency_s,
            judge_latency_s=c.judge.latency_s,
            unparsed=c.unparsed,
        )


@dataclass(frozen=True, slots=True)
class TokenMeans:
    """Tokens per call by benchmark: seen ones where enough calls are in, else from the prompts."""

    gen: Mapping[str, float]
    judge: Mapping[str, float]


def token_means(tallies: Mapping[tuple[str, str], Tally], shapes: Mapping[str, BenchShape]) -> TokenMeans:
    # per benchmark: generation calls, their tokens, judge calls, their tokens; and answers' tokens
    sums: dict[str, list[int]] = {b: [0, 0, 0, 0] for b in shapes}
    answers = 0
    for (_m, bench), t in tallies.items():
        s = sums.setdefault(bench, [0, 0, 0, 0])
        s[0] += t.gen_calls
        s[1] += t.gen_tokens
        s[2] += t.judge_calls
        s[3] += t.judge_tokens
        answers += t.gen_output_tokens
    gen_calls = sum(s[0] for s in sums.values())
    answer = answers / gen_calls if gen_calls else DEFAULT_ANSWER_TOKENS
    gen, judge = {}, {}
    for bench, shape in shapes.items():
        calls, tokens, judged, judge_tokens = sums[bench]
        gen[bench] = tokens / calls if calls >= MIN_SEEN else shape.prompt_tokens + answer
        judge[bench] = (
            judge_tokens / judged
            if judged >= MIN_SEEN
            else shape.judge_prompt_tokens + answer + JUDGE_REPLY_LOW
        )
    return TokenMeans(gen, judge)


def judge_per_pair(
    tallies: Mapping[tuple[str, str], Tally], shapes: Mapping[str, BenchShape], workers: Mapping[str, int]
) -> dict[str, float]:
    """Judge calls per pair of each benchmark. The plan counts one call per judge turn; an unparsed
    reply is asked again, up to `reask` times, so at a share u of replies unparsed a turn takes
    1 + u + ... + u^reask calls (`calls_per_turn`); a benchmark's first replies are weighed against
    PRIOR_CALLS replies at the judge's share over every benchmark. Then that is moved into what the
    calls made so far allow: J calls came from the F pairs finished afresh and the pairs in flight, at
    most I of them (a model's workers, or its pairs left), so at least J / (F + I) a pair and at most
    J / F. The bounds catch what the plan cannot foresee either way: a protocol's early stops, longer
    tasks."""
    seen: dict[str, list[float]] = {}  # per benchmark: calls, unparsed, pairs finished, pairs in flight
    for (model, bench), t in tallies.items():
        s = seen.setdefault(bench, [0.0, 0.0, 0.0, 0.0])
        left = max(0, t.planned - t.finished)
        s[0] += t.judge_calls
        s[1] += t.unparsed
        s[2] += max(0, t.finished - t.cached)
        s[3] += min(left, workers.get(model, left))
    out = {}
    everywhere = sum(s[0] for s in seen.values())
    judge_share = sum(s[1] for s in seen.values()) / everywhere if everywhere else 0.0
    for bench, shape in shapes.items():
        calls, unparsed, finished, in_flight = seen.get(bench, (0.0, 0.0, 0.0, 0.0))
        # A benchmark's first replies say little (one garbled reply is not a share of 1): they are
        # weighed against PRIOR_CALLS replies at the share over every benchmark.
        share = (unparsed + PRIOR_CALLS * judge_share) / (calls + PRIOR_CALLS)
        planned = shape.judge_calls * calls_per_turn(share, shape.reask)
        low = calls / (finished + in_flight) if finished + in_flight else 0.0
        high = calls / finished if finished else INF
        out[bench] = min(max(planned, low), high)
    return out


def calls_per_turn(unparsed_share: float, reask: int) -> float:
    """Calls one judge turn takes when each reply is unparsed at `unparsed_share` (asked again up to
    `reask` times). Stored replies a resumed run reads count as unparsed too, so the share may read
    above 1; it is capped there."""
    u = min(1.0, unparsed_share)
    return sum(u**k for k in range(reask + 1))


def phase_of(t: Tally, shape: BenchShape, gen_tokens: float, judge_tokens: float, per_pair: float) -> Phase:
    """What is left of one (model, benchmark), at `per_pair` judge calls a pair (`judge_per_pair`).
    Pairs in flight have made some of their calls: those made beyond what the finished pairs needed
    are taken off what is left. A pair answered but not finished has at least one judge call to come
    (a call is counted when its reply is in), so while one is, the total never reads done."""
    pairs = max(0, t.planned - t.finished)
    fresh = max(0, t.finished - t.cached)
    gen_left = min(pairs, max(0, pairs - max(0, t.gen_calls - fresh)))
    expected = per_pair * pairs
    in_flight = max(0.0, t.judge_calls - per_pair * fresh)
    judge_left = min(expected, max(0.0, expected - in_flight))
    if per_pair > 0:
        judge_left = max(judge_left, float(pairs - gen_left))
    return Phase(pairs, gen_left, judge_left, gen_tokens, judge_tokens, shape.judge_depth)


def lanes_of(
    tallies: Mapping[tuple[str, str], Tally],
    shapes: Mapping[str, BenchShape],
    order: Sequence[str],
    workers: Mapping[str, int],
) -> list[Lane]:
    """One lane per model, its benchmarks in `order` (the order the scheduler takes them)."""
    means = token_means(tallies, shapes)
    per_pair = judge_per_pair(tallies, shapes, workers)
    models = dict.fromkeys(m for m, _b in tallies)
    lanes = []
    for model in models:
        phases = tuple(
            phase_of(tallies[(model, b)], shapes[b], means.gen[b], means.judge[b], per_pair[b])
            for b in order
            if (model, b) in tallies and b in shapes
        )
        lanes.append(Lane(model, phases, workers.get(model, 1)))
    return lanes


def calls_left(lanes: Sequence[Lane], judge: str | None) -> dict[str, float]:
    """Calls each endpoint is expected still to make: a model's generations, the judge's calls."""
    out = {lane.label: sum(p.gen_calls for p in lane.phases) for lane in lanes}
    if judge is not None:
        out[judge] = sum(p.judge_calls for lane in lanes for p in lane.phases)
    return out


@dataclass(slots=True)
class Use:
    """What one endpoint has done so far: calls, tokens, and the seconds its calls took."""

    calls: int = 0
    tokens: int = 0
    latency_s: float = 0.0

    def add(self, calls: int, tokens: int, latency_s: float) -> None:
        self.calls += calls
        self.tokens += tokens
        self.latency_s += latency_s


def use_by_endpoint(tallies: Mapping[tuple[str, str], Tally], judge: str | None) -> dict[str, Use]:
    """Per endpoint label: each model's generations, and the judge's calls for every model."""
    out: dict[str, Use] = {}
    for (model, _b), t in tallies.items():
        out.setdefault(model, Use()).add(t.gen_calls, t.gen_tokens, t.gen_latency_s)
    if judge is not None:
        j = out.setdefault(judge, Use())
        for t in tallies.values():
            j.add(t.judge_calls, t.judge_tokens, t.judge_latency_s)
    return out
