"""Turning a chat request into a Completion: the fast aiohttp path or LiteLLM, per-endpoint rate limits,
retries, budgets and prices, and the built-in simulator. LiteLLM is imported only when first needed
(`import_litellm`), and the simulator only when asked for."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
from ifsweep.providers.retry import RetryDecision, RetryPolicy, classify
from ifsweep.providers.scrub import scrub

if TYPE_CHECKING:
    from ifsweep.providers.sim_config import FaultRates, SimConfig
    from ifsweep.providers.simulator import SimStats, Simulator, SimulatorThread, serve_main

_SIMULATOR = {"Simulator", "SimulatorThread", "SimStats", "serve_main", "SimConfig", "FaultRates"}

__all__ = [
    "Budget",
    "BudgetExhausted",
    "CallStatus",
    "Completion",
    "Endpoint",
    "EndpointSpec",
    "EndpointStats",
    "ErrorKind",
    "FaultRates",
    "Price",
    "ProviderEvent",
    "ProviderPool",
    "Reservation",
    "RetryDecision",
    "RetryPolicy",
    "SimConfig",
    "SimStats",
    "Simulator",
    "SimulatorThread",
    "UnknownPrice",
    "check_prices",
    "classify",
    "estimate_tokens",
    "import_litellm",
    "resolve_price",
    "resolve_route",
    "scrub",
    "serve_main",
]


def __getattr__(name: str) -> Any:
    # The simulator loads lazily: `python -m providers.simulator` must not find it imported already.
    if name in _SIMULATOR:
        from ifsweep.providers import simulator

        return getattr(simulator, name)
    raise AttributeError(f"module 'providers' has no attribute {name!r}")
