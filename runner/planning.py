"""`ifsweep plan`: what a config will send and may cost, before anything is spent.

Token counts are the providers' cheap estimate (it leans high), and the cost range runs from short
answers (a quarter of max_tokens) to every answer at max_tokens. Prompts longer than a model's context
window (runner/windows.py) are counted and warned of: they would only end as `context_length` errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ifsweep.benchmarks import Instance
from ifsweep.providers.pricing import estimate_tokens
from ifsweep.providers.records import EndpointSpec, Price
from ifsweep.runner.config import SweepConfig
from ifsweep.runner.pipeline import BenchJob
from ifsweep.runner.scheduler import Work
from ifsweep.runner.windows import Window, window_of

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
    # The model's context window (None: unknown), and the generation prompts over it: `over_window`
    # by a typical count (about 4 characters a token), `may_exceed` only by the upper-leaning one.
    window: Window | None = None
    over_window: int = 0
    may_exceed: int = 0
    longest_prompt: int = 0  # tokens, typical count
    # The same for the judge's prompts of this benchmark (the judged answer left out): pairs with a judge
    # prompt over the judge's window, and the longest such prompt.
    judge_window: Window | None = None
    judge_over_window: int = 0
    judge_longest_prompt: int = 0


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
    typical_prompt_tokens: int = 0  # the generation prompt by `typical_tokens`
    typical_judge_longest: int = 0  # the longest judge prompt by `typical_tokens`, the answer left out


def instance_load(job: BenchJob, inst: Instance) -> InstanceLoad:
    """The calls and prompt tokens one instance costs; `ifsweep plan` and the sweep's ETA both count
    from this. A multi-turn task's earlier judge replies count as short verdicts."""
    judge_calls = judge_tokens = depth = judge_longest = 0
    for task in job.bench.plan(inst, "", job.cfg.scoring).judge_tasks:
        replies: tuple[str, ...] = ()
        for t in range(len(task.turns)):
            asked = [m.as_dict() for m in task.messages_for_turn(t, replies)]
            judge_tokens += estimate_tokens(asked)
            judge_longest = max(judge_longest, typical_tokens(asked))
            judge_calls += 1
            replies = (*replies, "x" * 4 * JUDGE_REPLY_LOW)
        depth = max(depth, len(task.turns))
    messages = [m.as_dict() for m in inst.messages]
    return InstanceLoad(
        estimate_tokens(messages), judge_calls, judge_tokens, depth, typical_tokens(messages), judge_longest
    )


def typical_tokens(messages: Sequence[Mapping[str, str]]) -> int:
    """A middle-of-the-road token count, where `estimate_tokens` leans high on purpose (budgets): about
    4 ASCII characters a token (English prose with common tokenizers) and 1 token per wider character
    (CJK), 4 per message for its framing. An estimate: the warning says so."""
    total = 3
    for message in messages:
        content = message.get("content") or ""
        wide = sum(1 for ch in content if ord(ch) > 0x7F) if not content.isascii() else 0
        total += 4 + (len(content) - wide + 3) // 4 + wide
    return total


def estimate(cfg: SweepConfig, work: Work, *, ask_servers: bool = True) -> list[Estimate]:
    """Per (model, benchmark). `ask_servers`: ask each model's api_base for its context window."""
    out = []
    judge = cfg.judge
    judge_price = _price(judge) if judge is not None else None
    judge_window = window_of(judge, ask_server=ask_servers) if judge is not None else None
    for spec in cfg.models:
        price = _price(spec)
        gen_max = _max_tokens(spec)
        window = window_of(spec, ask_server=ask_servers)
        for job, instances in work.jobs:
            calls = len(instances)
            judge_calls = 0
            tin = 0
            jin = 0
            over = maybe = longest = judge_over = judge_longest = 0
            for inst in instances:
                load = instance_load(job, inst)
                tin += load.prompt_tokens
                longest = max(longest, load.typical_prompt_tokens)
                judge_longest = max(judge_longest, load.typical_judge_longest)
                judge_over += judge_window is not None and load.typical_judge_longest > judge_window.tokens
                if window is not None and load.typical_prompt_tokens > window.tokens:
                    over += 1
                elif window is not None and load.prompt_tokens > window.tokens:
                    maybe += 1
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
                    window=window,
                    over_window=over,
                    may_exceed=maybe,
                    longest_prompt=longest,
                    judge_window=judge_window,
                    judge_over_window=judge_over,
                    judge_longest_prompt=judge_longest,
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
    return "\n".join([*lines, *window_warnings(rows)])


def window_warnings(rows: list[Estimate]) -> list[str]:
    """One line per (model, benchmark) whose prompts do not fit the model's context window, and one per
    benchmark whose judge prompts do not fit the judge's."""
    out = []
    judged: set[str] = set()
    for r in rows:
        if r.judge_window is not None and r.judge_over_window and r.benchmark not in judged:
            judged.add(r.benchmark)
            jw = r.judge_window
            out.append(
                f"warning: {r.judge_over_window} of {r.calls} {r.benchmark} pairs have a judge prompt over "
                f"the judge's context window of {jw.tokens} tokens ({jw.source}) before the answer is "
                f"added: longest about {r.judge_longest_prompt} tokens (estimated)"
            )
        if r.window is None or not (r.over_window or r.may_exceed):
            continue
        where = f"{r.model}'s context window of {r.window.tokens} tokens ({r.window.source})"
        if r.over_window:
            out.append(
                f"warning: {r.over_window} of {r.calls} {r.benchmark} prompts exceed {where}: longest about "
                f"{r.longest_prompt} tokens (estimated); they would end as context_length errors"
            )
        if r.may_exceed:
            out.append(
                f"warning: {r.may_exceed} more {r.benchmark} prompts may exceed {where} (by the upper "
                "token estimate)"
            )
    return ["", *out] if out else []
