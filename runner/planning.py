"""`ifsweep plan`: what a config will send and may cost, before anything is spent.

Token counts are the providers' cheap estimate (it leans high), and the cost range runs from short
answers (a quarter of max_tokens) to every answer at max_tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from ifsweep.benchmarks import Instance
from ifsweep.providers.pricing import estimate_tokens
from ifsweep.providers.records import EndpointSpec, Price
from ifsweep.runner.config import SweepConfig
from ifsweep.runner.pipeline import BenchJob
from ifsweep.runner.scheduler import Work

DEFAULT_MAX_TOKENS = 1024
JUDGE_REPLY_LOW = 32  # a bare verdict list or YES/NO with a line of reasoning


@dataclass(frozen=True, slots=True)
class Estimate:
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


def _max_tokens(spec: EndpointSpec) -> int:
    v = spec.params.get("max_tokens")
    return int(v) if isinstance(v, int) else DEFAULT_MAX_TOKENS


def _price(spec: EndpointSpec) -> Price | None:
    if spec.price is not None:
        return spec.price
    from ifsweep.providers.pricing import resolve_price

    return resolve_price(spec)


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


def estimate(cfg: SweepConfig, work: Work) -> list[Estimate]:
    out = []
    judge = cfg.judge
    judge_price = _price(judge) if judge is not None else None
    for spec in cfg.models:
        price = _price(spec)
        gen_max = _max_tokens(spec)
        for job, instances in work.jobs:
            calls = len(instances)
            judge_calls = 0
            tin = 0
            jin = 0
            for inst in instances:
                load = instance_load(job, inst)
                tin += load.prompt_tokens
                judge_calls += load.judge_calls
                # the judged answer is not known yet: count it as a mid-length answer
                jin += load.judge_prompt_tokens + load.judge_calls * (gen_max // 2)
            out_low, out_high = calls * gen_max // 4, calls * gen_max
            j_max = _max_tokens(judge) if judge is not None else 0
            j_low, j_high = judge_calls * JUDGE_REPLY_LOW, judge_calls * j_max
            cost_low = cost_high = None
            if price is not None and (judge_calls == 0 or judge_price is not None):
                jp = judge_price or Price(0.0, 0.0)
                cost_low = price.cost(tin, out_low) + jp.cost(jin, j_low)
                cost_high = price.cost(tin, out_high) + jp.cost(jin, j_high)
            out.append(
                Estimate(
                    model=spec.label,
                    benchmark=job.cfg.label,
                    calls=calls,
                    judge_calls=judge_calls,
                    input_tokens=tin + jin,
                    output_low=out_low + j_low,
                    output_high=out_high + j_high,
                    cost_low=cost_low,
                    cost_high=cost_high,
                    minutes_by_limits=_minutes(spec, calls, tin + out_high),
                )
            )
    return out


def _minutes(spec: EndpointSpec, calls: int, tokens: int) -> float | None:
    bounds = []
    if spec.rpm:
        bounds.append(calls / spec.rpm)
    if spec.tpm:
        bounds.append(tokens / spec.tpm)
    return max(bounds) if bounds else None


def render_estimate(rows: list[Estimate]) -> str:
    head = (
        f"{'model':20s} {'benchmark':14s} {'calls':>7s} {'judge':>7s} {'tokens in':>10s} "
        f"{'tokens out':>17s} {'cost $':>19s} {'min*':>7s}"
    )
    lines = [head, "-" * len(head)]
    lo = hi = 0.0
    unknown = False
    for r in rows:
        cost = "unknown price" if r.cost_low is None else f"{r.cost_low:.4f}-{r.cost_high:.4f}"
        if r.cost_low is None or r.cost_high is None:
            unknown = True
        else:
            lo += r.cost_low
            hi += r.cost_high
        mins = "-" if r.minutes_by_limits is None else f"{r.minutes_by_limits:.1f}"
        lines.append(
            f"{r.model[:20]:20s} {r.benchmark:14s} {r.calls:7d} {r.judge_calls:7d} {r.input_tokens:10d} "
            f"{r.output_low:8d}-{r.output_high:<8d} {cost:>19s} {mins:>7s}"
        )
    total = f"total cost ${lo:.4f}-${hi:.4f}" + (" (plus models with unknown prices)" if unknown else "")
    lines += [
        "",
        total,
        "* minutes the model's own rpm/tpm limits imply; judge calls share the judge's limits",
    ]
    return "\n".join(lines)
