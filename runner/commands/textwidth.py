"""Text laid out in a terminal's columns: a wide (CJK) character takes two, so tables of Chinese
constraint types and labels line up (unicodedata's East Asian width: W and F are wide)."""

from __future__ import annotations

import unicodedata


def width(text: str) -> int:
    """Terminal columns of `text`."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def clip(text: str, columns: int) -> str:
    """The longest start of `text` that fits in `columns`."""
    used = 0
    for i, ch in enumerate(text):
        used += width(ch)
        if used > columns:
            return text[:i]
    return text


def ljust(text: str, columns: int) -> str:
    """`text` padded with spaces to `columns` (never cut)."""
    return text + " " * max(columns - width(text), 0)


def cell(text: str, columns: int) -> str:
    """`text` in exactly `columns` columns, left-aligned: cut to fit, then padded (a wide character
    that would straddle the edge is left out, and a space takes its place)."""
    return ljust(clip(text, columns), columns)
