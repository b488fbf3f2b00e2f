"""Prices, token estimates and the one place litellm is imported.

litellm takes about 3 s and 170 MB to import and, by default, fetches its price map over HTTPS at import
(docs/design/providers.md). Prices and context windows come from its bundled map read directly
(providers/price_map.py); litellm itself is imported only for a call that must go through it, and then
with the local cost map switched on for the import alone.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType

from ifsweep.providers import price_map
from ifsweep.providers.records import EndpointSpec, Price, UnknownPrice

_litellm: ModuleType | None = None


def import_litellm() -> ModuleType:
    """Import litellm offline and quiet; every use of litellm in the project goes through here."""
    global _litellm
    if _litellm is None:
        module = _import_offline()
        # Otherwise every exception prints a "Give Feedback" banner to stdout.
        vars(module)["suppress_debug_info"] = True
        _litellm = module
    return _litellm


def cache_prices(model: str) -> tuple[float | None, float | None]:
    """(cached input, cache write) in dollars per million tokens from the price map; None where the map
    has none."""
    entry = price_map.lookup(model)
    if entry is None:
        return None, None
    return _per_mtok(entry.cache_read_per_token), _per_mtok(entry.cache_write_per_token)


def _per_mtok(value: float | None) -> float | None:
    return None if value is None else value * 1e6


def _import_offline() -> ModuleType:
    """litellm reads LITELLM_LOCAL_MODEL_COST_MAP once, while it is imported, to decide whether to fetch
    its price map over HTTPS. The `ifsweep` command sets it for its whole process (runner/commands/cli.py); a
    library caller's environment is left as found: the variable is set for the import alone."""
    name = "LITELLM_LOCAL_MODEL_COST_MAP"
    before = os.environ.get(name)
    if before is not None:
        return importlib.import_module("litellm")
    os.environ[name] = "True"
    try:
        return importlib.import_module("litellm")
    finally:
        os.environ.pop(name, None)


def litellm_price(model: str) -> Price | None:
    """Price from LiteLLM's bundled model map (read without importing litellm), or None when the model
    is not in it."""
    entry = price_map.lookup(model)
    if entry is None:
        return None
    # As litellm's get_model_info: a price the map leaves out counts as 0.
    inp, out = entry.input_per_token or 0.0, entry.output_per_token or 0.0
    # An unmapped model can come back with zero prices; treat that as unknown, not free.
    if inp == 0 and out == 0:
        return None
    return Price(
        input_per_mtok=float(inp) * 1e6,
        output_per_mtok=float(out) * 1e6,
        cached_input_per_mtok=_per_mtok(entry.cache_read_per_token),
        cache_write_per_mtok=_per_mtok(entry.cache_write_per_token),
        batch_input_per_mtok=_per_mtok(entry.batch_input_per_token),
        batch_output_per_mtok=_per_mtok(entry.batch_output_per_token),
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
