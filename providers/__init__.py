"""Turning a chat request into a Completion: the fast aiohttp path or LiteLLM, per-endpoint rate limits,
retries, budgets and prices. LiteLLM is imported only when first needed (`import_litellm`). The simulator
is not here: it is `ifsweep.simulator`.

The names below load on first use: `ifsweep status` and the reports import this package's
records, never its pool, budget or retries (asyncio and aiolimiter among them).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below, for type checkers (`X as X`: re-exported)
    from ifsweep.providers.budget import Budget as Budget
    from ifsweep.providers.budget import Reservation as Reservation
    from ifsweep.providers.limits import ProviderEvent as ProviderEvent
    from ifsweep.providers.pool import Endpoint as Endpoint
    from ifsweep.providers.pool import EndpointStats as EndpointStats
    from ifsweep.providers.pool import ProviderPool as ProviderPool
    from ifsweep.providers.pool import resolve_route as resolve_route
    from ifsweep.providers.pricing import check_prices as check_prices
    from ifsweep.providers.pricing import estimate_tokens as estimate_tokens
    from ifsweep.providers.pricing import import_litellm as import_litellm
    from ifsweep.providers.pricing import resolve_price as resolve_price
    from ifsweep.providers.records import BudgetExhausted as BudgetExhausted
    from ifsweep.providers.records import CallStatus as CallStatus
    from ifsweep.providers.records import Completion as Completion
    from ifsweep.providers.records import EndpointSpec as EndpointSpec
    from ifsweep.providers.records import ErrorKind as ErrorKind
    from ifsweep.providers.records import Price as Price
    from ifsweep.providers.records import UnknownPrice as UnknownPrice
    from ifsweep.providers.send.retry import RetryDecision as RetryDecision
    from ifsweep.providers.send.retry import RetryPolicy as RetryPolicy
    from ifsweep.providers.send.retry import classify as classify
    from ifsweep.providers.send.scrub import scrub as scrub

# name -> the module that defines it, imported on first use.
_LAZY = {
    "Budget": "ifsweep.providers.budget",
    "BudgetExhausted": "ifsweep.providers.records",
    "CallStatus": "ifsweep.providers.records",
    "Completion": "ifsweep.providers.records",
    "Endpoint": "ifsweep.providers.pool",
    "EndpointSpec": "ifsweep.providers.records",
    "EndpointStats": "ifsweep.providers.pool",
    "ErrorKind": "ifsweep.providers.records",
    "Price": "ifsweep.providers.records",
    "ProviderEvent": "ifsweep.providers.limits",
    "ProviderPool": "ifsweep.providers.pool",
    "Reservation": "ifsweep.providers.budget",
    "RetryDecision": "ifsweep.providers.send.retry",
    "RetryPolicy": "ifsweep.providers.send.retry",
    "UnknownPrice": "ifsweep.providers.records",
    "check_prices": "ifsweep.providers.pricing",
    "classify": "ifsweep.providers.send.retry",
    "estimate_tokens": "ifsweep.providers.pricing",
    "import_litellm": "ifsweep.providers.pricing",
    "resolve_price": "ifsweep.providers.pricing",
    "resolve_route": "ifsweep.providers.pool",
    "scrub": "ifsweep.providers.send.scrub",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ifsweep.providers' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
