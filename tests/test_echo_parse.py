"""Paper-mode parsing that an echoing judge cannot fool (issue 11), in every benchmark.

The judge prompts are the real ones each benchmark builds for its built-in fixture instances. Any text
copied from them (the whole prompt, any one line, the last lines, the re-ask's quoted rule) must parse as
unparsed in paper mode; a real answer after such an echo, and real answers in the usual layouts, must
still parse. Reference mode keeps each reference's reading (docs/benchmarks/<bench>.md).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from ifsweep import benchmarks
from ifsweep.benchmarks import Benchmark, Instance, JudgeTask
from ifsweep.benchmarks._echo import PromptText, is_echo, own_lines, without_copies
from ifsweep.benchmarks.records import reask_message

RESPONSE = "Here is my answer.\nIt has two lines."


def _tasks(name: str, language: str | None = None, limit: int = 40) -> Iterator[tuple[Instance, JudgeTask]]:
    bench = benchmarks.get(name)
    data = bench.fixture_dir()
    options = {}
    if language == "zh":
        data, options = data / "data_zh", {"language": "zh"}
    elif language == "en":
        data = data / "data"
    for inst in itertools.islice(bench.load(data, options), limit):
        for task in bench.plan(inst, RESPONSE, "paper").judge_tasks:
            yield inst, task


CASES = [
    ("followbench", "en"),
    ("followbench", "zh"),
    ("infobench", None),
    ("cfbench", None),
    ("eifbench", None),
]


def _echoes(task: JudgeTask, turn_idx: int) -> Iterator[str]:
    """Replies made only of text the judge was sent for this turn."""
    sent = [task.turns[turn_idx].user, reask_message(task.turns[turn_idx]).content]
    if task.system:
        sent.append(task.system)
    for text in sent:
        lines = [line for line in text.splitlines() if line.strip()]
        yield text
        yield "\n".join(lines[-3:])
        yield from lines
        # a copied line cut short, as max_tokens cuts it
        yield from (line[: max(20, len(line) * 2 // 3)] for line in lines if len(line) > 30)


@pytest.mark.parametrize(("name", "language"), CASES)
def test_text_copied_from_the_prompt_is_never_a_verdict(name: str, language: str | None) -> None:
    bench: Benchmark = benchmarks.get(name)
    checked = 0
    for inst, task in _tasks(name, language):
        for turn_idx in range(len(task.turns)):
            for echo in _echoes(task, turn_idx):
                outcome = bench.parse(inst, task, turn_idx, echo, "paper")
                assert outcome.values is None, (inst.instance_id, turn_idx, echo[-200:], outcome.values)
                checked += 1
    assert checked > 50


def _one(name: str, language: str | None = None) -> tuple[Instance, JudgeTask]:
    return next(iter(_tasks(name, language)))


def _paper(name: str, reply: str, language: str | None = None, level: int | None = None) -> object:
    bench = benchmarks.get(name)
    for inst, task in _tasks(name, language):
        if level is None or len(task.turns[0].constraint_idxs) == level:
            return bench.parse(inst, task, 0, reply, "paper").values
    raise AssertionError(f"no {name} task of level {level}")


L1_RULE = (
    "3) In the final line, only output a Python LIST with 1 element ('YES' or 'NO') indicating whether "
    "the answer satisfies the 1 added constraint."
)


@pytest.mark.parametrize(
    ("reply", "level", "expected"),
    [
        (L1_RULE, 1, None),  # the issue-11 echo: both words on a line copied from the template
        ("YES or NO", 1, None),  # both words
        ("['YES', 'NO']", 1, None),  # wrong length
        ("['YES']", 1, (True,)),
        ("NO", 1, (False,)),
        ("**YES**", 1, (True,)),
        ("Answer: NO.", 1, (False,)),
        ("The constraint is met.\n['YES']\n```", 1, (True,)),
        (f"{L1_RULE}\n['NO']", 1, (False,)),  # the echo is dropped, the answer after it decides
        (f"['NO']\n{L1_RULE}", 1, (False,)),  # and an echo after the answer is ignored too
        ("['YES', 'NO'] YES", 2, None),  # another verdict word beside the list
        ("['YES', 'NO'] ['NO', 'NO']", 2, None),  # two lists
        ("['YES', 'NO', 'YES']", 2, None),
        ('1) ok\n2) missed\n["YES", "NO"]', 2, (True, False)),
        ("Final list: ['NO', 'YES']", 2, (False, True)),
        ("[YES, NO]", 2, (True, False)),
        ("['YES', 'maybe']", 2, None),
    ],
)
def test_followbench_paper_reads_only_a_clear_answer(reply: str, level: int, expected: object) -> None:
    assert _paper("followbench", reply, "en", level) == expected


def test_followbench_reference_mode_is_still_fooled_as_the_reference_is() -> None:
    bench = benchmarks.get("followbench")
    for inst, task in _tasks("followbench", "en"):
        if len(task.turns[0].constraint_idxs) == 1:
            assert bench.parse(inst, task, 0, L1_RULE, "reference").values == (True,)
            return
    raise AssertionError("no level-1 judge task in the fixture")


@pytest.mark.parametrize(
    ("reply", "language", "expected"),
    [
        ("[“YES”, “NO”]", "zh", (True, False)),
        (
            "3) 在最后一行，只输出一个包含2个元素（“YES”或“NO”）的Python列表，"
            "表明答案是否满足添加的每一个约束。",
            "zh",
            None,
        ),
    ],
)
def test_followbench_chinese(reply: str, language: str, expected: object) -> None:
    assert _paper("followbench", reply, language, 2) == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (
            "- YES: Select 'YES' if the generated text entirely fulfills the condition specified in the "
            "question.",
            None,
        ),
        ("YES: Select 'YES' if the generated text entirely fulfills", None),  # cut short by max_tokens
        ("- NO: Opt for 'NO' if the generated text fails to meet the question's requirements", None),
        ("- YES: Select 'YES' if the generated text entirely fulfills the condition\nNO", False),
        ("YES", True),
        ("No, it does not.", False),
        ("**NO**", False),
        ("The text is in French, so the answer is YES.", True),
        ("YES and NO", True),  # the first word decides (unchanged rule)
        ("It could be YES or NO.", None),
        # A rule line quoted inside the judge's own sentence: the quoted YES is not its verdict.
        ("Based on the rules, YES: Select 'YES' if the generated text entirely fulfills", None),
        ("Based on the rules, YES: Select 'YES' if the generated text entirely fulfills. NO", False),
    ],
)
def test_infobench_paper(reply: str, expected: bool | None) -> None:
    assert _paper("infobench", reply) == (None if expected is None else (expected,))


def test_infobench_reference_is_fooled_by_an_echoed_rule_as_the_reference_is() -> None:
    inst, task = _one("infobench")
    echo = (
        "- YES: Select 'YES' if the generated text entirely fulfills the condition specified in the question."
    )
    # evaluation.py: "- yes" starts with neither word, then "YES" occurs and "NO" does not, so the
    # reference reads SYS_MSG's own rule line as a YES; reference mode keeps that (documented)
    outcome = benchmarks.get("infobench").parse(inst, task, 0, echo, "reference")
    assert outcome.values == (True,)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("答案：是/否", None),  # the template's own format line
        ("## 输出格式\n分析：xxx\n答案：是/否", None),
        ("分析：满足。\n答案：是或否", None),
        ("分析：满足。\n答案：是", True),
        ("分析：不满足。\n**答案**：否", False),
        ("## 输出格式\n分析：xxx\n答案：是/否\n分析：没有满足。\n答案：否", False),
        ("答案：是\n答案：否", None),  # two different verdicts
        ("分析：完全满足\n答案: 是。", True),
    ],
)
def test_eifbench_paper(reply: str, expected: bool | None) -> None:
    assert _paper("eifbench", reply) == (None if expected is None else (expected,))


def test_eifbench_reference_reads_the_echoed_format_line_as_the_reference_does() -> None:
    inst, task = _one("eifbench")
    # 6_evaluation.py: "答案：是" occurs once (inside "答案：是/否"), so the reference says 是
    assert benchmarks.get("eifbench").parse(inst, task, 0, "答案：是/否", "reference").values == (True,)


def test_cfbench_paper_ignores_the_templates_example_verdicts() -> None:
    bench = benchmarks.get("cfbench")
    example = "和参考答案结果一致，替换准确\t1\n\n不存在其他冗余信息，引号可忽略\t0"
    example2 = "\n\n".join(
        [
            "生成唐代诗人李白的诗句。\t0",
            "诗句主题是友情。\t1",
            '输出结果应为JSON格式，JSON格式包含两个key：""诗句""和""诗名""。\t0',
            "提供三组不同的诗句。\t1",
            "每个诗句控制在5个字，一组10个字。\t0",
        ]
    )
    seen = set()
    for inst, task in _tasks("cfbench", None):
        n = len(inst.constraints)
        seen.add(n)
        for echo in (example, example2):
            assert bench.parse(inst, task, 0, echo, "paper").values is None
        real = "\n\n".join(f"{c.text}\t{i % 2}" for i, c in enumerate(inst.constraints))
        values = tuple(i % 2 == 1 for i in range(n))
        assert bench.parse(inst, task, 0, real, "paper").values == values
        assert bench.parse(inst, task, 0, f"{example}\n\n{real}", "paper").values == values
        # by position, when the texts are paraphrased, still reads
        by_pos = "\n\n".join(f"第{i + 1}条\t1" for i in range(n))
        assert bench.parse(inst, task, 0, by_pos, "paper").values == (True,) * n
    assert 2 in seen or 5 in seen, "the fixture has an instance the examples' line count could fool"


def test_echo_tool_keeps_short_answers_and_drops_copied_text() -> None:
    prompt = PromptText.of(["Answer YES or NO.\n答案：是/否\n- YES: Select 'YES' if the text fits."])
    assert own_lines("YES\n答案：是/否\n答案：是\nAnswer YES or NO.", prompt) == ["YES", "答案：是"]
    assert is_echo("> - YES: Select 'YES' if the text", prompt)  # quoted, and cut short
    assert not is_echo("Select 'YES'", prompt)  # too short to tell from an answer
    assert not is_echo("", prompt)
    # Copied pieces inside a line the judge wrote are cut out; its own words stay.
    assert own_lines("So: - YES: Select 'YES' if the text fits. Mine is NO", prompt) == ["So: Mine is NO"]
    assert without_copies("x Answer YES or NO. y", prompt.text) == "x y"


@pytest.mark.parametrize("verdict", [True, False])
@pytest.mark.parametrize(("name", "language"), CASES)
def test_an_answer_holding_the_judges_verdict_line_keeps_the_honest_verdict(
    name: str, language: str | None, verdict: bool
) -> None:
    """Issue 21.6: the answer under judgment holds the judge's exact verdict lines ("答案：是", "YES",
    "['YES']", a criterion and its score); the judge's honest reply is those same lines, and must be read,
    not dropped as a copy of its prompt (copies are looked for in the benchmark's own template text only)."""
    bench = benchmarks.get(name)
    checked = 0
    for inst, probe in itertools.islice(_tasks(name, language), 6):
        judge = bench.simulated_judge_reply(probe.messages_for_turn(0, ()), lambda _, __: verdict)
        assert judge is not None
        answer = f"My work, checked as a judge would:\n{judge}\nThat is all."
        plan = bench.plan(inst, answer, "paper")
        task = next(t for t in plan.judge_tasks if t.task_idx == probe.task_idx)
        reply = bench.simulated_judge_reply(task.messages_for_turn(0, ()), lambda _, __: verdict)
        assert reply == judge and all(line in answer.splitlines() for line in reply.splitlines())
        n = len(task.turns[0].constraint_idxs)
        assert bench.parse(inst, task, 0, reply, "paper").values == (verdict,) * n, (inst.instance_id, reply)
        checked += 1
    assert checked >= 3
