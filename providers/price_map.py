"""LiteLLM's model map (prices, context windows) read straight from the JSON file litellm ships.

Importing litellm costs about 3 s and 170 MB (docs/design/providers.md); its price map is one JSON file
inside the package (`model_prices_and_context_window_backup.json`, the copy litellm itself reads with
LITELLM_LOCAL_MODEL_COST_MAP). We find that file without running litellm's `__init__`, parse it once
with orjson (about 40 ms), and resolve a config's model string the way litellm's `get_model_info` does
for the cases a sweep meets: the string as given, then `provider/model`, then the bare model, with the
entry's provider agreeing with the string's prefix.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

MAP_FILE = "model_prices_and_context_window_backup.json"

# litellm treats these provider families as one when it checks an entry's provider against the prefix.
_FAMILIES = ("vertex_ai", "fireworks_ai", "bedrock")


@dataclass(frozen=True, slots=True)
class MapEntry:
    """What the map says of one model; None where it says nothing. Prices are USD per token."""

    input_per_token: float | None
    output_per_token: float | None
    cache_read_per_token: float | None  # cache_read_input_token_cost
    cache_write_per_token: float | None  # cache_creation_input_token_cost
    max_input_tokens: int | None
    batch_input_per_token: float | None = None  # input_cost_per_token_batches (Batch API)
    batch_output_per_token: float | None = None  # output_cost_per_token_batches
    # An OpenAI reasoning model (o-series, gpt-5...): `supports_reasoning` on an entry of provider
    # openai. It takes max_completion_tokens and no sampling parameters (providers/send/params.py).
    openai_reasoning: bool = False


def map_path() -> Path | None:
    """The JSON file inside the installed litellm package, found without importing litellm; None when
    litellm is not installed or ships no such file."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / MAP_FILE
        if path.is_file():
            return path
    return None


@dataclass(frozen=True, slots=True)
class _Map:
    entries: dict[str, dict[str, Any]]
    lower: dict[str, str]  # lowercase name -> the map's own spelling (litellm matches without case)
    providers: frozenset[str]


@functools.cache
def _load() -> _Map:
    path = map_path()
    raw: object = orjson.loads(path.read_bytes()) if path is not None else {}
    entries = {
        k: v
        for k, v in (raw.items() if isinstance(raw, dict) else ())
        if isinstance(v, dict) and k != "sample_spec"
    }
    providers = frozenset(str(v["litellm_provider"]) for v in entries.values() if v.get("litellm_provider"))
    lower: dict[str, str] = {}
    for name in entries:
        lower.setdefault(name.lower(), name)
    return _Map(entries, lower, providers)


def _provider_matches(entry: dict[str, Any], provider: str | None) -> bool:
    found = entry.get("litellm_provider")
    if provider is None or found is None or found == provider:
        return True
    return any(provider.startswith(f) and str(found).startswith(f) for f in _FAMILIES)


def _find(model: str) -> dict[str, Any] | None:
    m = _load()
    prefix, _, rest = model.partition("/")
    provider, bare = (prefix, rest) if rest and prefix in m.providers else (None, model)
    candidates = (f"{provider}/{bare}" if provider else model, model, bare)
    for name in dict.fromkeys(candidates):
        key = name if name in m.entries else m.lower.get(name.lower())
        if key is not None and _provider_matches(m.entries[key], provider):
            return m.entries[key]
    return None


def _number(entry: dict[str, Any], name: str) -> float | None:
    v = entry.get(name)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


@functools.cache
def lookup(model: str) -> MapEntry | None:
    """The map's entry for a LiteLLM model string as written in a config ("openai/gpt-4o-mini",
    "anthropic/claude-...", "gpt-4o"), or None when the map does not know it."""
    entry = _find(model)
    if entry is None:
        return None
    window = entry.get("max_input_tokens")
    return MapEntry(
        input_per_token=_number(entry, "input_cost_per_token"),
        output_per_token=_number(entry, "output_cost_per_token"),
        cache_read_per_token=_number(entry, "cache_read_input_token_cost"),
        cache_write_per_token=_number(entry, "cache_creation_input_token_cost"),
        max_input_tokens=window
        if isinstance(window, int) and not isinstance(window, bool) and window > 0
        else None,
        batch_input_per_token=_number(entry, "input_cost_per_token_batches"),
        batch_output_per_token=_number(entry, "output_cost_per_token_batches"),
        openai_reasoning=entry.get("supports_reasoning") is True
        and entry.get("litellm_provider") == "openai",
    )
