"""Remove secrets from text before it leaves the providers package (error records, events, logs)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

# Bearer tokens and Authorization / api-key header values as exceptions print them (repr of a dict,
# "Authorization: Bearer ...", x-api-key=...). The value runs to the next quote, comma, bracket or space.
# Never match our own marker, so scrubbing twice changes nothing.
_VALUE = r"(?!\[REDACTED\])(?!bearer\s)[^\s'\",})\]]+"
_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)" + _VALUE),
    re.compile(
        r"(?i)((?:authorization|x-api-key|api[-_]key|x-goog-api-key)['\"]?\s*[:=]\s*['\"]?(?:bearer\s+)?)"
        + _VALUE
    ),
)
_REDACTED = "[REDACTED]"
# Shorter values are too likely to match ordinary words; real keys are far longer.
_MIN_SECRET_LEN = 6


def secret_values(key_env_names: Iterable[str]) -> tuple[str, ...]:
    """The current values of those variables that are long enough to be keys."""
    values = (os.environ.get(name) for name in key_env_names)
    return tuple(v for v in values if v and len(v) >= _MIN_SECRET_LEN)


def redact_values(text: str, values: Iterable[str]) -> str:
    """`text` with every occurrence of the given secret values replaced, and nothing else changed: what
    a model's answer gets, where header-shaped patterns may be the answer's own (say, example code)."""
    for value in values:
        if value in text:
            text = text.replace(value, _REDACTED)
    return text


def scrub(text: str, key_env_names: Iterable[str] = ()) -> str:
    """Return `text` with the current values of `key_env_names` and any bearer/API-key values redacted."""
    text = redact_values(text, secret_values(key_env_names))
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + _REDACTED, text)
    return text
