"""FollowBench loading: counts on the real release, options, the fixture, and schema errors."""

from __future__ import annotations

import difflib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ifsweep.benchmarks.followbench as followbench
import ifsweep.benchmarks.followbench._load as _load
from ifsweep.benchmarks import Benchmark, DataError, get
from ifsweep.benchmarks.followbench import FollowBench
from ifsweep.benchmarks.releases import FOLLOWBENCH

REAL = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "FollowBench"
needs_real = pytest.mark.skipif(not (REAL / "data").is_dir(), reason="shared FollowBench data absent")

BENCH = FollowBench()


def test_exported_names_are_pinned() -> None:
    assert sorted(followbench.__all__) == sorted(
        [
            "CATEGORIES",
            "CHINESE",
            "ENGLISH",
            "LANGUAGES",
            "RULE_SOURCES",
            "FollowBench",
            "JudgeTemplate",
            "Route",
            "decide_paper",
            "decide_reference",
            "judge_prompt",
            "matches_template",
            "route",
            "rule_verdict",
        ]
    )


def test_registry_and_attributes() -> None:
    typed: Benchmark = FollowBench()  # mypy checks the protocol structurally here
    assert typed.name == "followbench"
    bench = get("followbench")
    assert isinstance(bench, FollowBench)
    assert bench.name == "followbench"
    assert bench.options == frozenset({"language", "categories", "audit_rule_items"})
    assert bench.release is FOLLOWBENCH
    assert len(bench.template_version()) == 12
    int(bench.template_version(), 16)


@needs_real
def test_english_counts_match_the_paper() -> None:
    instances = list(BENCH.load(REAL, {}))
    assert len(instances) == 820
    assert Counter(i.category for i in instances) == {
        "content": 125,
        "situation": 110,
        "style": 150,
        "format": 150,
        "example": 200,
        "mixed": 85,
    }
    assert len({i.group_id for i in instances}) == 164
    assert len({i.instance_id for i in instances}) == 820
    assert Counter(i.level for i in instances) == {level: 164 for level in range(1, 6)}
    for instance in instances:
        assert instance.level is not None
        assert [c.idx for c in instance.constraints] == list(range(instance.level))
        assert instance.messages[0].role == "user" and len(instance.messages) == 1
        assert instance.meta["language"] == "en"
        path = instance.meta["evolution_path"]
        if instance.category == "example":
            assert path == ()
            assert isinstance(instance.meta["answer"], str)
        else:
            assert len(path) == instance.level + 1
            assert path[-1] == instance.messages[0].content


@needs_real
@needs_real
def test_each_constraint_is_the_text_its_level_added() -> None:
    """Constraint i of a level-L instance was added at level i + 1: its text is what that level's
    instruction added to the one before (the data holds whole instructions), the same in every level
    of the group that carries it (issue 36, item 3: the viewer's "constraint" column was empty)."""
    en = {i.instance_id: i for i in BENCH.load(REAL, {"categories": ["format", "content"]})}
    fmt = [c.text for c in en["format:1:5"].constraints]
    assert len(fmt) == 5 and all(fmt), fmt
    assert fmt[1].startswith("Ensure that the introduction contains sentences that follow a 5-7-5 syllable")
    assert fmt[4].startswith("Moreover, infuse an element of suspense"), fmt[4]
    assert [c.text for c in en["format:1:2"].constraints] == fmt[:2]  # a level repeats the earlier ones
    assert "named entity recognition" in en["content:1:2"].constraints[1].text
    zh = {i.instance_id: i for i in BENCH.load(REAL, {"language": "zh", "categories": ["content"]})}
    assert [c.text for c in zh["content:1:2"].constraints] == [
        "，并推断文本中传达的情绪（积极、中性或负面）",
        "，以及执行命名实体识别任务",
    ]


