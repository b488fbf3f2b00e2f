"""The request parameters an endpoint is sent: one function for the fast path, LiteLLM and batch
lines alike, so every route sends a model what it takes.

OpenAI's reasoning models (o-series, gpt-5...) refuse `max_tokens` ("not compatible with o-series
models": they take `max_completion_tokens`, which also bounds the reasoning tokens) and the sampling
parameters (temperature, top_p, penalties, logprobs, logit_bias), with a 400 that no retry fixes.
Which models are such comes from LiteLLM's model map (`supports_reasoning` on an openai entry,
providers/price_map.py) unless the config says (`reasoning = true | false`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from ifsweep.providers.price_map import lookup
from ifsweep.providers.records import EndpointSpec

# What a reasoning model refuses besides max_tokens (OpenAI's reasoning guide and API reference).
SAMPLING_PARAMS = frozenset(
    {
        "temperature",
        "top_p",
        "presence_penalty",
        "frequency_penalty",
        "logprobs",
        "top_logprobs",
        "logit_bias",
    }
)


def is_reasoning(spec: EndpointSpec) -> bool:
    """The config's `reasoning` when set, else what LiteLLM's map says of the model."""
    if spec.reasoning is not None:
        return spec.reasoning
    return _map_says_reasoning(spec.model)


@functools.cache
def _map_says_reasoning(model: str) -> bool:
    # Cached: every call's key asks (runner/store/keys.py), and the map's entry is built anew each lookup.
    entry = lookup(model)
    return entry is not None and entry.openai_reasoning


def reasoning_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """`params` as a reasoning model takes them: max_tokens as max_completion_tokens (unless that is
    set too), no sampling parameter."""
    out = {k: v for k, v in params.items() if k not in SAMPLING_PARAMS and k != "max_tokens"}
    if "max_tokens" in params and "max_completion_tokens" not in params:
        out["max_completion_tokens"] = params["max_tokens"]
    return out


def sent_params(spec: EndpointSpec) -> dict[str, Any]:
    """What `spec`'s requests carry besides model and messages, on every route, and what their result
    keys hash (runner/store/keys.py): a change of the reasoning setting that changes the request is
    another key, and one that does not (a sampling parameter a reasoning model is not sent) is none."""
    return reasoning_params(spec.params) if is_reasoning(spec) else dict(spec.params)


__all__ = ["SAMPLING_PARAMS", "is_reasoning", "reasoning_params", "sent_params"]
