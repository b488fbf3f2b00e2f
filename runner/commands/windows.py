"""Prompts that cannot fit a model's context window, found by `ifsweep plan` before anything is spent.

A window comes from, in order: the config's `context_window = N`; what the endpoint's own server reports
when it has an api_base (llama.cpp `GET /props`: `default_generation_settings.n_ctx`, the context of one
slot; vLLM `GET /v1/models`: `max_model_len`); LiteLLM's model map (`max_input_tokens`, read without
importing litellm). None when no source knows.

Prompt sizes are estimates (no tokenizer of the served model is at hand): a typical count (about 4 ASCII
characters or 1 wider character a token) says which prompts exceed a window; the providers' upper-leaning
estimate (`estimate_tokens`) says which may. Judge prompts are counted without the judged answer (not
known yet), so they are a floor.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import orjson

from ifsweep.providers import price_map
from ifsweep.providers.pricing import estimate_tokens
from ifsweep.providers.records import EndpointSpec

if TYPE_CHECKING:
    from ifsweep.benchmarks import Instance
    from ifsweep.runner.config import SweepConfig
    from ifsweep.runner.engine.pipeline import BenchJob
    from ifsweep.runner.engine.scheduler import Work

ASK_TIMEOUT_S = 2.0  # a local server answers at once; a remote one that does not is not waited for


@dataclass(frozen=True, slots=True)
class Window:
    tokens: int
    source: str  # where the figure came from, as the warning names it


def _get_json(url: str, key: str | None) -> Any:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=ASK_TIMEOUT_S) as resp:
            return orjson.loads(resp.read())
    except (OSError, urllib.error.URLError, ValueError):
        return None


def _positive(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def server_window(api_base: str, model: str, key: str | None = None) -> Window | None:
    """The window a local server reports for `model` (the name it serves, without the provider prefix)."""
    base = api_base.rstrip("/")
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    props = _get_json(f"{root}/props", key)
    if isinstance(props, dict):
        settings = props.get("default_generation_settings")
        n_ctx = _positive(settings.get("n_ctx")) if isinstance(settings, dict) else None
        if n_ctx is not None:
            return Window(n_ctx, f"{root}/props n_ctx (per slot)")
    listing = _get_json(f"{base}/models", key)
    data = listing.get("data") if isinstance(listing, dict) else None
    if isinstance(data, list):
        sized = [(m.get("id"), _positive(m.get("max_model_len"))) for m in data if isinstance(m, dict)]
        sized = [(name, n) for name, n in sized if n is not None]
        chosen = [n for name, n in sized if name == model] or ([sized[0][1]] if len(sized) == 1 else [])
        if chosen and chosen[0] is not None:
            return Window(chosen[0], f"{base}/models max_model_len")
    return None


def window_of(spec: EndpointSpec, *, ask_server: bool = True) -> Window | None:
    if spec.context_window is not None:
        return Window(spec.context_window, "config context_window")
    if spec.api_base and ask_server:
        key = os.environ.get(spec.api_key_env) if spec.api_key_env else None
        served = spec.model.partition("/")[2] or spec.model
        found = server_window(spec.api_base, served, key)
        if found is not None:
            return found
    entry = price_map.lookup(spec.model)
    if entry is not None and entry.max_input_tokens is not None:
        return Window(entry.max_input_tokens, "LiteLLM model map max_input_tokens")
    return None


# ---------------------------------------------------------------------------------------------- checks


def typical_tokens(messages: Sequence[Mapping[str, str]]) -> int:
    """A middle-of-the-road token count, where `estimate_tokens` leans high on purpose (budgets): about
    4 ASCII characters a token (English prose with common tokenizers), 1 per wider character (CJK), 4 per
    message for its framing."""
    total = 3
    for message in messages:
        content = message.get("content") or ""
        wide = sum(1 for ch in content if ord(ch) > 0x7F) if not content.isascii() else 0
        total += 4 + (len(content) - wide + 3) // 4 + wide
    return total


@dataclass(frozen=True, slots=True)
class Sizes:
    """One prompt's size by both counts."""

    typical: int
    upper: int

    @classmethod
    def of(cls, messages: Sequence[Mapping[str, str]]) -> Sizes:
        return cls(typical_tokens(messages), estimate_tokens(messages))


@dataclass(frozen=True, slots=True)
class WindowCheck:
    """One endpoint's window against one benchmark's prompts (its generation prompts for a model; for a
    judge, each pair's longest judge prompt, the answer left out)."""

    endpoint: str  # the config id
    role: Literal["model", "judge"]
    benchmark: str
    window: Window
    prompts: int  # prompts (model) or pairs (judge) checked
    over: int  # over the window by the typical count
    may_exceed: int  # over it only by the upper estimate
    longest: int  # typical tokens of the longest

    def warning(self) -> str | None:
        where = f"{self.endpoint}'s context window of {self.window.tokens} tokens ({self.window.source})"
        lines = []
        if self.over and self.role == "model":
            lines.append(
                f"warning: {self.over} of {self.prompts} {self.benchmark} prompts exceed {where}: longest "
                f"about {self.longest} tokens (estimated); they would end as context_length errors"
            )
        elif self.over:
            lines.append(
                f"warning: {self.over} of {self.prompts} {self.benchmark} pairs have a judge prompt over "
                f"{where} before the answer is added: longest about {self.longest} tokens (estimated)"
            )
        if self.may_exceed:
            what = "prompts" if self.role == "model" else "pairs' judge prompts"
            lines.append(
                f"warning: {self.may_exceed} more {self.benchmark} {what} may exceed {where} (by the upper "
                "token estimate)"
            )
        return "\n".join(lines) or None


def _judge_prompts(job: BenchJob, inst: Instance) -> Iterator[list[dict[str, str]]]:
    """The judge prompts of an empty answer's plan (multi-turn tasks: earlier replies left empty)."""
    for task in job.bench.plan(inst, "", job.cfg.scoring).judge_tasks:
        for t in range(len(task.turns)):
            yield [m.as_dict() for m in task.messages_for_turn(t, ("",) * t)]


def _check(
    label: str, role: Literal["model", "judge"], bench: str, window: Window, sizes: list[Sizes]
) -> WindowCheck:
    over = sum(s.typical > window.tokens for s in sizes)
    maybe = sum(s.typical <= window.tokens < s.upper for s in sizes)
    longest = max((s.typical for s in sizes), default=0)
    return WindowCheck(label, role, bench, window, len(sizes), over, maybe, longest)


def check_windows(cfg: SweepConfig, work: Work, *, ask_servers: bool = True) -> list[WindowCheck]:
    """Every (endpoint, benchmark) whose window is known, models first, then the judge."""
    models = [(s, window_of(s, ask_server=ask_servers)) for s in cfg.models]
    judges = [(s, window_of(s, ask_server=ask_servers)) for s in cfg.judges]
    out: list[WindowCheck] = []
    for job, instances in work.jobs:
        bench = job.cfg.label
        prompts = [Sizes.of([m.as_dict() for m in inst.messages]) for inst in instances]
        out += [_check(s.label, "model", bench, w, prompts) for s, w in models if w is not None]
        if not any(w is not None for _, w in judges):
            continue
        longest: list[Sizes] = []
        for inst in instances:
            found = [Sizes.of(p) for p in _judge_prompts(job, inst)]
            if found:
                longest.append(max(found, key=lambda s: s.typical))
        if longest:
            out += [_check(s.label, "judge", bench, w, longest) for s, w in judges if w is not None]
    return out


def window_warnings(checks: Sequence[WindowCheck]) -> list[str]:
    return [w for c in checks if (w := c.warning()) is not None]
