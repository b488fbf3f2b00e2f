"""FollowBench's rule checks for English responses, and the checks both languages share.

Each check decides a whole response at one level: the reference scores a rule-checked instance as one
pass/fail (rule_based_evaluation.py of YJiangcm/FollowBench), not constraint by constraint. Our
code restates that file's logic; its quirks are kept on purpose because scores depend on them (a
"sentence" is any non-empty piece between . ! or ?, so "Hi. " counts two; words are counted by
splitting on single spaces where the reference does so).
"""

from __future__ import annotations

import ast
import re
import string
from collections.abc import Callable, Sequence

Check = Callable[[str], bool]
SourceRule = Callable[[str, str, int], bool]


def passes_levels(checks: Sequence[Check], text: str, level: int) -> bool:
    """Level L of a cumulative source passes when the first L checks all pass."""
    if not 1 <= level <= len(checks):
        raise ValueError(f"level {level} outside 1..{len(checks)}")
    return all(check(text) for check in checks[:level])


# ---- checks shared by both languages -------------------------------------------------------------


def exact_match(response: str, target: str, level: int) -> bool:
    return response == target


def lines_within_target(response: str, target: str, level: int) -> bool:
    """WIKIEVENTS: every output line must be one of the acceptable event lines."""
    allowed = target.split("\n")
    return all(line in allowed for line in response.split("\n"))


def one_of_listed(response: str, target: str, level: int) -> bool:
    """CONLL2003: the target is a Python list literal of acceptable entities."""
    return response in ast.literal_eval(target)


def last_match_equals(pattern: str) -> SourceRule:
    """The last occurrence of `pattern` in the response must equal the target (BBH, GSM8K)."""
    compiled = re.compile(pattern)

    def rule(response: str, target: str, level: int) -> bool:
        found = compiled.findall(response)
        return bool(found) and found[-1] == target

    return rule


def contains_target(response: str, target: str, level: int) -> bool:
    return target in response


def template_regex(target: str) -> re.Pattern[str]:
    """The example category's answer template as a regex: literal text around a free `{answer}`.

    The template drops its "{instruction}\\n" prefix, un-doubles braces, and turns every ".*" (the
    substituted {answer}, or one the template already had) into a wildcard; '.' does not match a
    newline, so a multi-line answer never fits (as in the reference)."""
    template = target.replace("{instruction}\n", "").replace("{{", "{").replace("}}", "}")
    template = template.replace("{answer}", ".*")
    return re.compile(".*".join(re.escape(part) for part in template.split(".*")))


def matches_template(response: str, target: str) -> bool:
    return template_regex(target).fullmatch(response) is not None


def paragraphs_numbered(text: str) -> bool:
    """Every non-blank paragraph (split on a blank line) starts with a number marker like '1.'."""
    for paragraph in text.split("\n\n"):
        stripped = paragraph.lstrip()
        if stripped and not re.match(r"\d+\.", stripped):
            return False
    return True


def three_paragraph_checks(
    text: str,
    level: int,
    *,
    sentences: Callable[[str], list[str]],
    long_enough: Callable[[str], bool],
    closing: str,
) -> tuple[bool, ...]:
    """Format example 22, check by check for level L's L constraints: three paragraphs (level 5:
    exactly four, the closing phrase its own paragraph), short ones, long sentences, numbered, then a
    closing phrase (level 5)."""
    paragraphs = text.split("\n\n")
    wanted = 4 if level == 5 else 3
    checks: tuple[Callable[[], bool], ...] = (
        lambda: len(paragraphs) == wanted,
        lambda: all(len(sentences(p)) < 3 for p in paragraphs[:3]),
        lambda: all(long_enough(s) for s in sentences(text)),
        lambda: paragraphs_numbered(text),
        lambda: text.endswith(closing),
    )
    return tuple(check() for check in checks[:level])


# ---- English helpers -----------------------------------------------------------------------------


def sentences_en(text: str) -> list[str]:
    return [piece for piece in re.split(r"[.!?]", text) if piece]


def has_word(text: str, word: str) -> bool:
    return re.search(r"\b" + re.escape(word) + r"\b", text) is not None


def nth_sentence_has(text: str, n: int, word: str) -> bool:
    parts = sentences_en(text)
    return len(parts) >= n and has_word(parts[n - 1], word)


def space_words(text: str) -> int:
    return len(text.split(" "))


def _is_present_continuous(text: str) -> bool:
    return re.search(r"\b(am|is|are)\s+\w+ing\b", text) is not None


def _third_sentence_present_perfect(text: str) -> bool:
    parts = sentences_en(text)
    return len(parts) >= 3 and re.search(r"\b(has|have)\s+\w+", parts[2]) is not None


def _punctuation_count(text: str) -> int:
    return sum(1 for char in text if char in string.punctuation)


def _one_sentence(text: str) -> bool:
    return len(sentences_en(text)) == 1


