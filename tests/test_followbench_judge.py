"""FollowBench judge prompts (exact text) and judge-reply parsing in paper and reference modes."""

from __future__ import annotations

import pytest

from ifsweep.benchmarks.followbench import (
    CHINESE,
    ENGLISH,
    FollowBench,
    decide_paper,
    decide_reference,
    judge_prompt,
)
from ifsweep.benchmarks.records import Constraint, Instance, JudgeTask, JudgeTurn, Message, ScoringMode

BENCH = FollowBench()
PATH = (
    "Suggest a name for a bakery.",
    "Suggest a name for a bakery. Include the word 'Crumb'.",
    "Suggest a name for a bakery. Include the word 'Crumb'. Use at most three words.",
    "Suggest a name for a bakery. Include the word 'Crumb'. Use at most three words. No {digits}.",
)
ANSWER = "Crumb & Co {not a field}"


def _instance(category: str, level: int, language: str = "en") -> Instance:
    return Instance(
        benchmark="followbench",
        instance_id=f"{category}:9:{level}",
        group_id=f"{category}:9",
        messages=(Message("user", PATH[level]),),
        constraints=tuple(Constraint(i, category) for i in range(level)),
        level=level,
        category=category,
        meta={
            "evolution_path": PATH[: level + 1],
            "source": "oasst",
            "target": "",
            "answer": None,
            "example_id": 9,
            "language": language,
        },
    )


def _prompt(category: str, level: int, language: str = "en") -> str:
    plan = BENCH.plan(_instance(category, level, language), ANSWER, "paper")
    assert plan.rule_values == {}
    (task,) = plan.judge_tasks
    assert task.system is None and len(task.turns) == 1
    assert task.turns[0].constraint_idxs == tuple(range(level))
    assert task.messages_for_turn(0, ()) == (Message("user", task.turns[0].user),)
    return task.turns[0].user


def test_content_level_1_exact_text() -> None:
    expected = (
        "Given an initial instruction, we add one content constraint and obtain the final instruction with "
        "1 additional constraint.\n\n"
        "#Initial Instruction#\nSuggest a name for a bakery.\n\n"
        "#Initial Instruction + 1 constraint#\nSuggest a name for a bakery. Include the word 'Crumb'.\n\n"
        "#Answer of Initial Instruction + 1 constraint#\nCrumb & Co {not a field}\n\n"
        "#System#\n"
        "1) Please identify the 1 added constraint.\n"
        "2) Please descriminate if the #Answer of Initial Instruction + 1 constraint# satisfies the 1 added "
        "constraint.\n"
        "3) In the final line, only output a Python LIST with 1 element ('YES' or 'NO') "
        "indicating whether the answer satisfies the 1 added constraint."
    )
    assert _prompt("content", 1) == expected


def test_content_level_3_exact_text() -> None:
    expected = (
        "Given an initial instruction, we add one content constraint per time and obtain the final "
        "instruction with 3 additional constraints.\n\n"
        "#Initial Instruction#\nSuggest a name for a bakery.\n\n"
        "#Initial Instruction + 1 constraint#\nSuggest a name for a bakery. Include the word 'Crumb'.\n\n"
        "#Initial Instruction + 2 constraints#\n"
        "Suggest a name for a bakery. Include the word 'Crumb'. Use at most three words.\n\n"
        "#Initial Instruction + 3 constraints#\n"
        "Suggest a name for a bakery. Include the word 'Crumb'. Use at most three words. No {digits}.\n\n"
        "#Answer of Initial Instruction + 3 constraints#\nCrumb & Co {not a field}\n\n"
        "#System#\n"
        "1) Please identify all 3 added constraints.\n"
        "2) For the 3 added constraints, discriminate if the #Answer of Initial Instruction + 3 constraints# "
        "satisfies each constraint.\n"
        "3) In the final line, only output a Python LIST with 3 elements ('YES' or 'NO') "
        "indicating whether the answer satisfies each constraint."
    )
    assert _prompt("content", 3) == expected


def test_chinese_content_level_1_exact_text() -> None:
    expected = (
        "给定一个初始指令，我们添加一个内容约束，获得了有1个附加约束的最终指令。\n\n"
        "#初始指令#\nSuggest a name for a bakery.\n\n"
        "#初始指令 + 1个约束#\nSuggest a name for a bakery. Include the word 'Crumb'.\n\n"
        "#初始指令 + 1个约束的答案#\nCrumb & Co {not a field}\n\n"
        "#系统#\n1) 请识别出添加的1个约束。\n"
        "2) 请判断#初始指令 + 1个约束的答案#是否满足了添加的1个约束。\n"
        "3) 在最后一行，只输出一个包含1个元素（“YES”或“NO”）的Python列表，表明答案是否满足添加的一个约束。"
    )
    assert _prompt("content", 1, "zh") == expected


@pytest.mark.parametrize(
    ("category", "phrase"),
    [
        ("situation", "situation constraint (information to describe a specific situation/background)"),
        ("style", "style constraint"),
        ("format", "format constraint"),
        ("mixed", "constraint"),
    ],
)
def test_other_categories_differ_only_in_the_phrase(category: str, phrase: str) -> None:
    for level in (1, 3):
        text = _prompt(category, level)
        assert text == _prompt("content", level).replace("content constraint", phrase, 1)
        assert text.startswith(f"Given an initial instruction, we add one {phrase} ")
        assert text.count("#Initial Instruction + ") == level  # one header per step of the path


