"""The conversation a provider is sent: one function for every route, so a call key means one request
body whichever route (the fast path, LiteLLM, a batch) sends it.

Anthropic refuses a message with empty content anywhere but as the final assistant turn ("messages.N:
all messages must have non-empty content except for the optional final assistant message"), and a text
block that is empty or only whitespace, with a 400 that no retry fixes. An empty judge reply goes back
to the judge as an assistant turn (InFoBench's multi-turn protocol, every re-ask), so such a turn is
sent as `EMPTY_TURN` instead; a system prompt with no text is left out (Anthropic has no empty system).
LiteLLM would rewrite such a turn to a placeholder of its own on the interactive route only, so the two
routes would send different bodies for one key; after this function it finds nothing to rewrite.
Every other provider takes empty content and gets the conversation as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# What an empty turn is sent as where the provider refuses empty content (our wording).
EMPTY_TURN = "(empty reply)"
# Providers, by LiteLLM name, that refuse empty or whitespace-only content but in a final assistant turn.
NON_EMPTY_PROVIDERS = frozenset({"anthropic"})


def conversation(provider: str, messages: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
    """`messages` as `provider` takes them: the same sequence when it takes them as they are (every
    call's key passes here, so the common case copies nothing), else a new list."""
    if provider not in NON_EMPTY_PROVIDERS or not any(_blank(m.get("content")) for m in messages):
        return messages
    return non_empty(messages)


def non_empty(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic's rule: every turn with text but an optional final assistant one (which may be empty,
    a prefill of nothing); a system prompt with no text left out."""
    out: list[dict[str, Any]] = []
    last = len(messages) - 1
    for n, message in enumerate(messages):
        content = message.get("content")
        if not _blank(content):
            out.append(dict(message))
        elif message.get("role") == "system":
            continue
        elif n == last and message.get("role") == "assistant" and content == "":
            out.append(dict(message))
        else:
            out.append({**message, "content": EMPTY_TURN})
    return out


def _blank(content: Any) -> bool:
    """No text at all: null, "", whitespace only, or text blocks that are all such (a list with no
    block counts too)."""
    if content is None:
        return True
    if isinstance(content, str):
        return not content.strip()
    if isinstance(content, list):
        return all(
            isinstance(b, Mapping) and b.get("type") == "text" and not str(b.get("text") or "").strip()
            for b in content
        )
    return False


def detached(messages: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
    """`messages` for a serializer to encode once and let go: each text that is not ASCII a fresh copy,
    the rest as it is (the same sequence when every text is ASCII). orjson keeps the UTF-8 it encodes a
    non-ASCII str into inside that str, for the str's life (CPython's PyUnicode_AsUTF8AndSize): a
    prompt hashed for its key or encoded as a body in place grew by 1.5 to 3 times its size for as
    long as it was held after (an instance's prompt, a judge call's waiting for its slot). A copy
    takes that UTF-8 away with it. ASCII text is its own UTF-8, and nothing is added to it."""
    if all(_ascii(m) for m in messages):
        return messages
    return [m if _ascii(m) else {**m, "content": "".join((m["content"], ""))} for m in messages]


def _ascii(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return not isinstance(content, str) or content.isascii()


__all__ = ["EMPTY_TURN", "NON_EMPTY_PROVIDERS", "conversation", "detached", "non_empty"]
