"""FollowBench rule checks: each rule-scored source with a passing and a failing hand-written answer,
level by level, in English and Chinese; the routing of instances to rules or the judge; the plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from ifsweep.benchmarks.followbench import FollowBench, matches_template, route
from ifsweep.benchmarks.followbench._rules import SOURCE_RULES_EN, format_rule_en
from ifsweep.benchmarks.followbench._rules_zh import SOURCE_RULES_ZH, format_rule_zh
from ifsweep.benchmarks.records import Constraint, Instance, Message, ScoringMode

REAL = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "FollowBench"
BENCH = FollowBench()

P, F = True, False


def levels(source: str, text: str, target: str = "", language: str = "en") -> list[bool]:
    rules = SOURCE_RULES_ZH if language == "zh" else SOURCE_RULES_EN
    return [rules[source](text, target, level) for level in range(1, 6)]


# ---- sources whose answer is compared with the target ---------------------------------------------


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize(
    ("source", "target", "good", "bad"),
    [
        (
            "E2E",
            "name[The Lantern], eatType[cafe]",
            "name[The Lantern], eatType[cafe]",
            "name[The Lantern], eatType[cafe] ",
        ),
        ("text_editing", "tea love green i.", "tea love green i.", "Tea love green i."),
        (
            "WIKIEVENTS",
            "a died at b\nc died at d\ne died at f",
            "a died at b\ne died at f",
            "a died at b\nx died at y",
        ),
        ("CONLL2003", "['Bonn', 'Berlin']", "Bonn", "Bonn, Berlin"),
        ("BBH_logical", "(B)", "Not (A). The answer is (B)", "(B) looks right but (C)"),
        ("BBH_time", "12/29/1937", "So the date is 12/29/1937.", "12/29/1937 minus a day is 12/28/1937"),
        ("self_made_space", "20th floor", "He is on the 20th floor now.", "He is on floor 20."),
    ],
)
def test_target_sources(language: str, source: str, target: str, good: str, bad: str) -> None:
    assert levels(source, good, target, language) == [P] * 5
    assert levels(source, bad, target, language) == [F] * 5


def test_gsm8k_reads_the_last_amount_in_each_language() -> None:
    assert levels("gsm_8k", "She earned $12 + $2 = $14.", "$14") == [P] * 5
    assert levels("gsm_8k", "$14 before a $2 tip, so $16", "$14") == [F] * 5
    assert levels("gsm_8k", "她一共赚了14美元。", "14美元", "zh") == [P] * 5
    assert levels("gsm_8k", "她一共赚了$14。", "14美元", "zh") == [F] * 5


# ---- English level-cumulative summaries -----------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "good", "bad", "bad_levels"),
    [
        (
            "cnn_dailymail",
            "Daniel Radcliffe plays Harry Potter. The young actor turns eighteen soon. "
            "He has signed on for more films.",
            "Daniel Radcliffe plays Harry Potter. The lavish young actor turns eighteen soon. "
            "He has signed on for more films.",
            [P, P, P, F, F],
        ),
        (
            "xsum",
            "Police are continuing a rescue operation in the flooded town.",
            "Police are continuing a rescue operation in Newton Stewart.",
            [P, P, F, F, F],
        ),
        (
            "samsum",
            "Steve will sort out the stuff for the party tonight.",
            "Steve keeps procrastinating on the stuff.",
            [P, P, P, F, F],
        ),
        (
            "gigaword",
            "two people killed in bomb attack in philippines",
            "two people killed in bomb attack on bus",
            [P, P, P, F, F],
        ),
        (
            "arxiv",
            "We show that mid-layer activations store factual associations.",
            "We show that transformer activations store facts.",
            [P, P, P, P, F],
        ),
    ],
)
def test_english_summary_sources(source: str, good: str, bad: str, bad_levels: list[bool]) -> None:
    assert levels(source, good) == [P] * 5
    assert levels(source, bad) == bad_levels


def test_english_sentence_counting_quirks() -> None:
    # A trailing space after the last full stop is a second "sentence" in the reference.
    assert levels("xsum", "Police are continuing a rescue operation. ")[0] is False
    # Words are split on single spaces: a double space adds an empty "word" (8 -> 9 for gigaword).
    assert levels("gigaword", "two people killed in  bomb attack in philippines")[0] is False


# ---- Chinese summaries: characters, not words -----------------------------------------------------


@pytest.mark.parametrize(
    ("source", "good", "bad", "bad_levels"),
    [
        (
            "cnn_dailymail",
            "拉德克利夫演哈利波特。这位年轻演员快成年了。他签约了更多电影。",
            "拉德克利夫演哈利波特。这位奢侈的年轻演员快成年了。他签约了更多电影。",
            [P, P, P, F, F],
        ),
        ("xsum", "警方正在进行救援操作。", "警方在牛顿斯图尔特进行救援操作。", [P, P, F, F, F]),
        ("samsum", "史蒂夫今晚处理琐碎的事情。", "史蒂夫，今晚处理琐碎的事情。", [P, P, P, P, F]),
        ("gigaword", "两人在菲律宾遇袭", "2人在菲律宾遇袭", [P, P, F, F, F]),
        ("arxiv", "我们发现中间层激活存储事实关联。", "我们用transformer激活。", [P, P, P, P, F]),
    ],
)
def test_chinese_summary_sources(source: str, good: str, bad: str, bad_levels: list[bool]) -> None:
    assert levels(source, good, language="zh") == [P] * 5
    assert levels(source, bad, language="zh") == bad_levels


def test_chinese_numeral_characters_count_as_numbers() -> None:
    # str.isnumeric is true for 二, so a summary with a Chinese numeral fails "no Arabic numerals".
    assert levels("gigaword", "二人在菲律宾遇袭", language="zh") == [P, P, F, F, F]


# ---- format examples 22 and 30 --------------------------------------------------------------------

_LONG = (
    "Wipe the wooden table gently with a soft dry cloth every single day so that dust and grit never get "
    "a chance to scratch the finish."
)


def test_format_22_english() -> None:
    plain = "\n\n".join([_LONG] * 3)
    assert [format_rule_en(22, plain, level) for level in range(1, 6)] == [P, P, P, F, F]
    # The "1." marker splits off a one-word sentence, so levels 3-5 cannot pass once markers are used.
    numbered = "\n\n".join(f"{i}. {_LONG}" for i in range(1, 4))
    assert [format_rule_en(22, numbered, level) for level in range(1, 6)] == [P, P, F, F, F]
    assert [format_rule_en(22, _LONG, level) for level in range(1, 6)] == [F] * 5


_SPEECH = "\n".join(
    f"**{i}.{word}:** Innovation creates new industries and good jobs in every state?"
    for i, word in enumerate(["Growth", "Jobs", "Exports", "Health", "Skills"], 1)
)


def test_format_30_english() -> None:
    assert [format_rule_en(30, _SPEECH, level) for level in range(1, 6)] == [P] * 5
    # Only a literal "-ly" suffix is caught, as in the reference: "quickly" passes, "friend-ly" fails.
    assert format_rule_en(30, _SPEECH.replace("good", "quickly"), 5) is True
    assert [format_rule_en(30, _SPEECH.replace("good", "friend-ly"), level) for level in range(1, 6)] == [
        P
    ] * 4 + [F]
    too_long = _SPEECH.replace("good jobs", "good and well paid jobs for many young people")
    assert [format_rule_en(30, too_long, level) for level in range(1, 6)] == [P, P, P, F, F]
    assert format_rule_en(30, "Innovation helps.", 1) is False


_ZH_PARAGRAPHS = [
    "1.定期用柔软的干布擦拭桌面可以去除灰尘并防止细小颗粒划伤木材表面。",
    "2.避免把滚烫的杯子直接放在桌面上否则高温会在木头表面留下难看的白色印痕。",
    "3.每隔几个月用专用的木蜡保养一次能够让桌面长期保持光泽并且更加耐用。",
]


def test_format_22_chinese() -> None:
    three = "\n\n".join(_ZH_PARAGRAPHS)
    assert [format_rule_zh(22, three, level) for level in range(1, 6)] == [P, P, P, P, F]
    four = three + "\n\n4.以上就是关于木桌日常护理与长期保养的全部内容，这些是建议"
    assert [format_rule_zh(22, four, level) for level in range(1, 6)] == [F, F, F, F, P]
    assert format_rule_zh(22, four + "。", 5) is False


# ---- the example category's answer templates ------------------------------------------------------


def test_answer_template_match() -> None:
    assert matches_template("Topic: Sports", "{instruction}\nTopic: {answer}")
    assert not matches_template("The topic is Sports", "{instruction}\nTopic: {answer}")
    # '.' does not cross a newline: a second line never fits, as in the reference.
    assert not matches_template("Topic: Sports\nBecause of the match.", "{instruction}\nTopic: {answer}")
    assert matches_template("{'AI assistant': 'Hi there'}", "{instruction}\n{{'AI assistant': '{answer}'}}")
    assert not matches_template("'AI assistant': 'Hi there'", "{instruction}\n{{'AI assistant': '{answer}'}}")
    assert matches_template("答案: 体育", "{instruction}\n答案: {answer}")


# ---- routing and plans ----------------------------------------------------------------------------


def test_routes() -> None:
    assert route("example", "samsum", 33, "en") == "template"
    assert route("mixed", "samsum", 5, "en") == "rule"
    assert route("content", "E2E", 14, "zh") == "rule"
    assert route("format", "oasst", 22, "en") == "format_rule"
    assert route("format", "oasst", 30, "en") == "format_rule"
    assert route("format", "oasst", 22, "zh") == "format_rule"
    # code_zh/gpt4_based_evaluation.py at the pinned commit keeps only example 22 from the judge.
    assert route("format", "oasst", 30, "zh") == "judge"
    assert route("style", "oasst", 22, "en") == "judge"
    assert route("situation", "self-made", 7, "en") == "judge"


def _instance(
    category: str, source: str, level: int, target: str, *, example_id: int = 1, language: str = "en"
) -> Instance:
    path = tuple(f"step {i}" for i in range(level + 1))
    return Instance(
        benchmark="followbench",
        instance_id=f"{category}:{example_id}:{level}",
        group_id=f"{category}:{example_id}",
        messages=(Message("user", path[-1]),),
        constraints=tuple(Constraint(i, category) for i in range(level)),
        level=level,
        category=category,
        meta={
            "evolution_path": path,
            "source": source,
            "target": target,
            "answer": None,
            "example_id": example_id,
            "language": language,
        },
    )


def test_rule_plan_writes_the_verdict_to_every_constraint() -> None:
    good = BENCH.plan(_instance("situation", "gsm_8k", 4, "$14"), "That is $14.", "paper")
    assert good.judge_tasks == () and dict(good.rule_values) == {0: True, 1: True, 2: True, 3: True}
    bad = BENCH.plan(_instance("situation", "gsm_8k", 2, "$14"), "That is $15.", "reference")
    assert dict(bad.rule_values) == {0: False, 1: False}


def test_chinese_format_30_is_judged_in_both_modes() -> None:
    instance = _instance("format", "oasst", 3, "", example_id=30, language="zh")
    for mode in ("paper", "reference"):
        plan = BENCH.plan(instance, "回答", mode)
        assert plan.rule_values == {} and plan.judge_tasks[0].turns[0].constraint_idxs == (0, 1, 2)


def test_hsr_ssr_and_csl_from_rule_values_equal_the_reference_sums() -> None:
    # A rule-scored group passing levels 1, 2 and 4: the reference adds 1/0 per level to both the HSR and
    # the SSR sums, and CSL counts levels until the first failure (2 here).
    answers = {1: "$14", 2: "$14", 3: "$15", 4: "$14", 5: "no idea"}
    rows = {
        level: BENCH.plan(_instance("situation", "gsm_8k", level, "$14"), text, "paper").rule_values
        for level, text in answers.items()
    }
    hsr = [float(all(rows[level].values())) for level in range(1, 6)]
    ssr = [sum(bool(v) for v in rows[level].values()) / level for level in range(1, 6)]
    assert hsr == ssr == [1.0, 1.0, 0.0, 1.0, 0.0]
    csl = next((level - 1 for level in range(1, 6) if not hsr[level - 1]), 5)
    assert csl == 2


@pytest.mark.skipif(not (REAL / "data").is_dir(), reason="shared FollowBench data absent")
def test_real_rule_scored_counts() -> None:
    # (rule, judge, unscored) instances per language and mode: the same in both modes at the pinned
    # commit, where code_zh judges Chinese format example 30 (5 instances) and checks only 22 by rule.
    expected: dict[tuple[str, ScoringMode], tuple[int, int, int]] = {
        ("en", "paper"): (350, 470, 0),
        ("en", "reference"): (350, 470, 0),
        ("zh", "paper"): (330, 460, 0),
        ("zh", "reference"): (330, 460, 0),
    }
    # Each language is loaded once for both modes (a load of the English release diffs every level's
    # 5,000-token prompts: it is the slow part of this test).
    loaded = {language: list(BENCH.load(REAL, {"language": language})) for language in ("en", "zh")}
    for (language, mode), counts in expected.items():
        kinds = []
        for instance in loaded[language]:
            plan = BENCH.plan(instance, "", mode)
            unscored = None in plan.rule_values.values()
            kinds.append("judge" if plan.judge_tasks else "unscored" if unscored else "rule")
        assert (kinds.count("rule"), kinds.count("judge"), kinds.count("unscored")) == counts
