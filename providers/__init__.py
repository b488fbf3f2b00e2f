"""Turning a chat request into a Completion: the fast aiohttp path or LiteLLM, per-endpoint rate limits,
retries, budgets and prices. LiteLLM is imported only when first needed (`import_litellm`). The simulator
is not here: it is `ifsweep.simulator`."""

from __future__ import annotations

from ifsweep.providers.budget import Budget, Reservation
from ifsweep.providers.limits import ProviderEvent
from ifsweep.providers.pool import Endpoint, EndpointStats, ProviderPool, resolve_route
from ifsweep.providers.pricing import check_prices, estimate_tokens, import_litellm, resolve_price
from ifsweep.providers.records import (
    BudgetExhausted,
    CallStatus,
    Completion,
    EndpointSpec,
    ErrorKind,
    Price,
    UnknownPrice,
)
from ifsweep.providers.send.retry import RetryDecision, RetryPolicy, classify
from ifsweep.providers.send.scrub import scrub

__all__ = [
    "Budget",
    "BudgetExhausted",
    "CallStatus",
    "Completion",
    "Endpoint",
    "EndpointSpec",
    "EndpointStats",
    "ErrorKind",
    "Price",
    "ProviderEvent",
    "ProviderPool",
    "Reservation",
    "RetryDecision",
    "RetryPolicy",
    "UnknownPrice",
    "check_prices",
    "classify",
    "estimate_tokens",
    "import_litellm",
    "resolve_price",
    "resolve_route",
    "scrub",
]
