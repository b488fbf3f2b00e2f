"""Acceptance: CFBench's released judge outputs, imported in reference mode, give back the reference
code's stored per-item `judge_metric` values and the rows of output/scores.xlsx; paper mode differs only
on the items docs/benchmarks/cfbench.md lists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ifsweep.benchmarks.cfbench import (
    SCORE_COLUMNS,
    CFBench,
    paper_values,
    reference_file_scores,
    reference_item_metric,
    reference_parse,
    reference_values,
)
from ifsweep.benchmarks.records import DataError, ImportedResult

SHARED = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "CFBench"
pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason="shared benchmark data not present")

BENCH = CFBench()
JUDGE_DIR = SHARED / "output" / "judge"

# (model, idx): reference values, paper values. Written out here from reading the replies by hand.
PAPER_DIFFERS = {
    ("abab", "1"): ((True,) * 6, (True, True, False, False, False, True)),
    ("deepseek_v2", "1"): ((True,) * 6, (True, True, False, True, False, True)),
    ("moonshot", "5"): ((True,) * 8, (True, False, True, True, True, True, False, True)),
    ("moonshot", "10"): ((True,) * 9, (False, True, True, True, True, True, False, True, True)),
}


def _stored(path: Path) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return records


def _imported(path: Path, data_dir: Path | None) -> list[ImportedResult]:
    return list(BENCH.read_reference_outputs([path], data_dir, {}))


def _file_scores(results: list[ImportedResult]) -> dict[str, float | None]:
    return reference_file_scores(
        (r.instance.split, reference_item_metric(r.instance, r.replies[(0, 0)])) for r in results
    )


def test_eleven_files_sixty_items_reproduce_judge_metric() -> None:
    files = sorted(JUDGE_DIR.glob("*_eval.json"))
    assert len(files) == 11
    checked = 0
    for path in files:
        stored = _stored(path)
        for data_dir in (None, SHARED):
            results = _imported(path, data_dir)
            assert [r.instance.instance_id for r in results] == [str(rec["idx"]) for rec in stored]
            for rec, result in zip(stored, results, strict=True):
                assert result.model == rec["infer_model"] == path.stem.removesuffix("_eval")
                assert result.response == rec["response"]
                assert result.replies == {(0, 0): rec["judge_response"]}
                metric = reference_item_metric(result.instance, rec["judge_response"])
                assert metric == rec["judge_metric"], (path.name, rec["idx"])
                checked += data_dir is None
    assert checked == 60


def test_reference_parse_reproduces_stored_judge_score() -> None:
    for path in sorted(JUDGE_DIR.glob("*_eval.json")):
        for rec, result in zip(_stored(path), _imported(path, None), strict=True):
            parsed = reference_parse(result.instance, rec["judge_response"])
            assert parsed.parsing == rec["judge_parsing"]
            assert parsed.scores == tuple(float(s) for s in rec["judge_score"])


def test_scores_xlsx_rows_are_reproduced() -> None:
    openpyxl = pytest.importorskip("openpyxl")
    sheet = openpyxl.load_workbook(SHARED / "output" / "scores.xlsx", read_only=True)["score"]
    header, *rows = [tuple(row) for row in sheet.iter_rows(values_only=True)]
    assert header == ("time", "name", *SCORE_COLUMNS)
    computed = {
        path.stem.removesuffix("_eval"): _file_scores(_imported(path, SHARED))
        for path in JUDGE_DIR.glob("*_eval.json")
    }
    unmatched = []
    for row in rows:
        stored = dict(zip(SCORE_COLUMNS, row[2:], strict=True))
        if computed[row[1]] != stored:
            unmatched.append(row)
    # The workbook is appended to on every run; ernie35 was scored three times and only the last
    # judge file was kept, so its first row (2024-08-18-22:51:08) belongs to replies nobody has.
    assert [(r[0], r[1]) for r in unmatched] == [("2024-08-18-22:51:08", "ernie35")]
    latest = {row[1]: row for row in rows}
    assert sorted(latest) == sorted(computed)
    for name, row in latest.items():
        assert computed[name] == dict(zip(SCORE_COLUMNS, row[2:], strict=True)), name
    assert len(rows) == 13


def test_paper_mode_differs_only_on_listed_items() -> None:
    differs = {}
    total = 0
    for path in sorted(JUDGE_DIR.glob("*_eval.json")):
        for result in _imported(path, SHARED):
            reply = result.replies[(0, 0)]
            paper = paper_values(result.instance, reply)
            assert paper is not None, (result.model, result.instance.instance_id)
            reference = reference_values(result.instance, reply)
            total += 1
            if paper != reference:
                differs[(result.model, result.instance.instance_id)] = (reference, paper)
    assert total == 60
    assert differs == PAPER_DIFFERS


def test_output_folder_imports_infer_only_records_without_replies() -> None:
    results = list(BENCH.read_reference_outputs([SHARED / "output"], None, {}))
    assert len(results) == 64
    bare = [r for r in results if not r.replies]
    assert {r.model for r in bare} == {"ernie4turbo"}
    assert sorted(r.instance.instance_id for r in bare) == ["0", "1", "2", "3"]
    easy = list(BENCH.read_reference_outputs([SHARED / "output"], SHARED, {"split": "easy"}))
    assert {r.model for r in easy} == {"moonshot"}
    assert all(r.instance.split == "easy" for r in easy)


def test_import_checks_records_against_the_data(tmp_path: Path) -> None:
    records = _stored(JUDGE_DIR / "abab_eval.json")
    records[2]["prompt"] = "换了一个问题"
    path = tmp_path / "abab_eval.json"
    path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(DataError) as info:
        _imported(path, SHARED)
    assert (info.value.path, info.value.record, info.value.field) == (str(path), 2, "prompt")
    del records[1]["judge_response"]
    path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(DataError) as info:
        _imported(path, None)
    assert (info.value.record, info.value.field) == (1, "judge_response")
