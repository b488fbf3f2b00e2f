"""Prompts longer than a model's context window: recognising the server's refusal, and saying it plainly.

Pure functions of the error text. Servers word it differently: llama.cpp answers 400 "the request
exceeds the available context size" with `n_prompt_tokens` and `n_ctx` in its JSON error; OpenAI and
vLLM say "This model's maximum context length is N tokens. However, you requested M tokens ..." (or
"... your messages resulted in M tokens"; newer vLLM "your request has M input tokens"); Anthropic
"prompt is too long: M tokens > N maximum". Through LiteLLM the same words arrive inside its
exception's text (a JSON body printed as a Python dict), so the patterns accept either quoting.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MARKERS = re.compile(
    r"(?i)exceeds? the available context size|exceed_context_size_error|context_length_exceeded"
    r"|maximum context length is|prompt is too long|context window exceeded|ContextWindowExceededError"
)
_WINDOW = (
    re.compile(r"""['"]?n_ctx['"]?\s*[:=]\s*(\d+)"""),
    re.compile(r"(?i)maximum context length is (\d+)"),
    re.compile(r"(?i)tokens? > (\d+) maximum"),
)
_PROMPT = (
    re.compile(r"""['"]?n_prompt_tokens['"]?\s*[:=]\s*(\d+)"""),
    re.compile(r"(?i)\((\d+) in the messages"),
    re.compile(r"(?i)your request has (\d+) input tokens"),
    re.compile(r"(?i)messages resulted in (\d+) tokens"),
    re.compile(r"(?i)prompt is too long: (\d+) tokens"),
)


_REQUESTED = re.compile(r"(?i)you requested (\d+) tokens")


@dataclass(frozen=True, slots=True)
class Overflow:
    """A prompt the server refused as too long; each size when the server said it. `requested`: the
    prompt plus the room asked for the answer (max_tokens), where the server counts both."""

    window: int | None
    prompt_tokens: int | None
    requested: int | None = None

    def describe(self, model: str) -> str:
        size = f"a prompt of {self.prompt_tokens} tokens" if self.prompt_tokens is not None else "the prompt"
        if (
            self.requested is not None
            and self.prompt_tokens is not None
            and self.requested > self.prompt_tokens
        ):
            size += f" plus {self.requested - self.prompt_tokens} for the answer"
        elif self.requested is not None and self.prompt_tokens is None:
            size = f"a request of {self.requested} tokens (prompt and answer)"
        window = f"context window of {self.window} tokens" if self.window is not None else "context window"
        return f"{size} exceeds {model}'s {window}"


def _first(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        m = pattern.search(text)
        if m is not None:
            return int(m.group(1))
    return None


def overflow_in(text: str) -> Overflow | None:
    """The overflow an error text reports, or None when it reports something else."""
    if _MARKERS.search(text) is None:
        return None
    return Overflow(_first(_WINDOW, text), _first(_PROMPT, text), _first((_REQUESTED,), text))
