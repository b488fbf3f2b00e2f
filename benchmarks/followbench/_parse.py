"""Reading a FollowBench judge reply into one verdict per added constraint.

Two readers. `decide_paper` is strict and echo-proof: lines copied from the prompt are dropped first
(benchmarks/_echo.py), then the last remaining line must hold a list of exactly L YES/NO items, read by a
tokenizer, with no other YES/NO on the line (level 1: or a single YES or NO); otherwise the reply counts
as unparsed and the runner asks again. `decide_reference` reproduces paring_discriminative_generation of
the reference code, per language, including what it tolerates (an echoed format rule passes there); it
returns None where the reference returns (-1, -1). Neither ever evaluates the reply: the reference's list
literals go through ast.literal_eval.
"""

from __future__ import annotations

import ast
import re
import warnings

from ifsweep.benchmarks._echo import NO_PROMPT, PromptText, own_lines

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
    # The reference's level 1 looks for the words anywhere in the line, YES first (so "['YES']" and
    # "YES." pass, and so does its own format rule echoed back, which holds both words).
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


# A list item in paper mode: YES or NO, in straight quotes or bare (Chinese judges write [YES, NO]).
_ITEM = re.compile(r"""\s*(['"]?)(YES|NO)\1\s*""")
_SPAN = re.compile(r"\[[^\[\]]*\]")
_WORD = re.compile(r"\b(?:YES|NO)\b")
# A fence line around a list (```python ... ```) says nothing; the verdict is the line inside.
_FENCE = re.compile(r"^`{3,}\w*$")


def _strict_list(line: str, level: int) -> tuple[bool, ...] | None:
    """The verdicts of the one `[...]` on `line` when it holds exactly `level` YES/NO items and nothing
    else on the line names YES or NO; a pure tokenizer, nothing is evaluated."""
    spans = _SPAN.findall(line)
    if len(spans) != 1:
        return None
    rest = line.replace(spans[0], " ", 1)
    if "[" in rest or "]" in rest or _WORD.search(rest):
        return None
    items = spans[0][1:-1].split(",")
    matched = [_ITEM.fullmatch(item) for item in items]
    if len(items) != level or any(m is None for m in matched):
        return None
    return tuple(m.group(2) == "YES" for m in matched if m is not None)


def _single_token(line: str) -> tuple[bool, ...] | None:
    # Level 1 without a list: the line names exactly one YES or NO, once ("YES", "**NO**", "Answer: YES").
    words = _WORD.findall(line)
    if len(words) != 1 or "[" in line or "]" in line:
        return None
    return (words[0] == "YES",)


def decide_paper(
    reply: str, level: int, language: str, prompt: PromptText = NO_PROMPT
) -> tuple[bool, ...] | None:
    """The last line of the reply that is not copied from the prompt decides: a list of exactly `level`
    YES/NO items (and no other YES/NO on the line), or at level 1 a single YES or NO. Else None."""
    lines = [line for line in own_lines(reply, prompt) if not _FENCE.match(line)]
    if not lines:
        return None
    last = lines[-1]
    if language == "zh":
        last = _unquote_curly(last)
    found = _strict_list(last, level)
    if found is None and level == 1 and "[" not in last:
        found = _single_token(last)
    return found


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
