"""Prices, token estimates and the one place litellm is imported.

litellm takes about 3 s and 170 MB to import and, by default, fetches its price map over HTTPS at import
(MEASURED.md), so it is imported lazily here and only with the local cost map switched on.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from ifsweep.providers.records import EndpointSpec, Price, UnknownPrice

_litellm: ModuleType | None = None


def import_litellm() -> ModuleType:
    """Import litellm offline and quiet; every use of litellm in the project goes through here."""
    global _litellm
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        module = importlib.import_module("litellm")
        # Otherwise every exception prints a "Give Feedback" banner to stdout.
        vars(module)["suppress_debug_info"] = True
        _litellm = module
    return _litellm


def _model_info(model: str) -> Mapping[str, Any] | None:
    """litellm's local cost-map entry for `model`, or None. get_model_info is read-only: passing prices
    per call would write into litellm's global map."""
    litellm = import_litellm()
    try:
        info: Mapping[str, Any] = litellm.get_model_info(model)
    except Exception:  # ModelNotMappedError and friends: litellm raises several kinds for unknown names
        return None
    return info


def _per_mtok(value: object) -> float | None:
    return float(value) * 1e6 if isinstance(value, int | float) and not isinstance(value, bool) else None


def cache_prices(model: str) -> tuple[float | None, float | None]:
    """(cached input, cache write) in dollars per million tokens from the price map; None where the map
    has none. The one place these are read (the price map's reader may change; this signature stays)."""
    info = _model_info(model)
    if info is None:
        return None, None
    return _per_mtok(info.get("cache_read_input_token_cost")), _per_mtok(
        info.get("cache_creation_input_token_cost")
    )


def litellm_price(model: str) -> Price | None:
    """Price from litellm's local cost map, or None when the model is not in it."""
    info = _model_info(model)
    if info is None:
        return None
    inp, out = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if not isinstance(inp, int | float) or not isinstance(out, int | float):
        return None
    # An unmapped model can come back with zero prices; treat that as unknown, not free.
    if inp == 0 and out == 0:
        return None
    cached, write = cache_prices(model)
    batch_in, batch_out = info.get("input_cost_per_token_batches"), info.get("output_cost_per_token_batches")
    return Price(
        input_per_mtok=float(inp) * 1e6,
        output_per_mtok=float(out) * 1e6,
        cached_input_per_mtok=cached,
        cache_write_per_mtok=write,
        batch_input_per_mtok=float(batch_in) * 1e6 if isinstance(batch_in, int | float) else None,
        batch_output_per_mtok=float(batch_out) * 1e6 if isinstance(batch_out, int | float) else None,
    )


def resolve_price(spec: EndpointSpec) -> Price | None:
    """The config price if given, else litellm's local cost map, else None."""
    if spec.price is not None:
        return spec.price
    return litellm_price(spec.model)


def check_prices(specs: Sequence[EndpointSpec], *, sweep_cap: bool = True) -> None:
    """Refuse to start when any dollar cap applies to a model whose price is unknown.

    `sweep_cap` says whether the sweep as a whole has a cap; a spec's own `max_usd` always counts.
    """
    missing = [
        spec for spec in specs if (sweep_cap or spec.max_usd is not None) and resolve_price(spec) is None
    ]
    if missing:
        names = ", ".join(f"{spec.label} ({spec.model})" for spec in missing)
        raise UnknownPrice(
            f"a budget is set but no price is known for: {names}. Give each a price in the config, e.g. "
            "price = { input_per_mtok = 0.15, output_per_mtok = 0.60 } (USD per million tokens)."
        )


def token_counter() -> Callable[[str], int]:
    """A real tokenizer (tiktoken's cl100k_base, from the encodings LiteLLM bundles: offline) as a
    function of text. About 0.2 us a character; `ifsweep plan` counts a sample with it."""
    import_litellm()
    encoding = importlib.import_module("litellm.litellm_core_utils.default_encoding").encoding

    def count(text: str) -> int:
        return len(encoding.encode(text, disallowed_special=()))

    return count


def estimate_tokens(messages: Sequence[Mapping[str, str]]) -> int:
    """A cheap upper-leaning token estimate (about 1 us per message instead of about 50 us for
    litellm.token_counter, measured in perf/client_overhead.py).

    English prose runs about 4 ASCII characters per token and code about 2.2; we count 2 so the estimate
    stays above the real count for both. CJK characters (3 UTF-8 bytes; CFBench is Chinese) run about
    0.7-1.5 tokens each; we count 1.5. Each message adds 4 for its framing.
    """
    total = 3
    for message in messages:
        content = message.get("content") or ""
        chars = len(content)
        extra = len(content.encode("utf-8")) - chars if not content.isascii() else 0
        wide = extra // 2  # a CJK character is 3 bytes: 2 extra
        total += 4 + (chars - wide + 1) // 2 + (3 * wide + 1) // 2
    return total
