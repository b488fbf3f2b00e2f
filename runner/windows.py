"""A model's context window, for `ifsweep plan` to warn of prompts that cannot fit before anything is
spent. In order: the config's `context_window = N`; what the model's own server reports when it has an
api_base (llama.cpp `GET /props`: `default_generation_settings.n_ctx`, the context of one slot; vLLM
`GET /v1/models`: `max_model_len`); LiteLLM's model map (`max_input_tokens`, read without importing
litellm). None when no source knows.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import orjson

from ifsweep.providers import price_map
from ifsweep.providers.records import EndpointSpec

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
