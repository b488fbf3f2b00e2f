"""EIFBench: the released party file, our fixtures, prompts byte for byte, judge tasks, reply parsing,
schema errors, and reading the reference's judge output."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ifsweep.benchmarks.eifbench as eif
from ifsweep import benchmarks
from ifsweep.benchmarks import DataError, Instance, Message
from ifsweep.benchmarks.eifbench import EIFBench

SHARED = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"
EIF_ROOT = SHARED / "EIFBench"
PARTY = EIF_ROOT / "data" / "sorted_party100.json"
BENCH = EIFBench()
needs_shared = pytest.mark.skipif(not PARTY.is_file(), reason="shared benchmark data absent")


def fixture_instances(**options: Any) -> list[Instance]:
    return list(BENCH.load(BENCH.fixture_dir(), options))


def by_id(instance_id: str) -> Instance:
    return next(i for i in fixture_instances() if i.instance_id == instance_id)


def fixture_records(name: str = "sorted_party2.json") -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = json.loads((BENCH.fixture_dir() / name).read_text(encoding="utf-8"))
    return records


# --- registry, facade, options --------------------------------------------------------------------


def test_registry_finds_the_class_and_the_facade_is_pinned() -> None:
    bench = benchmarks.get("eifbench")
    assert isinstance(bench, EIFBench)
    assert bench.name == "eifbench"
    assert bench.options == frozenset({"scenario"})
    assert sorted(eif.__all__) == sorted(
        [
            "ANSWER_PROMPT",
            "SCENARIOS",
            "SCORE_PROMPT",
            "SPLIT_THRESHOLD",
            "SYSTEM",
            "EIFBench",
            "decide_paper",
            "decide_reference",
            "generation_messages",
            "input_text",
            "instance_id",
            "score_user",
        ]
    )


def test_release_is_the_pinned_one() -> None:
    from ifsweep.benchmarks import releases

    assert BENCH.release is releases.EIFBENCH
    assert BENCH.release.files and all(f.sha256 or f.git_blob for f in BENCH.release.files)


def test_validate_options() -> None:
    for scenario in ("single", "dialogue", "party"):
        BENCH.validate_options({"scenario": scenario})
    BENCH.validate_options({})
    with pytest.raises(ValueError, match=r"option 'scenario'.*'multi'"):
        BENCH.validate_options({"scenario": "multi"})
    with pytest.raises(ValueError, match=r"unknown option.*split"):
        BENCH.validate_options({"split": "easy"})


# --- the released party file ------------------------------------------------------------------------


@needs_shared
def test_real_party_file_counts() -> None:
    instances = list(BENCH.load(EIF_ROOT, {"scenario": "party"}))
    assert len(instances) == 100
    assert sum(len(i.meta["sub_instructions"]) for i in instances) == 849
    assert sum(len(i.constraints) for i in instances) == 8025
    assert len({i.instance_id for i in instances}) == 100
    assert instances[0].instance_id == "party:0"
    assert {i.split for i in instances} == {"party"}
    # Every constraint points at a sub-instruction of its task, and idx is dense.
    for inst in instances:
        assert [c.idx for c in inst.constraints] == list(range(len(inst.constraints)))
        assert {c.instruction_idx for c in inst.constraints} <= {
            s["idx"] for s in inst.meta["sub_instructions"]
        }
    # No party task reaches the reference's 8,192-character split.
    assert not any(i.meta["reference_split"] for i in instances)


@needs_shared
def test_real_file_is_found_from_root_data_folder_or_file() -> None:
    ids = [i.instance_id for i in BENCH.load(EIF_ROOT, {})]
    assert ids == [i.instance_id for i in BENCH.load(EIF_ROOT / "data", {})]
    assert ids == [i.instance_id for i in BENCH.load(PARTY, {})]
    assert ids == [i.instance_id for i in BENCH.load(PARTY, {"scenario": "party"})]
    with pytest.raises(FileNotFoundError, match=r"no sorted_single\*\.json"):
        list(BENCH.load(EIF_ROOT, {"scenario": "single"}))
    with pytest.raises(ValueError, match="a party file, but option 'scenario' is 'dialogue'"):
        list(BENCH.load(PARTY, {"scenario": "dialogue"}))


@needs_shared
def test_real_generation_prompt_rebuilt_by_hand() -> None:
    raw = json.loads(PARTY.read_text(encoding="utf-8"))[0]
    inst = next(iter(BENCH.load(PARTY, {})))
    blocks = [
        f"{key}:\n{sub['instruction']}\nconstraints:\n" + "\n".join(sub["scoring_questions"])
        for key, sub in raw["sub_instructions"].items()
    ]
    text = "Instruction:\n" + raw["input"] + "\n\n" + "\n\n".join(blocks)
    template = (EIF_ROOT / "prompts" / "answer_prompt.txt").read_text(encoding="utf-8")
    assert inst.messages == (
        Message("system", "You are a helpful assistant."),
        Message("user", template.format(input_text=text)),
    )


# --- fixtures and prompts ---------------------------------------------------------------------------


def test_fixture_counts_and_order() -> None:
    instances = fixture_instances()
    # Without a scenario a folder gives every scenario it holds, in the order single, dialogue, party.
    assert [i.instance_id for i in instances] == ["single:11", "dialogue:21", "party:3", "party:5"]
    assert [len(i.constraints) for i in instances] == [5, 4, 8, 5]
    assert [i.instance_id for i in fixture_instances(scenario="party")] == ["party:3", "party:5"]
    inst = by_id("party:5")
    # Keys need not be dense: party:5 has sub_instruction_0 and sub_instruction_2.
    assert [c.instruction_idx for c in inst.constraints] == [0, 0, 2, 2, 2]
    assert {c.type for c in inst.constraints} == {"And"}
    assert inst.category == "And" and inst.split == "party" and inst.group_id == "party:5"


@needs_shared
def test_shipped_prompts_are_the_shared_extracts() -> None:
    here = Path(eif.__file__).parent
    for name in ("answer_prompt.txt", "score_prompt.txt"):
        assert (here / name).read_bytes() == (EIF_ROOT / "prompts" / name).read_bytes()


def test_templates_hold_only_their_fields() -> None:
    from ifsweep.benchmarks.eifbench._prompts import template_fields

    assert template_fields(eif.ANSWER_PROMPT) == ("input_text",)
    assert template_fields(eif.SCORE_PROMPT) == ("input", "output", "sub_instruction", "question")
    assert eif.ANSWER_PROMPT.count("{") == 1 and eif.SCORE_PROMPT.count("{") == 4


def test_generation_prompt_byte_exact() -> None:
    head, tail = eif.ANSWER_PROMPT.split("{input_text}")
    expected_text = (
        "Instruction:\n"
        "\n店长: 下周起店里营业时间改成早八点到晚九点。\n小吴: 那早班要提前半小时到店吗？\n"
        "店长: 对，早班七点半到，晚班九点半走。\n小吴: 我去通知其他同事。\n"
        "\n\n"
        "sub_instruction_0:\n提取对话中提到的所有时间点。\nconstraints:\n"
        "必须列出早八点、晚九点、七点半和九点半四个时间点。\n时间点必须按从早到晚的顺序排列。"
        "\n\n"
        "sub_instruction_2:\n以小吴的口吻写一条发到同事群里的通知。\nconstraints:\n"
        "通知必须以“各位同事”开头。\n通知必须说明早班和晚班的到岗、离岗时间。\n通知中不得出现感叹号。"
    )
    assert by_id("party:5").messages == (
        Message("system", "You are a helpful assistant."),
        Message("user", head + expected_text + tail),
    )
    assert head.startswith("现在你是一个专门负责生成指定任务答案的AI助手。")
    assert tail.startswith("\n\n--output--:\n")


def test_judge_tasks_byte_exact() -> None:
    inst = by_id("party:5")
    response = "各位同事：早班七点半到岗。{question} {0}"
    plan = BENCH.plan(inst, response, "paper")
    assert plan.rule_values == {}
    assert [t.task_idx for t in plan.judge_tasks] == [0, 1, 2, 3, 4]
    assert all(len(t.turns) == 1 and t.system == "You are a helpful assistant." for t in plan.judge_tasks)
    assert [t.turns[0].constraint_idxs for t in plan.judge_tasks] == [(0,), (1,), (2,), (3,), (4,)]
    task = plan.judge_tasks[2]
    record = fixture_records()[1]
    # 6_evaluation.py renders with str.format: the values are never parsed, so the "{question}" in the
    # response stays as it is. Ours must give the very same bytes.
    expected = eif.SCORE_PROMPT.format(
        input=record["input"],
        output=response,
        sub_instruction="sub_instruction_2:以小吴的口吻写一条发到同事群里的通知。",
        question="通知必须以“各位同事”开头。",
    )
    assert task.messages_for_turn(0, ()) == (
        Message("system", "You are a helpful assistant."),
        Message("user", expected),
    )
    sub_and_question = (
        "sub_instruction_2:以小吴的口吻写一条发到同事群里的通知。\n- **约束**: \n通知必须以“各位同事”开头。\n"
    )
    assert "- **子任务**：\n" + sub_and_question in expected
    assert "- **模型回复**：\n各位同事：早班七点半到岗。{question} {0}\n" in expected


def test_template_version_is_short_and_stable() -> None:
    v = BENCH.template_version()
    assert len(v) == 12 and all(c in "0123456789abcdef" for c in v)
    assert v == EIFBench().template_version()


# --- parsing ----------------------------------------------------------------------------------------

PAPER_CASES = [
    ("分析：通知以“各位同事”开头。\n答案：是", True),
    ("分析：出现了感叹号。\n答案：否", False),
    ("分析：……\n**答案**：是", True),
    ("分析：……\n答案: 否", False),
    ("输出格式为“答案：是/否”。分析：不满足。\n答案：否", False),  # the last verdict decides
    ("分析：满足要求，是的。", None),
    ("答案：不确定", None),
    ("", None),
]

REFERENCE_CASES = [
    ("分析：通知以“各位同事”开头。\n答案：是", True),
    ("分析：出现了感叹号。\n答案：否", False),
    ("分析：……\n**答案**：是", True),  # no exact verdict; 是 occurs and 否 does not
    ("分析：……\n答案: 否", False),
    ("输出格式为“答案：是/否”。分析：不满足。\n答案：否", False),  # two exact verdicts: 否 occurs
    ("分析：满足要求，是的。", True),
    ("分析：是否满足？满足。", False),
    ("答案：不确定", False),
    ("", False),
]


@pytest.mark.parametrize(("reply", "expected"), PAPER_CASES)
def test_paper_decisions(reply: str, expected: bool | None) -> None:
    assert eif.decide_paper(reply) is expected


@pytest.mark.parametrize(("reply", "expected"), REFERENCE_CASES)
def test_reference_decisions(reply: str, expected: bool) -> None:
    assert eif.decide_reference(reply) is expected


def test_parse_outcomes_and_malicious_replies(tmp_path: Path) -> None:
    inst = by_id("party:3")
    task = BENCH.plan(inst, "x", "paper").judge_tasks[0]
    assert BENCH.parse(inst, task, 0, "分析：好。\n答案：是", "paper").values == (True,)
    unclear = BENCH.parse(inst, task, 0, "I refuse.", "paper")
    assert unclear.values is None and not unclear.stop
    assert BENCH.parse(inst, task, 0, "I refuse.", "reference").values == (False,)
    marker = tmp_path / "pwned"
    for reply in (f"__import__('os').system('touch {marker}')", f"exec(open('{marker}','w'))"):
        assert BENCH.parse(inst, task, 0, reply, "paper").values is None
        assert BENCH.parse(inst, task, 0, reply, "reference").values == (False,)
    assert not marker.exists()
    with pytest.raises(ValueError, match="one turn"):
        BENCH.parse(inst, task, 1, "答案：是", "paper")


@given(st.text(max_size=300))
def test_parsers_total_on_any_text(reply: str) -> None:
    paper = eif.decide_paper(reply)
    assert paper is None or isinstance(paper, bool)
    assert isinstance(eif.decide_reference(reply), bool)


# --- schema errors ----------------------------------------------------------------------------------


def broken(change: Any) -> list[dict[str, Any]]:
    records = copy.deepcopy(fixture_records())
    change(records[1])
    return records


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (lambda r: r.update(main_id="5"), "main_id", "expected an integer"),
        (lambda r: r.update(main_id=True), "main_id", "expected an integer"),
        (lambda r: r.pop("input"), "input", "missing"),
        (lambda r: r.update(category=None), "category", "expected a string"),
        (lambda r: r.update(composition_types="And"), "composition_types", "list of strings"),
        (lambda r: r.update(sub_instructions={}), "sub_instructions", "non-empty object"),
        (lambda r: r["sub_instructions"].update(step_3={}), "sub_instructions", "'step_3' is not"),
        (
            lambda r: r["sub_instructions"].update(
                sub_instruction_00={"instruction": "", "scoring_questions": []}
            ),
            "sub_instructions",
            "same number",
        ),
        (
            lambda r: r["sub_instructions"]["sub_instruction_2"].update(scoring_questions="x"),
            "sub_instructions",
            "sub_instruction_2.scoring_questions",
        ),
        (
            lambda r: r["sub_instructions"]["sub_instruction_0"].pop("instruction"),
            "sub_instructions",
            "sub_instruction_0.instruction",
        ),
        (lambda r: r.update(main_id=3), "main_id", "duplicate main_id 3 (first in record 0)"),
    ],
)
def test_schema_errors_name_file_record_and_field(
    tmp_path: Path, change: Any, field: str, message: str
) -> None:
    path = tmp_path / "sorted_party2.json"
    path.write_text(json.dumps(broken(change), ensure_ascii=False), encoding="utf-8")
    with pytest.raises(DataError) as info:
        list(BENCH.load(tmp_path, {}))
    err = info.value
    assert (err.path, err.record, err.field) == (str(path), 1, field)
    assert message in str(err)


def test_file_level_errors(tmp_path: Path) -> None:
    path = tmp_path / "sorted_party9.json"
    path.write_text('{"main_id": 1}', encoding="utf-8")
    with pytest.raises(DataError, match="expected a JSON array of tasks, got dict"):
        list(BENCH.load(path, {}))
    path.write_text("[1]", encoding="utf-8")
    with pytest.raises(DataError, match="record 0: expected an object, got int"):
        list(BENCH.load(path, {}))
    path.write_text("[{", encoding="utf-8")
    with pytest.raises(DataError, match="not valid JSON"):
        list(BENCH.load(path, {}))
    other = tmp_path / "tasks.json"
    other.write_text(json.dumps(fixture_records()), encoding="utf-8")
    with pytest.raises(ValueError, match="cannot tell the scenario"):
        list(BENCH.load(other, {}))
    assert [i.instance_id for i in BENCH.load(other, {"scenario": "dialogue"})] == [
        "dialogue:3",
        "dialogue:5",
    ]
    (tmp_path / "sorted_party100.json").write_text("[]", encoding="utf-8")
    with pytest.raises(DataError, match="two party files"):
        list(BENCH.load(tmp_path, {}))


# --- importing the reference's output ---------------------------------------------------------------


def eval_line(
    main_id: int, key: str, instruction: str, question: str, output: Any, reply: str
) -> dict[str, Any]:
    return {
        "main_id": main_id,
        "point_id": 1,
        "rule": False,
        "input": "...",
        "sub_instruction_id": key,
        "sub_instruction": instruction,
        "question": question,
        "output": output,
        "point_judge": "答案：是" in reply,
        "point_explanation": reply,
    }


def test_read_reference_outputs(tmp_path: Path) -> None:
    inst = by_id("party:5")
    subs = {s["idx"]: (s["key"], s["instruction"]) for s in inst.meta["sub_instructions"]}
    lines = []
    for c in inst.constraints:
        key, instruction = subs[c.instruction_idx]
        lines.append(eval_line(5, key, instruction, c.text, "答复", f"分析：第{c.idx}条。\n答案：是"))
    lines[1]["point_explanation"] = "Err"  # 8_metric.py leaves these out
    lines.append({**lines[3], "point_explanation": "分析：重判。\n答案：否"})  # a resumed run: the last wins
    lines.append(eval_line(3, subs[0][0], "", by_id("party:3").constraints[0].text, None, "答案：否"))
    path = tmp_path / "evaluate_my-model_party.jsonl"
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")

    results = list(BENCH.read_reference_outputs([path], BENCH.fixture_dir(), {}))
    assert [(r.model, r.instance.instance_id, r.response) for r in results] == [
        ("my-model", "party:5", "答复"),
        ("my-model", "party:3", ""),
    ]
    assert results[0].instance == inst
    assert results[0].replies == {
        (0, 0): "分析：第0条。\n答案：是",
        (2, 0): "分析：第2条。\n答案：是",
        (3, 0): "分析：重判。\n答案：否",
        (4, 0): "分析：第4条。\n答案：是",
    }
    assert results[1].replies == {(0, 0): "答案：否"}

    lines[0]["question"] = "不存在的约束"
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    with pytest.raises(DataError, match=r"record 1: field 'question'"):
        list(BENCH.read_reference_outputs([path], BENCH.fixture_dir(), {}))
    with pytest.raises(ValueError, match="needs the data directory"):
        list(BENCH.read_reference_outputs([path], None, {}))
    unnamed = tmp_path / "judged.jsonl"
    unnamed.write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="cannot tell the scenario"):
        list(BENCH.read_reference_outputs([unnamed], BENCH.fixture_dir(), {}))
    assert list(BENCH.read_reference_outputs([unnamed], BENCH.fixture_dir(), {"scenario": "party"})) == []


def test_read_reference_outputs_rejects_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "evaluate_m_party.jsonl"
    path.write_text(json.dumps({"main_id": "5"}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"record 1: field 'main_id'"):
        list(BENCH.read_reference_outputs([path], BENCH.fixture_dir(), {}))
    good = eval_line(99, "sub_instruction_0", "", "q", "o", "答案：是")
    path.write_text("\n" + json.dumps(good) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"record 2: field 'main_id': main_id 99 is not in the data"):
        list(BENCH.read_reference_outputs([path], BENCH.fixture_dir(), {}))
    path.write_text(
        json.dumps({k: v for k, v in good.items() if k != "point_explanation"}) + "\n", encoding="utf-8"
    )
    with pytest.raises(DataError, match="field 'point_explanation': missing"):
        list(BENCH.read_reference_outputs([path], BENCH.fixture_dir(), {}))
