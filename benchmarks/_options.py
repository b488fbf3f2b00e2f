"""Checks every benchmark's `validate_options` makes: no unknown key, and a value from a fixed set."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["check_known", "one_of"]


def check_known(benchmark: str, options: Mapping[str, Any], known: frozenset[str]) -> None:
    unknown = set(options) - known
    if unknown:
        raise ValueError(f"unknown option(s) for {benchmark}: {', '.join(sorted(unknown))}")


def one_of(options: Mapping[str, Any], name: str, choices: Sequence[str]) -> str | None:
    """The option's value, None when absent; ValueError naming the option for any other value."""
    value = options.get(name)
    if value is None:
        return None
    if value not in choices:
        raise ValueError(f"option {name!r}: expected one of {', '.join(choices)}, got {value!r}")
    return str(value)
