"""`ifsweep import` of files written in each reference's own output format, from the real benchmark data:
instances with one prompt keep a verdict each (CFBench 988 / 989), FollowBench's vLLM answer files
(`prompt`), Chinese FollowBench as its own benchmark, and EIFBench's points without a reply (8_metric.py
skips the point, not the task)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from statistics import fmean
from typing import Any

import pytest

from ifsweep import benchmarks
from ifsweep.benchmarks import Instance
from ifsweep.benchmarks.followbench import judge_prompt
from ifsweep.runner.commands.cli import main
from ifsweep.runner.store.shards import RunStore


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def import_files(
    capsys: pytest.CaptureFixture[str],
    name: str,
    files: list[Path],
    out: Path,
    data: Path,
    scoring: str,
    *options: str,
) -> str:
    """`ifsweep import` must succeed; its summary line."""
    opts = [arg for option in options for arg in ("--option", option)]
    args = [*map(str, files), "--out", str(out), "--data", str(data), "--scoring", scoring, *opts]
    code, text, err = run_cli(capsys, "import", name, *args)
    assert code == 0, err
    return text


def verdicts(run_dir: Path) -> list[dict[str, Any]]:
    with RunStore.open(run_dir, writer_id="reader") as store:
        return list(store.iter_records({"verdict"}))


def report(capsys: pytest.CaptureFixture[str], run_dir: Path) -> dict[tuple[str, str, str, str], float]:
    code, out, err = run_cli(capsys, "report", str(run_dir), "--format", "json")
    assert code == 0, err
    return {(r["benchmark"], r["model"], r["metric"], r["slice"]): r["value"] for r in json.loads(out)}


# ------------------------------------------------------------------------------------------------- CFBench


def _strict_reply(criteria: list[list[str]], values: Iterable[bool]) -> str:
    """A judge reply in the form the template asks for (`criterion<TAB>score` joined by blank lines)."""
    return "\n\n".join(f"{c[0]}\t{int(v)}" for c, v in zip(criteria, values, strict=True))


def test_cfbench_instances_with_one_prompt_import_a_verdict_each(
    tmp_path: Path, shared_benchmarks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Records 988 and 989 of the real data share their prompt and differ in their checklists; the
    reference scored each on its own response and judge reply."""
    data = shared_benchmarks / "CFBench"
    records = json.loads((data / "data" / "cfbench_data.json").read_text(encoding="utf-8"))
    pair = [r for r in records if r["idx"] in (988, 989)]
    assert pair[0]["prompt"] == pair[1]["prompt"] and pair[0]["criteria"] != pair[1]["criteria"]
    values = {988: [True] * len(pair[0]["criteria"]), 989: [False] * len(pair[1]["criteria"])}
    stored = [
        {
            **r,
            "response": f"回答{r['idx']}",  # two calls of the reference, two answers
            "infer_model": "m",
            "judge_response": _strict_reply(r["criteria"], values[r["idx"]]),
        }
        for r in pair
    ]
    path = tmp_path / "m_eval.json"
    path.write_text(json.dumps(stored, ensure_ascii=False), encoding="utf-8")
    out = tmp_path / "run"
    text = import_files(capsys, "cfbench", [path], out, data, "paper")
    assert "2 scored, 0 errors" in text
    got = {v["instance_id"]: v for v in verdicts(out)}
    assert sorted(got) == ["988", "989"]
    for idx in (988, 989):
        rows = sorted(got[str(idx)]["rows"], key=lambda r: r["constraint_idx"])
        assert [r["satisfied"] for r in rows] == values[idx]
    heads = report(capsys, out)
    assert heads[("cfbench", "m", "ISR", "all")] == 0.5  # one instance passes, one fails


# --------------------------------------------------------------------------------------------- FollowBench


