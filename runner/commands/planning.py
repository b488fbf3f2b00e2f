"""`ifsweep plan`: what a config will send and may cost, before anything is spent.

Prompt tokens are counted with a real tokenizer (cl100k_base) on a sample of each benchmark's instances
and scaled to the rest through the providers' cheap estimate (which reads 1.3-2.3x high). Answers run
from a quarter of max_tokens to all of it, or, on a resumed run, at the mean length the run has seen.
With caching: the judge prompt tokens cache-aware dispatch (runner/engine/warmup.py) reads from the provider's
cache, at the judge's cached-input price (and the warm calls' cache writes at its write price).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ifsweep.benchmarks import Instance
from ifsweep.providers.pricing import estimate_tokens
from ifsweep.providers.records import EndpointSpec, Price
from ifsweep.runner.config import SweepConfig
from ifsweep.runner.engine.pipeline import BenchJob
from ifsweep.runner.engine.scheduler import Work
from ifsweep.runner.engine.warmup import group_by_prefix, prefix_of
from ifsweep.runner.watch.workload import JUDGE_REPLY_LOW, instance_load

DEFAULT_MAX_TOKENS = 1024
SAMPLE_INSTANCES = 24  # per benchmark, counted with the real tokenizer
MIN_SEEN_CALLS = 5  # answers a resumed run must have seen before their mean replaces the range
# Stands for the answer, not known yet, when finding what a task's judge prompts share.
_ANSWER_MARK = "\u2063ifsweep-answer\u2063"


@dataclass(frozen=True, slots=True)
class JudgeShare:
    """One judge's part of a (model, benchmark): its calls, tokens and cost range."""

    judge: str
    calls: int
    input_tokens: int
    output_low: int
    output_high: int
    cost_low: float | None
    cost_high: float | None
    cached_tokens: int = 0  # of input_tokens, read from the judge's prefix cache (cache-aware dispatch)
    cost_cached_low: float | None = None
    cost_cached_high: float | None = None


@dataclass(frozen=True, slots=True)
class Estimate:
    """One (model, benchmark): its generations plus every judge's calls (`judge_calls`, tokens and
    cost are the whole panel's; `judges` has each judge's share)."""

    model: str
    benchmark: str
    calls: int
    judge_calls: int
    input_tokens: int
    output_low: int
    output_high: int
    cost_low: float | None
    cost_high: float | None
    minutes_by_limits: float | None
    judges: tuple[JudgeShare, ...] = ()
    # Judge prompt tokens cache-aware dispatch reads from cache, and the cost range with that discount
    # (None: no judge caches anything, or a price is unknown).
    judge_cached_tokens: int = 0
    cost_cached_low: float | None = None
    cost_cached_high: float | None = None
    outputs_seen: bool = False  # output tokens are the run's mean so far, not the range
    tokenizer: str | None = None  # what counted the prompt tokens (None: the providers' estimate)


def _max_tokens(spec: EndpointSpec) -> int:
    v = spec.params.get("max_tokens")
    return int(v) if isinstance(v, int) else DEFAULT_MAX_TOKENS


def _price(spec: EndpointSpec) -> Price | None:
    """The price a call of `spec` pays: its Batch API price in batch mode."""
    price = spec.price
    if price is None:
        from ifsweep.providers.pricing import resolve_price

        price = resolve_price(spec)
    return price.for_batch() if price is not None and spec.batch is not None else price


@dataclass(frozen=True, slots=True)
class CacheLoad:
    """One instance's judge prompt tokens (estimated) that cache-aware dispatch serves from cache, and
    those its warm calls write; `answer_*`: how many times the judged answer is in such a prefix."""

    cached: int = 0
    written: int = 0
    answer_cached: int = 0
    answer_written: int = 0


def cache_load(job: BenchJob, inst: Instance) -> CacheLoad:
    """What the judge calls of one instance share, from the same groups the sweep warms."""
    tasks = job.bench.plan(inst, _ANSWER_MARK, job.cfg.scoring).judge_tasks
    if len(tasks) < 2:
        return CacheLoad()
    prompts = [[m.as_dict() for m in t.messages_for_turn(0, ())] for t in tasks]
    cached = written = answer_cached = answer_written = 0
    for group in group_by_prefix(prompts, ""):
        shared = prefix_of(prompts[group.members[0]], group.end)
        has_answer = any(_ANSWER_MARK in m["content"] for m in shared)
        for m in shared:
            m["content"] = m["content"].replace(_ANSWER_MARK, "")
        tokens = estimate_tokens(shared)
        followers = len(group.members) - 1
        cached += followers * tokens
        written += tokens
        answer_cached += followers * has_answer
        answer_written += has_answer
    return CacheLoad(cached, written, answer_cached, answer_written)


