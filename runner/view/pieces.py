"""Shared pieces: texts that repeat each other's parts (an instance's input in every judge call, the
benchmark's judge template, the markup of each call) stored once. Each text is cut into pieces (before
each tag, after each line break), the distinct pieces are listed once, and each text becomes the
numbers of its pieces; viewer.js joins them back when the text is shown (the export's pages, a served
page's sent messages)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import orjson

__all__ = ["pieces_script", "shared_pieces"]

# Where a page's HTML is cut into pieces: before each tag, and after each line break (a prompt's lines).
_PIECE = re.compile(r"(?=<)|(?<=\n)")


def shared_pieces(texts: Sequence[str]) -> tuple[list[str], list[str]]:
    """Each text as the list of its pieces' numbers (base 36, comma-separated, runs as "a-b") into one
    list of distinct pieces: what pages share (the benchmark's judge template, an instance's prompt
    across models, an answer quoted in each judge call, the markup of every call) is stored once.
    Joining a text's pieces in order gives it back exactly."""
    numbers: dict[str, int] = {}
    pages = []
    for text in texts:
        ids = [numbers.setdefault(p, len(numbers)) for p in _PIECE.split(text) if p]
        pages.append(",".join(_runs(ids)))
    return list(numbers), pages


def _runs(ids: Sequence[int]) -> list[str]:
    """Numbers in base 36, a run of consecutive ones as "first-last": a text repeated from another
    (an input's hundred lines in each judge call) is the run its pieces got when first seen."""
    out, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        if j - i >= 2:
            out.append(f"{_base36(ids[i])}-{_base36(ids[j])}")
        else:
            out += [_base36(n) for n in ids[i : j + 1]]
        i = j + 1
    return out


def pieces_script(name: str, texts: Sequence[str]) -> str:
    """`texts` as shared pieces in a JSON script of id `name`, for viewer.js to join when shown."""
    pieces, pages = shared_pieces(texts)
    # No "<" in the script's text at all: neither "</script>" nor "<!--" can end or bend it.
    data = orjson.dumps({"pieces": pieces, "pages": pages}).decode().replace("<", "\\u003c")
    return f'<script type="application/json" id="{name}">{data}</script>'


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = digits[n % 36]
    while n >= 36:
        n //= 36
        out = digits[n % 36] + out
    return out
