"""`ifsweep import` end to end: a reference tool's output files -> a run directory -> verdict rows and
`ifsweep report`. CFBench on its released judge outputs; InFoBench, FollowBench and EIFBench on files
written here in each reference's output shape."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from statistics import fmean
from typing import Any

import pytest

from ifsweep import benchmarks
from ifsweep.benchmarks import Instance
from ifsweep.benchmarks.cfbench import (
    SCORE_COLUMNS,
    ReferenceParse,
    reference_file_scores,
    reference_metric_of,
)
from ifsweep.benchmarks.followbench import judge_prompt
from ifsweep.runner.commands.cli import main
from ifsweep.runner.store.shards import RunStore

# (model, idx) -> per-item values of paper mode, where they differ from reference mode (all True there);
# the table of docs/benchmarks/cfbench.md.
CFBENCH_PAPER_DIFFERS = {
    ("abab", "1"): (True, True, False, False, False, True),
    ("deepseek_v2", "1"): (True, True, False, True, False, True),
    ("moonshot", "5"): (True, False, True, True, True, True, False, True),
    ("moonshot", "10"): (False, True, True, True, True, True, False, True, True),
}


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def verdicts(run_dir: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(model, instance_id) -> the verdict record of a run directory."""
    store = RunStore.open(run_dir, writer_id="reader")
    try:
        records = list(store.iter_records({"verdict"}))
    finally:
        store.close()
    out = {(r["model"], r["instance_id"]): r for r in records}
    assert len(out) == len(records), "one verdict per (model, instance)"
    return out


def row_values(verdict: dict[str, Any]) -> tuple[bool | None, ...]:
    rows = sorted(verdict["rows"], key=lambda r: r["constraint_idx"])
    assert [r["constraint_idx"] for r in rows] == list(range(len(rows)))
    return tuple(r["satisfied"] for r in rows)


def report_rows(capsys: pytest.CaptureFixture[str], run_dir: Path) -> list[dict[str, Any]]:
    code, out, err = run_cli(capsys, "report", str(run_dir), "--format", "json")
    assert code == 0, err
    rows: list[dict[str, Any]] = json.loads(out)
    return rows


def headline(rows: Iterable[dict[str, Any]], benchmark: str) -> dict[tuple[str, str], float]:
    return {
        (r["model"], r["metric"]): r["value"]
        for r in rows
        if r["benchmark"] == benchmark and r["slice"] == "all"
    }


# ------------------------------------------------------------------------------------------------- CFBench


@pytest.fixture
def cfbench_shared(shared_benchmarks: Path) -> Path:
    return shared_benchmarks / "CFBench"


def _cfbench_instances(cfbench: Path) -> dict[str, Instance]:
    return {i.instance_id: i for i in benchmarks.get("cfbench").load(cfbench, {})}


def _stored_eval(cfbench: Path) -> dict[str, list[dict[str, Any]]]:
    files = sorted((cfbench / "output" / "judge").glob("*_eval.json"))
    assert len(files) == 11
    return {p.stem.removesuffix("_eval"): json.loads(p.read_text(encoding="utf-8")) for p in files}


def _reference_item_metric(inst: Instance, values: tuple[bool | None, ...]) -> dict[str, float]:
    """The reference's per-item metric from our verdict rows: a fallback parse was stored as all-True or
    all-False rows, which give exactly the metric the reference derives from it."""
    assert all(v is not None for v in values)
    return reference_metric_of(inst, ReferenceParse(tuple(float(bool(v)) for v in values), "1"))