@dataclass(frozen=True, slots=True)
class TokenScale:
    """Real tokens per estimated token of a benchmark's prompts, from a sample (1.0 when unknown)."""

    gen: float = 1.0
    judge: float = 1.0


def _real_count(count: Callable[[str], int], messages: Iterable[Mapping[str, str]]) -> int:
    # OpenAI's chat framing: about 4 tokens a message and 3 a request.
    return 3 + sum(4 + count(m.get("content") or "") for m in messages)


def token_scale(job: BenchJob, instances: Sequence[Instance], count: Callable[[str], int]) -> TokenScale:
    """Counts an even sample of `instances` both ways; judge prompts with an empty answer, as planned."""
    step = max(1, len(instances) // SAMPLE_INSTANCES)
    est_gen = real_gen = est_judge = real_judge = 0
    for inst in list(instances)[::step][:SAMPLE_INSTANCES]:
        msgs = [m.as_dict() for m in inst.messages]
        est_gen += estimate_tokens(msgs)
        real_gen += _real_count(count, msgs)
        for task in job.bench.plan(inst, "", job.cfg.scoring).judge_tasks:
            first = [m.as_dict() for m in task.messages_for_turn(0, ())]
            est_judge += estimate_tokens(first)
            real_judge += _real_count(count, first)
    return TokenScale(real_gen / est_gen if est_gen else 1.0, real_judge / est_judge if est_judge else 1.0)


@dataclass(frozen=True, slots=True)
class Seen:
    """Mean output tokens a run directory's calls have shown: generations per (model, benchmark),
    judge replies per benchmark."""

    gen: Mapping[tuple[str, str], tuple[int, float]]
    judge: Mapping[str, tuple[int, float]]


def seen_outputs(run_dir: Path) -> Seen:
    """Read-only: the run directory's shards, when there are any (nothing when it does not exist)."""
    from ifsweep.runner.store.shards import scan_shards

    gen: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    judge: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    if Path(run_dir).is_dir():
        for sl in scan_shards(run_dir, [], kinds=("generation", "judgment")):
            if sl.is_error:
                continue
            rec = sl.record()
            out = rec.get("output_tokens")
            if not isinstance(out, int) or rec.get("usage_estimated"):
                continue
            bench = str(rec.get("benchmark"))
            acc = gen[(str(rec.get("model")), bench)] if sl.kind == "generation" else judge[bench]
            acc[0] += 1
            acc[1] += out
    return Seen(
        {k: (int(n), total / n) for k, (n, total) in gen.items() if n},
        {k: (int(n), total / n) for k, (n, total) in judge.items() if n},
    )


def _judge_caches(judge: EndpointSpec) -> bool:
    from ifsweep.providers.pool import resolve_route
    from ifsweep.providers.send.prefix import caches_prefixes

    route = resolve_route(judge)
    return caches_prefixes(judge, route.provider, route.api_base)


@dataclass(frozen=True, slots=True)
class _BenchLoad:
    """One benchmark's instances summed up: what a model's pairs of it ask. Token counts are the
    providers' estimate scaled to the real tokenizer's; the judged answer is left out (not known)."""

    job: BenchJob
    calls: int  # one generation per instance
    judge_calls: int
    prompt_tokens: int
    judge_prompt_tokens: int
    cache: CacheLoad  # summed over the instances; its token counts scaled like the judge's

    def judge_input(self, answer: int) -> int:
        return self.judge_prompt_tokens + self.judge_calls * answer

    def cached(self, answer: int) -> tuple[int, int]:
        """Judge prompt tokens read from the prefix cache, and written to it, at `answer` tokens."""
        c = self.cache
        return c.cached + answer * c.answer_cached, c.written + answer * c.answer_written


def _bench_load(job: BenchJob, instances: Sequence[Instance], scale: TokenScale, caching: bool) -> _BenchLoad:
    loads = [instance_load(job, inst) for inst in instances]
    caches = [cache_load(job, inst) for inst in instances] if caching else []
    return _BenchLoad(
        job=job,
        calls=len(instances),
        judge_calls=sum(load.judge_calls for load in loads),
        prompt_tokens=round(scale.gen * sum(load.prompt_tokens for load in loads)),
        judge_prompt_tokens=round(scale.judge * sum(load.judge_prompt_tokens for load in loads)),
        cache=CacheLoad(
            round(scale.judge * sum(c.cached for c in caches)),
            round(scale.judge * sum(c.written for c in caches)),
            sum(c.answer_cached for c in caches),
            sum(c.answer_written for c in caches),
        ),
    )


@dataclass(frozen=True, slots=True)
class _Panel:
    """The judges of a config as every estimate prices them, and what the run has seen so far."""

    judges: Sequence[EndpointSpec]
    prices: Mapping[str, Price | None]
    caching: Mapping[str, bool]  # by judge: whether its provider caches prompt prefixes
    seen: Seen

    @property
    def any_caching(self) -> bool:
        return any(self.caching.values())


Done = Mapping[tuple[str, str], frozenset[str]]  # (model, benchmark) -> instance ids


def estimate(
    cfg: SweepConfig, work: Work, *, real_tokens: bool = True, done: Done | None = None
) -> list[Estimate]:
    """Per model and benchmark: its calls, tokens, cost range and the minutes its limits imply; with
    `done` (`done_instances`), of the instances left to do only."""
    panel = _Panel(
        cfg.judges,
        {j.label: _price(j) for j in cfg.judges},
        {j.label: _judge_caches(j) for j in cfg.judges},
        seen_outputs(cfg.run.output_dir),
    )
    count = None
    if real_tokens:
        from ifsweep.providers.pricing import token_counter

        count = token_counter()
    tokenizer = "cl100k_base" if count is not None else None
    out = []
    for job, instances in work.jobs:
        scale = token_scale(job, instances, count) if count is not None else TokenScale()
        for spec in cfg.models:
            finished = (done or {}).get((spec.label, job.cfg.label), frozenset())
            left = [inst for inst in instances if inst.instance_id not in finished]
            load = _bench_load(job, left, scale, panel.any_caching)
            out.append(_estimate_one(spec, load, panel, tokenizer))
    order = {spec.label: i for i, spec in enumerate(cfg.models)}
    return sorted(out, key=lambda e: order[e.model])  # stable: benchmarks in config order per model


def done_instances(run_dir: Path, judges: Sequence[str]) -> dict[tuple[str, str], frozenset[str]]:
    """Per (model, benchmark), the instances with a current verdict free of errors from every judge of
    `judges` (none: a sweep without a judge): what a run into `run_dir` would not do again. Read from
    the store's current verdict rows (runner/store/compact.py)."""
    if not (Path(run_dir) / "shards").is_dir():
        return {}
    import polars as pl

    from ifsweep.runner.store.compact import scan_verdict_rows

    slots = scan_verdict_rows(Path(run_dir)).group_by("benchmark", "model", "judge", "instance_id")
    found = slots.agg((pl.col("status") == "error").any().alias("failed")).collect()
    good: dict[tuple[str, str, str], set[str | None]] = defaultdict(set)
    for bench, model, judge, iid, failed in found.iter_rows():
        if not failed:
            good[(str(model), str(bench), str(iid))].add(judge)
    need: set[str | None] = set(judges) or {None}
    out: dict[tuple[str, str], set[str]] = defaultdict(set)
    for (model, bench, iid), by in good.items():
        if need <= by:
            out[(model, bench)].add(iid)
    return {k: frozenset(v) for k, v in out.items()}


def _estimate_one(spec: EndpointSpec, b: _BenchLoad, panel: _Panel, tokenizer: str | None) -> Estimate:
    price, gen_max, bench = _price(spec), _max_tokens(spec), b.job.cfg.label
    # the judged answer is not known yet: a mid-length answer, or the mean this run has seen
    gen_mean = _mean_seen(panel.seen.gen.get((spec.label, bench)))
    if gen_mean is not None:
        answer = round(gen_mean)
        out_low = out_high = round(b.calls * gen_mean)
    else:
        answer, out_low, out_high = gen_max // 2, b.calls * gen_max // 4, b.calls * gen_max
    judge_mean = _mean_seen(panel.seen.judge.get(bench))
    shares = [_judge_share(judge, b, answer, judge_mean, panel) for judge in panel.judges]
    cost_low = cost_high = cached_low = cached_high = None
    if price is not None and all(s.cost_low is not None for s in shares):
        gen_low, gen_high = price.cost(b.prompt_tokens, out_low), price.cost(b.prompt_tokens, out_high)
        cost_low = gen_low + sum(s.cost_low or 0.0 for s in shares)
        cost_high = gen_high + sum(s.cost_high or 0.0 for s in shares)
        if panel.any_caching:
            cached_low = gen_low + sum(s.cost_cached_low or 0.0 for s in shares)
            cached_high = gen_high + sum(s.cost_cached_high or 0.0 for s in shares)
    return Estimate(
        model=spec.label,
        benchmark=bench,
        calls=b.calls,
        judge_calls=b.judge_calls * len(shares),
        input_tokens=b.prompt_tokens + b.judge_input(answer) * len(shares),
        output_low=out_low + sum(s.output_low for s in shares),
        output_high=out_high + sum(s.output_high for s in shares),
        cost_low=cost_low,
        cost_high=cost_high,
        minutes_by_limits=_minutes(spec, b.calls, b.prompt_tokens + out_high),
        judges=tuple(shares),
        judge_cached_tokens=sum(s.cached_tokens for s in shares),
        cost_cached_low=cached_low,
        cost_cached_high=cached_high,
        outputs_seen=gen_mean is not None or (judge_mean is not None and bool(shares)),
        tokenizer=tokenizer,
    )


def _mean_seen(seen: tuple[int, float] | None) -> float | None:
    """The mean output tokens a run has seen, once it has seen enough calls to go by."""
    return seen[1] if seen is not None and seen[0] >= MIN_SEEN_CALLS else None


def _judge_share(
    judge: EndpointSpec, b: _BenchLoad, answer: int, judge_mean: float | None, panel: _Panel
) -> JudgeShare:
    """One judge's part: every judge of the panel makes the same calls, each at its own max_tokens and
    price, with the cache discount only where that judge's provider caches prefixes."""
    calls, jin = b.judge_calls, b.judge_input(answer)
    j_low, j_high = calls * JUDGE_REPLY_LOW, calls * _max_tokens(judge)
    if judge_mean is not None:
        j_low = j_high = round(calls * judge_mean)
    jp = panel.prices[judge.label]
    known = jp is not None or calls == 0
    jp = jp or Price(0.0, 0.0)
    hit, wrote = b.cached(answer) if panel.caching[judge.label] else (0, 0)
    return JudgeShare(
        judge=judge.label,
        calls=calls,
        input_tokens=jin,
        output_low=j_low,
        output_high=j_high,
        cost_low=jp.cost(jin, j_low) if known else None,
        cost_high=jp.cost(jin, j_high) if known else None,
        cached_tokens=hit,
        cost_cached_low=jp.cost(jin, j_low, hit, wrote) if known else None,
        cost_cached_high=jp.cost(jin, j_high, hit, wrote) if known else None,
    )


def _minutes(spec: EndpointSpec, calls: int, tokens: int) -> float | None:
    bounds = []
    if spec.rpm:
        bounds.append(calls / spec.rpm)
    if spec.tpm:
        bounds.append(tokens / spec.tpm)
    return max(bounds) if bounds else None


def _range(low: float | None, high: float | None) -> str:
    return "unknown price" if low is None or high is None else f"{low:.4f}-{high:.4f}"


def render_estimate(rows: list[Estimate]) -> str:
    caching = any(r.cost_cached_low is not None for r in rows)
    head = (
        f"{'model':20s} {'benchmark':14s} {'calls':>7s} {'judge':>7s} {'tokens in':>10s} "
        f"{'tokens out':>17s} {'cost $':>19s}"
        + (f" {'cached in':>10s} {'with cache $':>19s}" if caching else "")
        + f" {'min*':>7s}"
    )
    lines = [head, "-" * len(head)]
    lo = hi = clo = chi = 0.0
    unknown = False
    for r in rows:
        if r.cost_low is None or r.cost_high is None:
            unknown = True
        else:
            lo += r.cost_low
            hi += r.cost_high
            clo += r.cost_low if r.cost_cached_low is None else r.cost_cached_low
            chi += r.cost_high if r.cost_cached_high is None else r.cost_cached_high
        mins = "-" if r.minutes_by_limits is None else f"{r.minutes_by_limits:.1f}"
        with_cache = (
            f" {r.judge_cached_tokens:10d} {_range(r.cost_cached_low, r.cost_cached_high):>19s}"
            if caching
            else ""
        )
        lines.append(
            f"{r.model[:20]:20s} {r.benchmark:14s} {r.calls:7d} {r.judge_calls:7d} {r.input_tokens:10d} "
            f"{r.output_low:8d}-{r.output_high:<8d} {_range(r.cost_low, r.cost_high):>19s}"
            f"{with_cache} {mins:>7s}"
        )
    more = " (plus models with unknown prices)" if unknown else ""
    lines += ["", f"total cost ${lo:.4f}-${hi:.4f}{more}"]
    if caching:
        lines.append(f"with caching ${clo:.4f}-${chi:.4f}{more} (judge calls warmed by shared prefix)")
    lines.append("* minutes the model's own rpm/tpm limits imply; judge calls share the judge's limits")
    if any(r.tokenizer for r in rows):
        lines.append("prompt tokens: cl100k_base on a sample of each benchmark, scaled to the rest")
    if any(r.outputs_seen for r in rows):
        lines.append("output tokens of some rows are the mean this run has seen so far")
    judges = _by_judge(rows)
    if judges:
        head = f"{'judge':20s} {'calls':>8s} {'tokens in':>10s} {'tokens out':>17s} {'cost $':>19s}"
        lines += ["", head, "-" * len(head)]
        for j in judges:
            lines.append(
                f"{j.judge[:20]:20s} {j.calls:8d} {j.input_tokens:10d} {j.output_low:8d}-{j.output_high:<8d} "
                f"{_range(j.cost_low, j.cost_high):>19s}"
            )
    return "\n".join(lines)


def render_strata(cfg: SweepConfig, work: Work) -> str:
    """How the plan is walked, and each benchmark's sampling units per stratum (runner/engine/order.py)."""
    if cfg.run.order == "file":
        head = "order: file (each benchmark in turn, as its data lists it; `limit` = the first N instances)"
    else:
        head = (
            f"order: seeded (seed {cfg.run.order_seed}): benchmarks interleaved, units drawn at random "
            "within strata; `limit` = the first N units, so every stratum is sampled"
        )
    lines = [head]
    for (job, instances), strata in zip(work.jobs, work.strata, strict=True):
        units = sum(len(ids) for ids in strata.values())
        planned = len({inst.group_id for inst in instances})
        share = f"{units} units" if planned == units else f"{planned} of {units} units (limit)"
        parts = ", ".join(f"{name} {len(ids)}" for name, ids in strata.items())
        lines.append(f"  {job.cfg.label}: {share}, {len(instances)} instances; strata: {parts}")
    return "\n".join(lines)


def _by_judge(rows: list[Estimate]) -> list[JudgeShare]:
    """Each judge's calls, tokens and cost over every (model, benchmark), in config order."""
    out: dict[str, JudgeShare] = {}
    for r in rows:
        for s in r.judges:
            t = out.get(s.judge)
            if t is None:
                out[s.judge] = s
                continue
            both = t.cost_low is not None and s.cost_low is not None
            out[s.judge] = JudgeShare(
                s.judge,
                t.calls + s.calls,
                t.input_tokens + s.input_tokens,
                t.output_low + s.output_low,
                t.output_high + s.output_high,
                (t.cost_low or 0.0) + (s.cost_low or 0.0) if both else None,
                (t.cost_high or 0.0) + (s.cost_high or 0.0) if both else None,
                t.cached_tokens + s.cached_tokens,
                (t.cost_cached_low or 0.0) + (s.cost_cached_low or 0.0) if both else None,
                (t.cost_cached_high or 0.0) + (s.cost_cached_high or 0.0) if both else None,
            )
    return list(out.values())


def render_progress(rows: list[Estimate], run_dir: Path, work: Work, done: Done, models: int) -> str:
    """`ifsweep plan` on a run directory holding results, first: what remains of the plan (pairs,
    calls, tokens, cost range, time by the limits), then what is done and what it cost so far."""
    from ifsweep.runner.watch.status import status_report

    planned = {(job.cfg.label, inst.instance_id) for job, instances in work.jobs for inst in instances}
    finished = sum(1 for (_, bench), ids in done.items() for iid in ids if (bench, iid) in planned)
    total = len(planned) * models
    lows = [r.cost_low for r in rows]
    highs = [r.cost_high for r in rows]
    cost = (
        "unknown (a price is missing)"
        if None in lows or None in highs
        else f"${sum(x or 0.0 for x in lows):.4f}-${sum(x or 0.0 for x in highs):.4f}"
    )
    per_model: dict[str, float] = defaultdict(float)
    for r in rows:
        per_model[r.model] += r.minutes_by_limits or 0.0
    slowest = max(per_model.values(), default=0.0)
    when = f"; at least {slowest:.1f} min by the models' rpm/tpm limits" if slowest else ""
    calls = sum(r.calls + r.judge_calls for r in rows if r.calls)
    out_low, out_high = sum(r.output_low for r in rows), sum(r.output_high for r in rows)
    report = status_report(run_dir)
    return "\n".join(
        [
            f"remaining: {total - finished} of {total} planned pairs, cost {cost}{when}",
            f"  {calls} calls, {sum(r.input_tokens for r in rows)} tokens in, {out_low}-{out_high} out"
            " (a pair with some calls stored sends only the rest: an upper bound)",
            f"done: {finished} of {total} pairs; spent so far ${report.spent_usd:.4f} (answers and every "
            f"judge's calls, `ifsweep status {run_dir}`)",
            "",
            "remaining, per model and benchmark:",
        ]
    )
