"""Reading a FollowBench judge reply into one verdict per added constraint.

Two readers. `decide_paper` is strict: the last non-empty line must hold a Python list literal of
exactly L 'YES'/'NO' strings (level 1: the line must contain YES or NO), otherwise the reply counts as
unparsed and the runner asks again. `decide_reference` reproduces paring_discriminative_generation of
the reference code, per language, including what it tolerates; it returns None where the reference
returns (-1, -1). Neither ever evaluates the reply: list literals go through ast.literal_eval.
"""

from __future__ import annotations

import ast
import re
import warnings

_LIST = re.compile(r"\[.*\]")

# Elements the reference counts as "not satisfied" besides NO (English / Chinese versions differ).
_FALSE_EN = frozenset({"NO", "PARTIAL", "MAYBE", "UNKNOWN", "N/A"})
_FALSE_ZH = frozenset({"NO", "PARTIAL", "PARTIALLY", "MAYBE", "UNKNOWN"})


def _literal_list(text: str) -> list[object] | None:
    # Compiling odd replies such as "['YES']['NO']" emits a SyntaxWarning; it must neither reach the
    # user's terminal nor, under warnings-as-errors, escape as an exception.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return list(value) if isinstance(value, list | tuple) else None


def _single(line: str) -> tuple[bool, ...] | None:
    # Level 1 looks for the words anywhere in the line, YES first (so "['YES']" and "YES." both pass).
    if "YES" in line:
        return (True,)
    if "NO" in line:
        return (False,)
    return None


def _unquote_curly(text: str) -> str:
    return text.replace("“", '"').replace("”", '"')


def _quote_bare(listed: str) -> str:
    """Chinese judges often answer [YES, NO]; the Chinese reference quotes bare words when the list has
    no quotes at all."""
    if '"' in listed or "'" in listed:
        return listed
    return listed.replace("YES", "'YES'").replace("NO", "'NO'")


def _list_items(last: str, language: str) -> list[object] | None:
    """The elements of the first [...] on the reply's last line, or None without a readable list."""
    found = _LIST.search(last)
    if found is None:
        return None
    listed = _quote_bare(found.group()) if language == "zh" else found.group()
    return _literal_list(listed)


def decide_paper(reply: str, level: int, language: str) -> tuple[bool, ...] | None:
    lines = [line.strip() for line in reply.splitlines() if line.strip()]
    if not lines:
        return None
    last = lines[-1]
    if language == "zh":
        last = _unquote_curly(last)
    if level == 1:
        return _single(last)
    items = _list_items(last, language)
    if items is None or len(items) != level or any(item not in ("YES", "NO") for item in items):
        return None
    return tuple(item == "YES" for item in items)


def _reference_last_line(reply: str, language: str) -> str:
    if language == "zh":
        text = _unquote_curly(reply).strip("`").strip(" ").strip("\n")
        return text.split("\n")[-1].strip(" ")
    return reply.strip("`").strip().split("\n")[-1]


def decide_reference(reply: str, level: int, language: str) -> tuple[bool, ...] | None:
    """The reference's verdicts, or None for its (-1, -1) "must manually fix" outcome."""
    last = _reference_last_line(reply, language)
    if level == 1:
        return _single(last)
    items = _list_items(last, language)
    if items is None:
        return None
    if language == "zh":
        # The Chinese reference reads the first L elements of a longer list.
        if len(items) < level:
            return None
        items = items[:level]
    elif len(items) != level:
        return None
    negatives = _FALSE_ZH if language == "zh" else _FALSE_EN
    verdicts: list[bool] = []
    for item in items:
        if item == "YES":
            verdicts.append(True)
        elif isinstance(item, str) and item in negatives:
            verdicts.append(False)
        else:
            return None
    return tuple(verdicts)
