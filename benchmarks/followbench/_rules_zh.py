"""FollowBench's rule checks for Chinese responses (code_zh/rule_based_evaluation.py of the reference).

The Chinese rules count characters where the English ones count words, split sentences on 。！？,
look words up as plain substrings (the Chinese words carry no regex metacharacters, so the reference's
re.search is a substring test), and treat full-width ，。：’“” as punctuation besides ASCII. The
reference checks only format example 22 by rule in Chinese; see _scoring for example 30.
"""

from __future__ import annotations

import re
import string

from ifsweep.benchmarks.followbench._rules import Check, SourceRule, source_rules, three_paragraph_checks

_PUNCTUATION_ZH = string.punctuation + "，。：’“”"


def sentences_zh(text: str) -> list[str]:
    return [piece for piece in re.split(r"[。！？]", text) if piece]


def _nth_sentence_has(text: str, n: int, word: str) -> bool:
    parts = sentences_zh(text)
    return len(parts) >= n and word in parts[n - 1]


def _one_sentence(text: str) -> bool:
    return len(sentences_zh(text)) == 1


def _punctuation_count(text: str) -> int:
    return sum(1 for char in text if char in _PUNCTUATION_ZH)


CNN_ZH: tuple[Check, ...] = (
    lambda t: len(sentences_zh(t)) == 3,
    lambda t: all(len(s) < 15 for s in sentences_zh(t)),
    lambda t: (
        _nth_sentence_has(t, 1, "波特")
        and _nth_sentence_has(t, 2, "演员")
        and _nth_sentence_has(t, 3, "电影")
    ),
    lambda t: not _nth_sentence_has(t, 2, "奢侈"),
    lambda t: _nth_sentence_has(t, 3, "了"),
)
XSUM_ZH: tuple[Check, ...] = (
    _one_sentence,
    lambda t: len(t) < 20,
    lambda t: "牛顿斯图尔特" not in t,
    lambda t: "在" in t,
    lambda t: "操作" in t,
)
SAMSUM_ZH: tuple[Check, ...] = (
    _one_sentence,
    lambda t: len(t) < 15,
    lambda t: "琐碎的" in t,
    lambda t: "拖沓的" not in t,
    lambda t: _punctuation_count(t) == 1,
)
GIGAWORD_ZH: tuple[Check, ...] = (
    lambda t: len(t) == 8,
    lambda t: _punctuation_count(t) == 0,
    # str.isnumeric also counts 一二三 and other numeral characters, not only Arabic digits.
    lambda t: not any(char.isnumeric() for char in t),
    lambda t: "公交车" not in t,
    lambda t: "在" in t,
)
ARXIV_ZH: tuple[Check, ...] = (
    _one_sentence,
    lambda t: len(t) <= 20,
    lambda t: t.startswith("我们"),
    lambda t: "激活" in t,
    lambda t: "transformer" not in t,
)


CUMULATIVE_ZH: dict[str, tuple[Check, ...]] = {
    "cnn_dailymail": CNN_ZH,
    "xsum": XSUM_ZH,
    "samsum": SAMSUM_ZH,
    "gigaword": GIGAWORD_ZH,
    "arxiv": ARXIV_ZH,
}

SOURCE_RULES_ZH: dict[str, SourceRule] = source_rules(
    cnn_dailymail=CNN_ZH,
    xsum=XSUM_ZH,
    samsum=SAMSUM_ZH,
    gigaword=GIGAWORD_ZH,
    arxiv=ARXIV_ZH,
    gsm_8k_answer=r"\d+美元",
)


def format_checks_zh(example_id: int, text: str, level: int) -> tuple[bool, ...]:
    """Format example 22 check by check (the only Chinese format example a rule decides)."""
    if example_id == 22:
        return three_paragraph_checks(
            text, level, sentences=sentences_zh, long_enough=lambda s: len(s) > 20, closing="这些是建议"
        )
    raise ValueError(f"format example {example_id} has no Chinese rule check")


def format_rule_zh(example_id: int, text: str, level: int) -> bool:
    return all(format_checks_zh(example_id, text, level))