@pytest.mark.parametrize("category", ["situation", "style", "format", "mixed"])
def test_chinese_categories_use_their_phrase(category: str) -> None:
    phrase = CHINESE.kind(category)
    level3 = _prompt(category, 3, "zh")
    assert level3.startswith(
        f"给定一个初始指令，我们每次添加一个{phrase}，获得了有3个附加约束的最终指令。\n\n"
    )
    assert level3.endswith("表明答案是否满足添加的每一个约束。")
    assert "#初始指令 + 3个约束的答案#\nCrumb & Co {not a field}\n\n" in level3


def test_template_pieces_and_version() -> None:
    assert ENGLISH.kind("content") == "content constraint"
    with pytest.raises(ValueError, match="example"):
        ENGLISH.kind("example")
    with pytest.raises(ValueError, match="level-0"):
        judge_prompt("content", ("only the base",), "x", "en")
    assert BENCH.template_version() == BENCH.template_version()


# ---- parsing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "level", "paper", "reference"),
    [
        ("Constraint 1 ok.\nConstraint 2 missed.\n['YES', 'NO']", 2, (True, False), (True, False)),
        ("analysis\n\n['YES', 'YES', 'YES']\n\n", 3, (True, True, True), (True, True, True)),
        ('["NO", "YES"]', 2, (False, True), (False, True)),
        ("analysis\n['YES', 'NO', 'YES']", 2, None, None),  # wrong length
        ("analysis\n['YES']", 2, None, None),
        ("I think both are fine.", 2, None, None),  # no list
        ("['YES', 'PARTIAL']", 2, None, (True, False)),  # the reference counts PARTIAL as NO
        ("['YES', 'N/A']", 2, None, (True, False)),
        ("['yes', 'NO']", 2, None, None),  # case matters in both
        # paper skips a closing fence line; the reference strips backticks first
        ("['YES', 'NO']\n```", 2, (True, False), (True, False)),
        ("[YES, NO]", 2, (True, False), None),  # bare words: a tokenizer reads them; not literals to eval
        ("__import__('os').system('echo hacked')", 2, None, None),
        ("[__import__('os').system('echo hacked'), 'YES']", 2, None, None),
        ("['YES', 'NO'] + ['YES']", 2, None, None),
        ("['YES'] * 2", 2, None, None),
        ("['YES']['NO']", 2, None, None),  # compiles with a SyntaxWarning, which must not escape
        ("Satisfied: YES", 1, (True,), (True,)),
        ("['NO']", 1, (False,), (False,)),
        ("Not sure.", 1, None, None),
        ("", 1, None, None),
        ("", 3, None, None),
    ],
)
def test_english_parse(reply: str, level: int, paper: object, reference: object) -> None:
    assert decide_paper(reply, level, "en") == paper
    assert decide_reference(reply, level, "en") == reference


@pytest.mark.parametrize(
    ("reply", "level", "paper", "reference"),
    [
        ("分析……\n[“YES”, “NO”]", 2, (True, False), (True, False)),
        ("[YES, NO, YES]", 3, (True, False, True), (True, False, True)),
        ("['YES', 'NO', 'YES']", 2, None, (True, False)),  # the Chinese reference reads the first L
        ("['YES', 'PARTIALLY']", 2, None, (True, False)),
        ("['YES', 'N/A']", 2, None, None),  # not on the Chinese list of negatives
        ("['YES', 'NO'] \n \n", 2, (True, False), None),  # strip(' ') then strip('\n') leaves ' '
        ("[__import__('os').system('echo hacked')]", 1, None, None),
        ("答案：YES", 1, (True,), (True,)),
    ],
)
def test_chinese_parse(reply: str, level: int, paper: object, reference: object) -> None:
    assert decide_paper(reply, level, "zh") == paper
    assert decide_reference(reply, level, "zh") == reference


def _parse(reply: str, level: int, mode: ScoringMode) -> object:
    instance = _instance("style", level)
    task = JudgeTask(0, (JudgeTurn("prompt", tuple(range(level))),))
    return BENCH.parse(instance, task, 0, reply, mode).values


def test_parse_outcomes_by_mode() -> None:
    assert _parse("['YES', 'NO', 'YES']", 3, "paper") == (True, False, True)
    assert _parse("['YES', 'NO']", 3, "paper") is None  # the runner re-asks, then records unparsed
    # The reference's (-1, -1) becomes "not satisfied" on every constraint.
    assert _parse("['YES', 'NO']", 3, "reference") == (False, False, False)
    assert _parse("__import__('os')", 1, "reference") == (False,)


def test_reference_hsr_and_ssr_follow_from_the_values() -> None:
    # The reference returns (int(num_true == L), num_true / L); all() and mean() of our values agree.
    for reply, hard, soft in (
        ("['YES', 'NO', 'YES']", 0, 2 / 3),
        ("['YES', 'YES', 'YES']", 1, 1.0),
        ("['NO', 'MAYBE', 'UNKNOWN']", 0, 0.0),
    ):
        values = decide_reference(reply, 3, "en")
        assert values is not None
        assert (int(all(values)), sum(values) / len(values)) == (hard, soft)