def _lines(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def _choices(text: str) -> list[dict[str, dict[str, str]]]:
    return [{"message": {"content": text}}]


def _judged_values(inst: Instance) -> tuple[bool, ...]:
    return tuple((int(inst.meta["example_id"]) + i) % 3 != 0 for i in range(inst.level or 0))


def _write_followbench_outputs(root: Path, model: str, insts: list[Instance], prompt_key: str) -> None:
    """Answers as code/model_inference_vllm.py lays them out (`<model>/<category>_constraint.jsonl`,
    each line `{prompt_key: instruction, "choices": ...}`), judge replies as llm_eval.py does."""
    bench = benchmarks.get("followbench")
    by_category: dict[str, list[Instance]] = {}
    for inst in insts:
        by_category.setdefault(inst.category or "", []).append(inst)
    for category, group in by_category.items():
        answers = [
            {prompt_key: i.messages[0].content, "choices": _choices(f"answer {i.instance_id}")} for i in group
        ]
        _lines(root / "api_output_vllm" / model / f"{category}_constraint.jsonl", answers)
        replies = []
        for inst in group:
            answer = f"answer {inst.instance_id}"
            if not bench.plan(inst, answer, "reference").judge_tasks:
                continue
            listed = ", ".join("'YES'" if v else "'NO'" for v in _judged_values(inst))
            prompt = judge_prompt(category, tuple(inst.meta["evolution_path"]), answer, inst.meta["language"])
            replies.append({"prompt_new": prompt, "choices": _choices(f"Checked.\n[{listed}]")})
        _lines(root / "gpt4_discriminative_eval_output" / model / f"{category}_constraint.jsonl", replies)


def _fb_folders(root: Path) -> list[Path]:
    return [root / "api_output_vllm", root / "gpt4_discriminative_eval_output"]


def test_followbench_imports_vllm_answer_files_that_name_the_prompt_prompt(
    tmp_path: Path, shared_benchmarks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """code/model_inference_vllm.py writes `prompt` and code/utils.py matches answers on it."""
    data = shared_benchmarks / "FollowBench"
    options = {"categories": ["content", "format"]}
    insts = list(benchmarks.get("followbench").load(data, options))
    _write_followbench_outputs(tmp_path, "llama", insts, "prompt")
    out = tmp_path / "run"
    text = import_files(
        capsys, "followbench", _fb_folders(tmp_path), out, data, "reference", "categories=content,format"
    )
    assert f"imported {len(insts)} answers of 1 models" in text and "0 errors" in text
    got = {v["instance_id"]: v for v in verdicts(out)}
    assert len(got) == len(insts) == 275
    judged = [i for i in insts if {r["source"] for r in got[i.instance_id]["rows"]} == {"judge"}]
    # content's WIKIEVENTS and CONLL2003 groups and format examples 22 and 30 are checked by rule
    assert len(judged) == 205
    for inst in judged:
        rows = sorted(got[inst.instance_id]["rows"], key=lambda r: r["constraint_idx"])
        assert tuple(r["satisfied"] for r in rows) == _judged_values(inst), inst.instance_id


def test_chinese_followbench_imports_as_its_own_benchmark(
    tmp_path: Path, shared_benchmarks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = shared_benchmarks / "FollowBench"
    options = {"language": "zh", "categories": ["format"]}
    insts = list(benchmarks.get("followbench").load(data, options))
    _write_followbench_outputs(tmp_path, "qwen", insts, "prompt_new")
    out = tmp_path / "run"
    text = import_files(
        capsys,
        "followbench",
        _fb_folders(tmp_path),
        out,
        data,
        "reference",
        "language=zh",
        "categories=format",
    )
    assert "150 scored, 0 errors" in text
    got = verdicts(out)
    assert {v["benchmark"] for v in got} == {"followbench-zh"}
    # Example 30 is judged at the pinned commit: its five instances carry the judge's values.
    ex30 = {v["instance_id"]: v for v in got if v["instance_id"].startswith("format:30:")}
    assert len(ex30) == 5 and all({r["source"] for r in v["rows"]} == {"judge"} for v in ex30.values())
    heads = report(capsys, out)
    assert ("followbench-zh", "qwen", "HSR", "all") in heads
    assert not [k for k in heads if k[0] == "followbench"]


# ------------------------------------------------------------------------------------------------ EIFBench


def _eif_line(inst: Instance, idx: int, explanation: str | None, judge: bool) -> dict[str, Any]:
    c = inst.constraints[idx]
    sub = next(s for s in inst.meta["sub_instructions"] if s["idx"] == c.instruction_idx)
    return {
        "main_id": inst.meta["main_id"],
        "point_id": idx + 1,
        "rule": False,
        "input": inst.meta["input"],
        "sub_instruction_id": sub["key"],
        "sub_instruction": sub["instruction"],
        "question": c.text,
        "output": f"回答{inst.meta['main_id']}",
        "point_judge": judge,
        "point_explanation": explanation,
    }


def _verdict_text(v: bool) -> str:
    return "分析：逐条核对。\n答案：" + ("是" if v else "否")


def _eif_metrics(points: dict[str, dict[int, bool]], insts: dict[str, Instance]) -> dict[str, float]:
    """8_metric.py's three numbers over the points it keeps (a task with none is left out)."""
    tasks = [(insts[i], p) for i, p in points.items() if p]
    g, il, cl = [], [], []
    for inst, kept in tasks:
        subs: dict[int | None, list[bool]] = {}
        for idx, v in kept.items():
            subs.setdefault(inst.constraints[idx].instruction_idx, []).append(v)
        g.append(float(all(kept.values())))
        il.append(fmean(float(all(vs)) for vs in subs.values()))
        cl.append(fmean(float(v) for v in kept.values()))
    return {"GAcc": fmean(g), "ILAcc": fmean(il), "CLAcc": fmean(cl)}


def test_eifbench_points_without_a_reply_are_skipped_in_reference_mode(
    tmp_path: Path, shared_benchmarks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = shared_benchmarks / "EIFBench"
    insts = list(benchmarks.get("eifbench").load(data, {}))[:3]
    by_id = {i.instance_id: i for i in insts}
    first, second, third = insts
    value = {
        i.instance_id: {c.idx: (c.idx + i.meta["main_id"]) % 4 != 0 for c in i.constraints} for i in insts
    }
    lines = []
    for inst in insts:
        for c in inst.constraints:
            v = value[inst.instance_id][c.idx]
            lines.append(_eif_line(inst, c.idx, _verdict_text(v), v))
    # Task 1: an "Err" point, a "None" point, a point with no line, and a null reply with its judge.
    gone = {0: "Err", 1: "None"}
    lines = [
        {**ln, "point_explanation": gone[ln["point_id"] - 1]}
        if ln["main_id"] == first.meta["main_id"] and ln["point_id"] - 1 in gone
        else ln
        for ln in lines
        if not (ln["main_id"] == first.meta["main_id"] and ln["point_id"] == 3)
    ]
    null_idx = 3
    for ln in lines:
        if ln["main_id"] == first.meta["main_id"] and ln["point_id"] == null_idx + 1:
            ln["point_explanation"] = None
    # Task 2: every point "Err": 8_metric.py drops the task.
    lines = [
        {**ln, "point_explanation": "Err"} if ln["main_id"] == second.meta["main_id"] else ln for ln in lines
    ]
    path = tmp_path / "evaluate_qwen_party.jsonl"
    _lines(path, lines)

    out = tmp_path / "ref"
    text = import_files(capsys, "eifbench", [path], out, data, "reference")
    assert "imported 2 answers of 1 models" in text and "2 scored, 0 errors" in text
    kept = {
        first.instance_id: {k: v for k, v in value[first.instance_id].items() if k not in (0, 1, 2)},
        third.instance_id: value[third.instance_id],
    }
    got = {v["instance_id"]: v for v in verdicts(out)}
    assert sorted(got) == sorted(kept)
    for instance_id, points in kept.items():
        rows = {r["constraint_idx"]: r["satisfied"] for r in got[instance_id]["rows"]}
        assert rows == points and got[instance_id]["skipped"] == len(by_id[instance_id].constraints) - len(
            points
        )
    heads = report(capsys, out)
    for metric, expected in _eif_metrics(kept, by_id).items():
        assert heads[("eifbench", "qwen", metric, "all")] == pytest.approx(expected), metric
    assert heads[("eifbench", "qwen", "coverage", "all")] == 1.0

    # Paper mode: a task with a point it cannot read is not scored at all, and coverage says so.
    paper = tmp_path / "paper"
    text = import_files(capsys, "eifbench", [path], paper, data, "paper")
    assert "imported 3 answers of 1 models" in text and "1 scored, 2 errors" in text
    got = {v["instance_id"]: v for v in verdicts(paper)}
    missing = {r["constraint_idx"] for r in got[first.instance_id]["rows"] if r["status"] == "error"}
    assert missing == {0, 1, 2, null_idx}
    assert {r["status"] for r in got[second.instance_id]["rows"]} == {"error"}
    heads = report(capsys, paper)
    assert heads[("eifbench", "qwen", "coverage", "all")] == pytest.approx(1 / 3)
    assert heads[("eifbench", "qwen", "CLAcc", "all")] == pytest.approx(
        fmean(float(v) for v in value[third.instance_id].values())
    )