def test_cfbench_reference_import_reproduces_judge_metric_and_scores_xlsx(
    tmp_path: Path, cfbench_shared: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = sorted(str(p) for p in (cfbench_shared / "output" / "judge").glob("*_eval.json"))
    run_dir = tmp_path / "ref"
    code, out, err = run_cli(
        capsys, "import", "cfbench", *files, "--out", str(run_dir), "--scoring", "reference"
    )
    assert code == 0, err
    assert "imported 60 answers of 11 models" in out and "60 scored, 0 errors" in out

    insts = _cfbench_instances(cfbench_shared)
    got = verdicts(run_dir)
    assert len(got) == 60
    per_model: dict[str, list[tuple[str | None, dict[str, float]]]] = defaultdict(list)
    for model, records in _stored_eval(cfbench_shared).items():
        for rec in records:
            verdict = got[(model, str(rec["idx"]))]
            assert verdict["status"] == "ok" and verdict["scoring"] == "reference"
            inst = insts[str(rec["idx"])]
            assert [r["priority"] for r in sorted(verdict["rows"], key=lambda r: r["constraint_idx"])] == [
                c.priority for c in inst.constraints
            ]
            metric = _reference_item_metric(inst, row_values(verdict))
            assert metric == rec["judge_metric"], (model, rec["idx"])
            per_model[model].append((inst.split, metric))

    openpyxl = pytest.importorskip("openpyxl")
    workbook = openpyxl.load_workbook(cfbench_shared / "output" / "scores.xlsx", read_only=True)
    try:
        _, *xlsx_rows = [tuple(row) for row in workbook["score"].iter_rows(values_only=True)]
    finally:
        workbook.close()
    latest = {row[1]: dict(zip(SCORE_COLUMNS, row[2:], strict=True)) for row in xlsx_rows}
    assert sorted(latest) == sorted(per_model)
    for model, items in per_model.items():
        assert reference_file_scores(items) == latest[model], model

    # The report prints the reference's numbers: each item's CSR rounded before ISR and PSR are taken
    # from it, every mean rounded again (code/evalaute.py, _score_compute and _scores).
    report = report_rows(capsys, run_dir)
    for model, stored in latest.items():
        for column, value in stored.items():
            metric, _, split = column.partition("_")
            slice_ = f"split={split}" if split else "all"
            got_value = [
                r["value"]
                for r in report
                if (r["benchmark"], r["model"], r["metric"], r["slice"]) == ("cfbench", model, metric, slice_)
            ]
            assert got_value == ([] if value is None else [value]), (model, column)
    # Paper mode on the same files rounds nothing: its CSR is the plain mean of per-item means.
    paper_dir = tmp_path / "paper"
    code, _, err = run_cli(capsys, "import", "cfbench", *files, "--out", str(paper_dir), "--scoring", "paper")
    assert code == 0, err
    paper = {k: row_values(v) for k, v in verdicts(paper_dir).items()}
    heads = headline(report_rows(capsys, paper_dir), "cfbench")
    for model in latest:
        values = [paper[(model, str(r["idx"]))] for r in _stored_eval(cfbench_shared)[model]]
        assert heads[(model, "CSR")] == pytest.approx(
            fmean(fmean(1.0 if x else 0.0 for x in v) for v in values)
        )


def test_cfbench_paper_import_differs_only_on_documented_items(
    tmp_path: Path, cfbench_shared: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    judge_dir = cfbench_shared / "output" / "judge"
    runs = {}
    for mode in ("paper", "reference"):
        run_dir = tmp_path / mode
        # A folder stands for every output file below it; the data makes the records be checked against it.
        code, _, err = run_cli(
            capsys,
            "import",
            "cfbench",
            str(judge_dir),
            "--out",
            str(run_dir),
            "--scoring",
            mode,
            "--data",
            str(cfbench_shared),
        )
        assert code == 0, err
        runs[mode] = {k: row_values(v) for k, v in verdicts(run_dir).items()}
    assert runs["paper"].keys() == runs["reference"].keys() and len(runs["paper"]) == 60
    differs = {k: v for k, v in runs["paper"].items() if v != runs["reference"][k]}
    assert differs == CFBENCH_PAPER_DIFFERS
    for key in differs:
        assert all(runs["reference"][key])


def test_cfbench_response_without_judge_reply_is_an_error_not_a_score(
    tmp_path: Path, cfbench_shared: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    infer = cfbench_shared / "output" / "response" / "ernie4turbo_infer.json"
    code, out, err = run_cli(capsys, "import", "cfbench", str(infer), "--out", str(tmp_path / "r"))
    assert code == 0, err
    assert "4 answers of 1 models" in out and "0 scored, 4 errors" in out
    got = verdicts(tmp_path / "r")
    assert {v["status"] for v in got.values()} == {"error"}
    assert all(r["satisfied"] is None and r["status"] == "error" for v in got.values() for r in v["rows"])


# ------------------------------------------------------------------------------------------------ InFoBench


def test_infobench_decompose_eval_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = benchmarks.get("infobench")
    data = bench.fixture_dir() / "InfoBench.json"
    entries = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines() if line.strip()]
    evals: dict[str, list[bool | None]] = {}
    lines = []
    for n, entry in enumerate(entries):
        k = len(entry["decomposed_questions"])
        values: list[bool | None] = [(n + i) % 3 != 0 for i in range(k)]
        if n == 0:
            values = [True, None]  # evaluation.py stopped at an unclear reply to question 2
        evals[entry["id"]] = values
        lines.append(json.dumps({**entry, "output": f"answer {n}", "eval": values}))
    path = tmp_path / "tiny-model_DecomposeEval.json"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    run_dir = tmp_path / "run"
    code, out, err = run_cli(
        capsys,
        "import",
        "infobench",
        str(path),
        "--out",
        str(run_dir),
        "--scoring",
        "reference",
        "--data",
        str(bench.fixture_dir()),
    )
    assert code == 0, err
    assert f"imported {len(entries)} answers of 1 models" in out and "0 errors" in out
    got = verdicts(run_dir)
    assert {m for m, _ in got} == {"tiny-model"}
    for entry_id, values in evals.items():
        rows = row_values(got[("tiny-model", entry_id)])
        # The reference counts the unclear answer as not satisfied and never asks the rest: no rows.
        assert rows == tuple(bool(v) for v in values), entry_id
    heads = headline(report_rows(capsys, run_dir), "infobench")
    decided = [bool(v) for vs in evals.values() for v in vs]
    assert heads[("tiny-model", "DRFR")] == pytest.approx(sum(decided) / len(decided))

    # Paper mode cannot score what the reference never asked: that entry is an error, the rest match.
    paper_dir = tmp_path / "paper"
    code, out, err = run_cli(capsys, "import", "infobench", str(path), "--out", str(paper_dir))
    assert code == 0, err
    paper = verdicts(paper_dir)
    first = entries[0]["id"]
    assert paper[("tiny-model", first)]["status"] == "error"
    for entry_id, values in evals.items():
        if entry_id != first:
            assert row_values(paper[("tiny-model", entry_id)]) == tuple(values)


# ---------------------------------------------------------------------------------------------- FollowBench


def _followbench_level2_content_prompt(path: tuple[str, ...], answer: str) -> str:
    """The reference's judge prompt for a level-2 content answer, written out here from its format."""
    return (
        "Given an initial instruction, we add one content constraint per time and obtain the final "
        "instruction with 2 additional constraints.\n\n"
        f"#Initial Instruction#\n{path[0]}\n\n"
        f"#Initial Instruction + 1 constraint#\n{path[1]}\n\n"
        f"#Initial Instruction + 2 constraints#\n{path[2]}\n\n"
        f"#Answer of Initial Instruction + 2 constraints#\n{answer}\n\n"
        "#System#\n1) Please identify all 2 added constraints.\n2) For the 2 added constraints, "
        "discriminate if the #Answer of Initial Instruction + 2 constraints# satisfies each constraint.\n"
        "3) In the final line, only output a Python LIST with 2 elements ('YES' or 'NO') indicating "
        "whether the answer satisfies each constraint."
    )


def _jsonl(path: Path, pairs: Iterable[tuple[str, str | None]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"prompt_new": p, "choices": [{"message": {"content": c}}]}) for p, c in pairs]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _fb_values(inst: Instance) -> tuple[bool, ...]:
    level = inst.level or 0
    return tuple((int(inst.meta["example_id"]) + i) % 2 == 0 for i in range(level))


def test_followbench_reference_output_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = benchmarks.get("followbench")
    data = bench.fixture_dir()
    insts = list(bench.load(data, {}))
    answers = {i.instance_id: f"Answer of m1 to {i.instance_id}." for i in insts}
    api_out, judge_out = tmp_path / "api_output", tmp_path / "gpt4_discriminative_eval_output"
    judged: dict[str, tuple[bool, ...]] = {}
    skipped = None
    by_category: dict[str, list[Instance]] = defaultdict(list)
    for inst in insts:
        by_category[inst.category or ""].append(inst)
    for category, group in by_category.items():
        # model_inference.py names the answers <model>_<category>_constraint.jsonl; its scripts call the
        # situation category "scenario".
        file_category = "scenario" if category == "situation" else category
        _jsonl(
            api_out / f"m1_{file_category}_constraint.jsonl",
            ((i.messages[0].content, answers[i.instance_id]) for i in group),
        )
        replies = []
        for inst in group:
            if not bench.plan(inst, answers[inst.instance_id], "paper").judge_tasks:
                continue
            if skipped is None:
                skipped = inst.instance_id  # no judge reply stored for this one
                continue
            values = _fb_values(inst)
            judged[inst.instance_id] = values
            path = tuple(inst.meta["evolution_path"])
            prompt = judge_prompt(category, path, answers[inst.instance_id], "en")
            if category == "content" and inst.level == 2:
                assert prompt == _followbench_level2_content_prompt(path, answers[inst.instance_id])
            listed = ", ".join("'YES'" if v else "'NO'" for v in values)
            replies.append((prompt, f"1) The constraints are ...\n2) Checked.\n[{listed}]"))
        # llm_eval.py lays judge replies out as <out>/<model>/<category>_constraint.jsonl.
        _jsonl(judge_out / "m1" / f"{category}_constraint.jsonl", replies)
    assert skipped is not None and len(judged) >= 5

    run_dir = tmp_path / "run"
    code, out, err = run_cli(
        capsys,
        "import",
        "followbench",
        str(api_out),
        str(judge_out),
        "--out",
        str(run_dir),
        "--data",
        str(data),
        "--scoring",
        "reference",
    )
    assert code == 0, err
    assert f"imported {len(insts)} answers of 1 models" in out and "1 errors" in out
    got = verdicts(run_dir)
    assert set(got) == {("m1", i.instance_id) for i in insts}
    rule_scored = 0
    for inst in insts:
        verdict = got[("m1", inst.instance_id)]
        if inst.instance_id == skipped:
            assert verdict["status"] == "error"
        elif inst.instance_id in judged:
            assert row_values(verdict) == judged[inst.instance_id], inst.instance_id
            assert {r["source"] for r in verdict["rows"]} == {"judge"}
        else:
            rule_scored += 1
            assert {r["source"] for r in verdict["rows"]} == {"rule"}
            assert len(set(row_values(verdict))) == 1  # a rule decides the instance as a whole
    assert rule_scored > 0
    heads = headline(report_rows(capsys, run_dir), "followbench")
    assert ("m1", "HSR") in heads


def test_followbench_import_needs_data_and_named_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "answers.jsonl"
    _jsonl(path, [("x", "y")])
    code, _, err = run_cli(capsys, "import", "followbench", str(path), "--out", str(tmp_path / "r"))
    assert code == 2 and "needs the data" in err
    data = benchmarks.get("followbench").fixture_dir()
    code, _, err = run_cli(
        capsys, "import", "followbench", str(path), "--out", str(tmp_path / "r"), "--data", str(data)
    )
    assert code == 2 and "answers.jsonl" in err and "<model>_<category>_constraint.jsonl" in err
    bad = tmp_path / "m_content_constraint.jsonl"
    bad.write_text('{"prompt_new": "x", "choices": []}\n', encoding="utf-8")
    code, _, err = run_cli(
        capsys, "import", "followbench", str(bad), "--out", str(tmp_path / "r"), "--data", str(data)
    )
    assert code == 2 and "record 1" in err and "'choices'" in err


# ------------------------------------------------------------------------------------------------ EIFBench


def test_eifbench_evaluation_jsonl_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = benchmarks.get("eifbench")
    data = bench.fixture_dir()
    insts = list(bench.load(data, {"scenario": "party"}))
    expected: dict[str, tuple[bool, ...]] = {}
    lines = []
    for inst in insts:
        subs = {s["idx"]: s for s in inst.meta["sub_instructions"]}
        values = tuple((c.idx * 7 + len(inst.instance_id)) % 3 != 0 for c in inst.constraints)
        expected[inst.instance_id] = values
        for c, v in zip(inst.constraints, values, strict=True):
            sub = subs[c.instruction_idx]
            line = {
                "main_id": inst.meta["main_id"],
                "point_id": c.idx,
                "rule": "And",
                "input": inst.meta["input"],
                "sub_instruction_id": sub["key"],
                "sub_instruction": sub["instruction"],
                "question": c.text,
                "output": f"回答 {inst.instance_id}",
                "point_judge": v,
                "point_explanation": "分析：逐条核对。\n答案：" + ("是" if v else "否"),
            }
            if c.idx == 0:
                # A resumed reference run appends: the last line of a question wins.
                lines.append(
                    json.dumps(
                        {**line, "point_explanation": "分析：旧的。\n答案：" + ("否" if v else "是")},
                        ensure_ascii=False,
                    )
                )
            lines.append(json.dumps(line, ensure_ascii=False))
    path = tmp_path / "evaluate_qwen-7b_party.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    run_dir = tmp_path / "run"
    code, out, err = run_cli(
        capsys, "import", "eifbench", str(path), "--out", str(run_dir), "--data", str(data)
    )
    assert code == 0, err
    assert f"imported {len(insts)} answers of 1 models" in out and "0 errors" in out
    got = verdicts(run_dir)
    assert {k: row_values(v) for k, v in got.items()} == {("qwen-7b", i): v for i, v in expected.items()}
    assert {r["instruction_idx"] for v in got.values() for r in v["rows"]} >= {0, 1}
    heads = headline(report_rows(capsys, run_dir), "eifbench")
    assert ("qwen-7b", "GAcc") in heads


def test_eifbench_import_without_data_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "evaluate_m_party.jsonl"
    path.write_text("", encoding="utf-8")
    code, _, err = run_cli(capsys, "import", "eifbench", str(path), "--out", str(tmp_path / "r"))
    assert code == 2 and "needs the data directory" in err


def test_import_rejects_unknown_benchmark_and_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "x.json"
    path.write_text("[]", encoding="utf-8")
    code, _, err = run_cli(capsys, "import", "nobench", str(path), "--out", str(tmp_path / "r"))
    assert code == 2 and "unknown benchmark 'nobench'" in err
    code, _, err = run_cli(
        capsys, "import", "cfbench", str(path), "--out", str(tmp_path / "r"), "--option", "lang=x"
    )
    assert code == 2 and "no option 'lang'" in err