def test_chinese_counts_and_language_folder_forms() -> None:
    from_root = list(BENCH.load(REAL, {"language": "zh"}))
    assert len(from_root) == 790
    assert Counter(i.category for i in from_root)["mixed"] == 65
    assert Counter(i.category for i in from_root)["content"] == 115
    assert all(i.meta["answer"] is None for i in from_root if i.category == "example")
    # The language folder itself works too; data_zh means Chinese without the option.
    from_folder = list(BENCH.load(REAL / "data_zh", {}))
    assert [i.instance_id for i in from_folder] == [i.instance_id for i in from_root]
    assert {i.meta["language"] for i in from_folder} == {"zh"}
    english = list(BENCH.load(REAL / "data", {"categories": ["situation"]}))
    assert len(english) == 110 and {i.meta["language"] for i in english} == {"en"}


@needs_real
def test_mixed_constraint_types_come_from_the_row() -> None:
    mixed = [i for i in BENCH.load(REAL, {"categories": ["mixed"]}) if i.level == 5]
    assert len(mixed) == 17
    assert Counter(c.type for i in mixed for c in i.constraints).keys() <= {"content", "format", "style"}
    text_edit = next(i for i in mixed if i.instance_id == "mixed:3:5")
    assert [c.type for c in text_edit.constraints] == ["content", "content", "format", "format", "format"]


