"""CFBench: loading and validation, the judge prompt, both reply parsers, the reference item metric."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ifsweep.benchmarks.cfbench as cfbench
from ifsweep import benchmarks
from ifsweep.benchmarks.cfbench import (
    CFBench,
    paper_values,
    reference_file_scores,
    reference_item_metric,
    reference_parse,
    reference_values,
    render_judge_prompt,
)
from ifsweep.benchmarks.records import Constraint, DataError, Instance, Message
from ifsweep.benchmarks.releases import CFBENCH

SHARED = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "CFBench"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="shared benchmark data not present")

BENCH = CFBench()


def _record(**overrides: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "idx": 7,
        "prompt": "写一句问候语，不超过十个字。",
        "isanswer": "否",
        "gold": "",
        "doamin": "通用生活",
        "scenario": "写作",
        "source": "tob",
        "split": "easy",
        "criteria": [["是一句问候语", "主需", "内容约束", "语义内容约束"], ["不超过十个字", "次需", "", ""]],
    }
    record.update(overrides)
    return record


def _write(tmp_path: Path, records: list[Any]) -> Path:
    path = tmp_path / "cfbench_data.json"
    path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    return path


def _instance(*items: tuple[str, str]) -> Instance:
    constraints = tuple(
        Constraint(idx=i, priority="primary" if p == "p" else "secondary", text=t)
        for i, (t, p) in enumerate(items)
    )
    return Instance(
        "cfbench", "0", "0", (Message("user", "q"),), constraints, split="hard", meta={"gold": ""}
    )


def test_facade_exports_are_pinned() -> None:
    assert sorted(cfbench.__all__) == sorted(
        [
            "SCORE_COLUMNS",
            "CFBench",
            "ReferenceParse",
            "instance_from_record",
            "judge_template",
            "load_instances",
            "paper_values",
            "read_reference_outputs",
            "reference_file_scores",
            "reference_item_metric",
            "reference_metric_of",
            "reference_parse",
            "reference_values",
            "render_judge_prompt",
        ]
    )
    assert benchmarks.get("cfbench").name == "cfbench"
    assert BENCH.options == frozenset({"split"})
    assert BENCH.release is CFBENCH


def test_record_becomes_instance(tmp_path: Path) -> None:
    (inst,) = BENCH.load(_write(tmp_path, [_record()]), {})
    assert inst.instance_id == inst.group_id == "7"
    assert inst.split == "easy"
    assert inst.messages == (Message("user", "写一句问候语，不超过十个字。"),)
    assert [(c.idx, c.type, c.priority, c.text) for c in inst.constraints] == [
        (0, "内容约束", "primary", "是一句问候语"),
        (1, None, "secondary", "不超过十个字"),
    ]
    assert inst.meta["gold"] == ""
    assert inst.meta["domain"] == "通用生活"
    assert inst.meta["subtypes"] == ("语义内容约束", None)


def test_data_dir_forms_and_split_option(tmp_path: Path) -> None:
    records = [_record(idx=0), _record(idx=1, split="hard"), _record(idx=2)]
    (tmp_path / "data").mkdir()
    path = _write(tmp_path / "data", records)
    for where in (path, path.parent, tmp_path):
        assert [i.instance_id for i in BENCH.load(where, {})] == ["0", "1", "2"]
    assert [i.instance_id for i in BENCH.load(tmp_path, {"split": "easy"})] == ["0", "2"]
    assert [i.instance_id for i in BENCH.load(tmp_path, {"split": ["hard"]})] == ["1"]
    with pytest.raises(ValueError, match="split"):
        BENCH.validate_options({"split": "medium"})
    BENCH.validate_options({"split": ["easy", "hard"]})
    with pytest.raises(DataError, match=r"no cfbench_data\.json"):
        list(BENCH.load(tmp_path / "nowhere", {}))


@pytest.mark.parametrize(
    ("record", "field", "fragment"),
    [
        (_record(idx="7"), "idx", "non-negative integer"),
        (_record(split="medium"), "split", "'easy' or 'hard'"),
        (_record(prompt=None), "prompt", "expected a string"),
        ({k: v for k, v in _record().items() if k != "doamin"}, "doamin", "missing"),
        (_record(criteria=[]), "criteria", "non-empty list"),
        (_record(criteria=[["x", "主需", ""]]), "criteria[0]", "[text, priority, type, subtype]"),
        (_record(criteria=[["a", "主需", "", ""], ["b", "必需", "", ""]]), "criteria[1]", "not 主需 or 次需"),
        (_record(criteria=[[" ", "主需", "", ""]]), "criteria[0]", "empty criterion"),
    ],
)
def test_bad_records_name_file_record_and_field(
    tmp_path: Path, record: dict[str, Any], field: str, fragment: str
) -> None:
    path = _write(tmp_path, [_record(idx=0), record])
    with pytest.raises(DataError) as info:
        list(BENCH.load(path, {}))
    assert info.value.path == str(path)
    assert info.value.record == 1
    assert info.value.field == field
    assert fragment in str(info.value)


def test_repeated_idx_and_non_array_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"duplicate idx 3 \(first in record 0\)"):
        list(BENCH.load(_write(tmp_path, [_record(idx=3), _record(idx=3)]), {}))
    (tmp_path / "cfbench_data.json").write_text('{"idx": 0}', encoding="utf-8")
    with pytest.raises(DataError, match="JSON array"):
        list(BENCH.load(tmp_path, {}))


def test_fixture_covers_both_splits_and_priorities() -> None:
    instances = list(BENCH.load(BENCH.fixture_dir(), {}))
    assert 10 <= len(instances) <= 14
    assert {i.split for i in instances} == {"easy", "hard"}
    priorities = {c.priority for i in instances for c in i.constraints}
    assert priorities == {"primary", "secondary"}
    assert any(c.type is None for i in instances for c in i.constraints)
    assert any(i.meta["gold"] for i in instances)


@needs_shared
def test_real_data_counts_and_quirks() -> None:
    instances = list(BENCH.load(SHARED, {}))
    assert len(instances) == 1000
    assert sum(i.split == "easy" for i in instances) == 500
    constraints = [c for i in instances for c in i.constraints]
    assert len(constraints) == 4237
    assert sum(c.priority == "primary" for c in constraints) == 1835
    assert sum(c.priority == "secondary" for c in constraints) == 2402
    assert sum(c.type is None for c in constraints) == 129
    assert instances[810].messages[0].content == ""
    assert [i.instance_id for i in instances] == [str(n) for n in range(1000)]


@needs_shared
def test_shipped_judge_template_is_byte_exact() -> None:
    shipped = Path(cfbench.__file__).with_name("judge_prompt.txt").read_bytes()
    assert shipped == (SHARED / "prompts" / "judge_prompt.txt").read_bytes()


def test_judge_prompt_substitutes_once_and_keeps_braces() -> None:
    inst = next(BENCH.load(BENCH.fixture_dir(), {"split": "easy"}))
    text = render_judge_prompt(inst, "答案里有 {criteria} 和 {gold_ans}")
    assert "[模型答案]: 答案里有 {criteria} 和 {gold_ans}\n\n[评估标准]: " in text
    assert f"[评估标准]: {inst.constraints[0].text}\n\n{inst.constraints[1].text}" in text
    assert text.endswith("[你的评估]: \n")
    plan = BENCH.plan(inst, "resp", "paper")
    assert plan.rule_values == {}
    (task,) = plan.judge_tasks
    assert task.system is None
    assert task.turns[0].constraint_idxs == tuple(range(len(inst.constraints)))
    assert task.messages_for_turn(0, ()) == (Message("user", render_judge_prompt(inst, "resp")),)
    assert BENCH.plan(inst, "resp", "reference") == plan
    assert len(BENCH.template_version()) == 12


ITEMS = (("是一篇剧评", "p"), ("不少于800字", "s"), ("标题和示例一致", "s"))


def test_paper_exact_reply_keeps_zeros() -> None:
    inst = _instance(*ITEMS)
    reply = "是一篇剧评\t1\n\n不少于800字\t0\n\n标题和示例一致\t1"
    assert paper_values(inst, reply) == (True, False, True)
    assert reference_values(inst, reply) == (True, False, True)
    assert reference_parse(inst, reply).parsing == "1"


def test_paper_matches_normalised_text_in_any_order() -> None:
    inst = _instance(*ITEMS)
    reply = "以下是评估：\n\n2. 标题和示例一致。\t1\n\n不少于 800 字\t0.0\n\n**是一篇剧评**\t1"
    assert paper_values(inst, reply) == (True, False, True)


def test_paper_maps_by_position_only_when_count_matches_and_nothing_contradicts() -> None:
    inst = _instance(*ITEMS)
    reworded = "是关于电影的剧评\t1\n\n不少于800字\t0\n\n自拟标题\t0"
    assert paper_values(inst, reworded) == (True, False, False)
    assert paper_values(inst, "是关于电影的剧评\t1\n\n不少于800字\t0") is None
    swapped = "不少于800字\t1\n\n是关于电影的剧评\t0\n\n自拟标题\t0"
    assert paper_values(inst, swapped) is None
    assert paper_values(inst, "是一篇剧评\t1\n\n是一篇剧评\t0\n\n标题和示例一致\t1") is None
    assert paper_values(inst, "是一篇剧评\t0.5\n\n不少于800字\t0\n\n标题和示例一致\t1") is None
    assert paper_values(inst, "") is None


def test_paper_reads_multiline_criteria_and_untabbed_exact_lines() -> None:
    inst = _instance(("输出格式为：\n1. <主题>\n2. <摘要>", "p"), ("语气正式", "s"))
    assert paper_values(inst, "输出格式为：\n1. <主题>\n2. <摘要>\t1\n\n语气正式：0") == (True, False)
    assert paper_values(inst, "输出格式为：1. <主题> 2. <摘要>\t0\n\n语气正式 1") == (False, True)


def test_reference_fallback_drops_zeros() -> None:
    inst = _instance(*ITEMS)
    reply = "是关于电影的剧评\t1\n\n不少于800字\t0\n\n自拟标题\t0"
    parsed = reference_parse(inst, reply)
    assert (parsed.scores, parsed.parsing) == ((1.0,), "0")
    assert reference_values(inst, reply) == (True, True, True)
    assert reference_item_metric(inst, reply) == {"CSR": 1.0, "ISR": 1.0, "PSR": 1.0}
    nothing = reference_parse(inst, "Error")
    assert (nothing.scores, nothing.parsing) == ((0.0,), "-1")
    assert reference_values(inst, "a\t0\nb\tyes") == (False, False, False)
    assert reference_item_metric(inst, "Error") == {"CSR": 0.0, "ISR": 0.0, "PSR": 0.0}
    # the strict parse wants each criterion back byte for byte, with one tab
    assert reference_parse(inst, "是一篇剧评 \t1\n\n不少于800字\t1\n\n标题和示例一致\t1").parsing == "0"


@pytest.mark.parametrize(
    ("items", "scores", "expected"),
    [
        (("p", "s", "s"), "110", {"CSR": 0.67, "ISR": 0.0, "PSR": 0.0}),
        (("p", "s", "s", "s", "s"), "11110", {"CSR": 0.8, "ISR": 0.0, "PSR": 1.0}),
        (("p", "p", "s", "s"), "1101", {"CSR": 0.75, "ISR": 0.0, "PSR": 0.0}),
        (("p", "p", "s", "s", "s", "s", "s"), "1111110", {"CSR": 0.86, "ISR": 0.0, "PSR": 1.0}),
        (("p", "s"), "01", {"CSR": 0.5, "ISR": 0.0, "PSR": 0.0}),
        (("p", "p"), "11", {"CSR": 1.0, "ISR": 1.0, "PSR": 1.0}),
        (("s", "s", "s", "s", "s", "s"), "111110", {"CSR": 0.83, "ISR": 0.0, "PSR": 1.0}),
        (("s", "s", "s", "s", "s"), "11110", {"CSR": 0.8, "ISR": 0.0, "PSR": 0.0}),
    ],
)
def test_reference_item_metric_rules(items: tuple[str, ...], scores: str, expected: dict[str, float]) -> None:
    inst = _instance(*[(f"考察点{i}", p) for i, p in enumerate(items)])
    reply = "\n\n".join(f"考察点{i}\t{s}" for i, s in enumerate(scores))
    assert reference_item_metric(inst, reply) == expected


def test_reference_file_scores_rounds_and_leaves_empty_splits_none() -> None:
    rows = [("hard", {"CSR": 1.0, "ISR": 1.0, "PSR": 1.0}), ("hard", {"CSR": 0.83, "ISR": 0.0, "PSR": 1.0})]
    rows += [("hard", {"CSR": 0.75, "ISR": 0.0, "PSR": 0.0}), ("hard", {"CSR": 0.8, "ISR": 0.0, "PSR": 1.0})]
    scores = reference_file_scores(rows)
    assert scores["CSR_easy"] is None and scores["PSR_easy"] is None
    assert (scores["CSR_hard"], scores["ISR_hard"], scores["PSR_hard"]) == (0.84, 0.25, 0.75)
    assert (scores["CSR"], scores["ISR"], scores["PSR"]) == (0.84, 0.25, 0.75)
    assert list(scores) == list(cfbench.SCORE_COLUMNS)


def test_parse_routes_by_mode() -> None:
    inst = _instance(*ITEMS)
    (task,) = BENCH.plan(inst, "r", "paper").judge_tasks
    reply = "是关于电影的剧评\t1\n\n不少于800字\t0\n\n自拟标题\t0"
    assert BENCH.parse(inst, task, 0, reply, "paper").values == (True, False, False)
    assert BENCH.parse(inst, task, 0, reply, "reference").values == (True, True, True)
    assert not BENCH.parse(inst, task, 0, "无法评估", "paper").parsed
    with pytest.raises(ValueError, match="one judge task"):
        BENCH.parse(inst, task, 1, reply, "paper")


_TEXT = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=20
)


@given(texts=st.lists(_TEXT, min_size=1, max_size=6, unique=True), bits=st.lists(st.booleans(), min_size=6))
def test_paper_reads_back_the_reference_format(texts: list[str], bits: list[bool]) -> None:
    inst = _instance(*[(f"条目{i}：{t}", "s") for i, t in enumerate(texts)])
    values = tuple(bits[: len(texts)])
    reply = "\n\n".join(f"{c.text}\t{int(v)}" for c, v in zip(inst.constraints, values, strict=True))
    assert paper_values(inst, reply) == values
    parsed = reference_parse(inst, reply)
    if all("\n\n" not in c.text and "\t" not in c.text for c in inst.constraints):
        assert parsed.parsing == "1"
        assert reference_values(inst, reply) == values


@given(reply=st.text(max_size=200))
def test_parsers_never_raise(reply: str) -> None:
    inst = _instance(*ITEMS)
    out = paper_values(inst, reply)
    assert out is None or len(out) == 3
    assert len(reference_values(inst, reply)) == 3
    assert set(reference_item_metric(inst, reply)) == {"CSR", "ISR", "PSR"}