CNN_EN: tuple[Check, ...] = (
    lambda t: len(sentences_en(t)) == 3,
    lambda t: all(len(s.split()) < 15 for s in sentences_en(t)),
    lambda t: (
        nth_sentence_has(t, 1, "Potter")
        and nth_sentence_has(t, 2, "actor")
        and nth_sentence_has(t, 3, "films")
    ),
    lambda t: not nth_sentence_has(t, 2, "lavish"),
    _third_sentence_present_perfect,
)
XSUM_EN: tuple[Check, ...] = (
    _one_sentence,
    lambda t: space_words(t) < 20,
    lambda t: not has_word(t, "Newton Stewart"),
    _is_present_continuous,
    lambda t: has_word(t, "operation"),
)
SAMSUM_EN: tuple[Check, ...] = (
    _one_sentence,
    lambda t: space_words(t) < 15,
    lambda t: has_word(t, "stuff"),
    lambda t: re.search("procrast", t, re.IGNORECASE) is None,
    lambda t: _punctuation_count(t) == 1,
)
GIGAWORD_EN: tuple[Check, ...] = (
    lambda t: space_words(t) == 8,
    lambda t: _punctuation_count(t) == 0,
    str.islower,
    lambda t: not has_word(t, "bus"),
    lambda t: has_word(t, "in"),
)
ARXIV_EN: tuple[Check, ...] = (
    _one_sentence,
    lambda t: space_words(t) <= 20,
    lambda t: t.startswith("We"),
    lambda t: has_word(t, "activations"),
    lambda t: not has_word(t, "transformer"),
)


def _cumulative(checks: Sequence[Check]) -> SourceRule:
    def rule(response: str, target: str, level: int) -> bool:
        return passes_levels(checks, response, level)

    return rule


def source_rules(
    *,
    cnn_dailymail: Sequence[Check],
    xsum: Sequence[Check],
    samsum: Sequence[Check],
    gigaword: Sequence[Check],
    arxiv: Sequence[Check],
    gsm_8k_answer: str,
) -> dict[str, SourceRule]:
    """The rule of every rule-checked source in one language: the languages share the target
    comparisons and differ in the summarisation checks and in how a GSM8K answer is written."""
    return {
        "E2E": exact_match,
        "WIKIEVENTS": lines_within_target,
        "CONLL2003": one_of_listed,
        "text_editing": exact_match,
        "cnn_dailymail": _cumulative(cnn_dailymail),
        "xsum": _cumulative(xsum),
        "samsum": _cumulative(samsum),
        "gigaword": _cumulative(gigaword),
        "arxiv": _cumulative(arxiv),
        "BBH_logical": last_match_equals(r"\([A-Z]\)"),
        "BBH_time": last_match_equals(r"\d{2}/\d{2}/\d{4}"),
        "self_made_space": contains_target,
        "gsm_8k": last_match_equals(gsm_8k_answer),
    }


# The sources whose rule is a conjunction of one check per level: check k is constraint k's own.
CUMULATIVE_EN: dict[str, tuple[Check, ...]] = {
    "cnn_dailymail": CNN_EN,
    "xsum": XSUM_EN,
    "samsum": SAMSUM_EN,
    "gigaword": GIGAWORD_EN,
    "arxiv": ARXIV_EN,
}

SOURCE_RULES_EN: dict[str, SourceRule] = source_rules(
    cnn_dailymail=CNN_EN,
    xsum=XSUM_EN,
    samsum=SAMSUM_EN,
    gigaword=GIGAWORD_EN,
    arxiv=ARXIV_EN,
    gsm_8k_answer=r"\$\d+",
)


# ---- English format examples 22 and 30 -----------------------------------------------------------

# A sentence ends at '.' or '?' followed by whitespace, except after abbreviations like "e.g." or "Mr.".
_SPEECH_SENTENCE_END = re.compile(r"(?<!\w\.\w.)(?<![A-Z][a-z]\.)(?<=\.|\?)\s")


def speech_checks(text: str) -> tuple[bool, ...]:
    """Format example 30, check by check: a five-point speech with '**' keyword markers, short points,
    10-15-word sentences, and no word ending in '-ly'."""
    sentences = _SPEECH_SENTENCE_END.split(text)
    point_sentences = [s for s in sentences if any(f"{n}." in s for n in range(1, 6))]
    return (
        "**" in text,
        len(re.findall(r"\*\*[\d].+?:", text)) == 5,
        all(len(s.split(".")) < 3 for s in point_sentences),
        all(10 <= len(s.split()) <= 15 for s in sentences),
        all(not word.endswith("-ly") for s in sentences for word in s.split()),
    )


def format_checks_en(example_id: int, text: str, level: int) -> tuple[bool, ...]:
    """A rule-decided English format example at level L, check by check (its L constraints)."""
    if example_id == 22:
        return three_paragraph_checks(
            text,
            level,
            sentences=sentences_en,
            long_enough=lambda s: len(s.split()) > 20,
            closing="Those are suggestions",
        )
    if example_id == 30:
        return speech_checks(text)[:level]
    raise ValueError(f"format example {example_id} has no rule check")


def format_rule_en(example_id: int, text: str, level: int) -> bool:
    return all(format_checks_en(example_id, text, level))