def test_categories_option_filters_in_canonical_order() -> None:
    instances = list(BENCH.load(BENCH.fixture_dir(), {"categories": ["mixed", "style"]}))
    assert [i.category for i in instances] == ["style"] * 5 + ["mixed"] * 10


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"language": "fr"}, "'language'"),
        ({"categories": ["content", "scenario"]}, "'categories'"),
        ({"categories": []}, "'categories'"),
        ({"categories": "content"}, "'categories'"),
        ({"categories": ["style", "style"]}, "'categories'"),
    ],
)
def test_bad_options_name_the_option(options: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        BENCH.validate_options(options)
    with pytest.raises(ValueError, match=named):
        list(BENCH.load(BENCH.fixture_dir(), options))


def test_fixture_has_rule_and_judge_instances_in_both_languages() -> None:
    for language, expected in (("en", 45), ("zh", 30)):
        instances = list(BENCH.load(BENCH.fixture_dir(), {"language": language}))
        assert len(instances) == expected
        routes = Counter("judge" if BENCH.plan(i, "x", "paper").judge_tasks else "rule" for i in instances)
        assert routes["judge"] >= 15 and routes["rule"] >= 10
        assert {i.category for i in instances} == set(followbench.CATEGORIES)


# ---- schema errors ---------------------------------------------------------------------------------


def _group(example_id: int = 1, category: str = "content", source: str = "oasst") -> list[dict[str, Any]]:
    return [
        {
            "example_id": example_id,
            "category": category,
            "source": source,
            "level": level,
            "instruction": f"Do the thing with {level} constraints.",
            "target": "",
        }
        for level in range(6)
    ]


def _write(tmp_path: Path, records: Any, category: str = "content") -> Path:
    folder = tmp_path / "data"
    folder.mkdir(exist_ok=True)
    (folder / f"{category}_constraints.json").write_text(json.dumps(records), encoding="utf-8")
    return folder


def _load_error(folder: Path, category: str = "content") -> DataError:
    with pytest.raises(DataError) as caught:
        list(BENCH.load(folder, {"categories": [category]}))
    return caught.value


def test_valid_hand_written_file_loads(tmp_path: Path) -> None:
    folder = _write(tmp_path, _group(1) + _group(2))
    instances = list(BENCH.load(folder, {"categories": ["content"]}))
    assert [i.instance_id for i in instances][:2] == ["content:1:1", "content:1:2"]
    assert len(instances) == 10


def _mutated(index: int, **changes: Any) -> list[dict[str, Any]]:
    records = _group()
    records[index].update(changes)
    return records


@pytest.mark.parametrize(
    ("records", "record", "field", "words"),
    [
        (_mutated(2, level="2"), 2, "level", "expected int, got str"),
        (_mutated(3, level=True), 3, "level", "expected int, got bool"),
        (_mutated(1, instruction=""), 1, "instruction", "empty instruction"),
        (_mutated(4, extra="x"), 4, "extra", "unknown field"),
        (_mutated(5, level=7), 5, "level", "0..5"),
        (_mutated(2, level=3), 2, "level", "levels 0..5 in order"),
        (_mutated(1, category="style"), 1, "category", "expected category 'content'"),
        (_mutated(3, source="CONLL2003", target="not a list ["), 3, "target", "CONLL2003"),
        (_group()[:4], 3, "level", "stops at level 3"),
        (_group(1) + _group(1), 6, "example_id", "two groups"),
    ],
)
def test_schema_errors_name_file_record_and_field(
    tmp_path: Path, records: list[dict[str, Any]], record: int, field: str, words: str
) -> None:
    error = _load_error(_write(tmp_path, records))
    assert error.path.endswith("content_constraints.json")
    assert (error.record, error.field) == (record, field)
    assert f"record {record}: field '{field}'" in str(error)
    assert words in str(error)


def test_missing_field_is_named(tmp_path: Path) -> None:
    records = _group()
    del records[4]["target"]
    error = _load_error(_write(tmp_path, records))
    assert (error.record, error.field) == (4, "target")


def test_mixed_rows_must_list_one_type_per_level(tmp_path: Path) -> None:
    records = _group(category="mixed")
    for row in records[1:]:
        row["category"] = ", ".join(["format"] * row["level"])
    records[3]["category"] = "format, content"
    error = _load_error(_write(tmp_path, records, "mixed"), "mixed")
    assert (error.record, error.field) == (3, "category")


def test_file_level_errors(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "content_constraints.json").write_text('[{"example_id": 1,\n  oops]', encoding="utf-8")
    error = _load_error(folder)
    assert "invalid JSON at line 2" in str(error) and error.record is None
    (folder / "content_constraints.json").write_text('{"rows": []}', encoding="utf-8")
    assert "JSON array" in str(_load_error(folder))
    assert "file not found" in str(_load_error(folder, "style"))


_TOKENS = st.lists(st.sampled_from(["a", "b", "c", " ", "\n", ".", "\n\n  "]), max_size=60)


@settings(max_examples=400, deadline=None)
@given(_TOKENS, _TOKENS)
def test_the_line_anchored_diff_gives_blocks_the_two_texts_share(old: list[str], new: list[str]) -> None:
    """Matched line by line first (`whole=0` forces it on short texts) or token by token, every block is
    text both hold, in order, never overlapping, ending on difflib's sentinel; the token diff is
    difflib's own."""
    for whole in (0, 10**6):
        blocks = _load._matching_blocks(old, new, whole)
        assert blocks[-1] == (len(old), len(new), 0)
        i_end = j_end = 0
        for i, j, n in blocks[:-1]:
            assert n > 0 and i >= i_end and j >= j_end and old[i : i + n] == new[j : j + n]
            i_end, j_end = i + n, j + n
    whole_diff = difflib.SequenceMatcher(None, old, new, autojunk=False).get_matching_blocks()
    assert _load._matching_blocks(old, new, 10**6) == [tuple(m) for m in whole_diff]


def test_a_long_instruction_gives_the_sentences_its_level_added() -> None:
    """Past the whole-diff size (thousands of tokens, the example category's prompts), lines anchor the
    diff: a sentence added inside a line and a line added at the end are found, nothing else."""
    lines = [f"Passage {i}: the quick brown fox number {i} jumps over the lazy dog." for i in range(200)]
    before = "\n".join(lines)
    changed = lines.copy()
    changed[120] += " Every answer must cite the passage number."
    after = "\n".join([*changed, "Reply in exactly three sentences."])
    assert len(_load._TOKEN.findall(before)) > _load._WHOLE_DIFF_TOKENS
    assert _load.added_text(before, after) == (
        "Every answer must cite the passage number. … Reply in exactly three sentences."
    )
