"""One (benchmark, model, instance, judge, scoring) has exactly one current verdict (issue 21.3).

A re-import of a corrected file replaces what the earlier import wrote (before: the report pooled both,
CSR 72.1 where the corrected file alone gives 59.6); a second scoring mode into one directory is refused;
the metrics refuse rows holding two verdicts of one instance and name them. Through the CLI, on CFBench
eval files written here from the shipped fixture in the reference's output shape, and on the released
gpt4o_eval.json when ../shared/benchmarks is present.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from ifsweep import benchmarks, metrics
from ifsweep.benchmarks import Instance
from ifsweep.metrics import VerdictError
from ifsweep.metrics.schema import METRIC_COLUMNS
from ifsweep.runner.commands.cli import main
from ifsweep.runner.commands.rundir import metric_catalog
from ifsweep.runner.store.compact import load_verdict_rows

BENCH = benchmarks.get("cfbench")
CFBENCH_METRICS = metric_catalog()[0].get("cfbench")


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    got = capsys.readouterr()
    return code, got.out, got.err


def judge_reply(instance: Instance, response: str, passes: int) -> str:
    """The judge's reply to CFBench's prompt for `response`, passing criterion i when `passes` has bit i."""
    task = BENCH.plan(instance, response, "paper").judge_tasks[0]
    reply = BENCH.simulated_judge_reply(task.messages_for_turn(0, ()), lambda _, key: passes >> int(key) & 1)
    assert reply is not None
    return reply


def eval_file(path: Path, passes: Any) -> Path:
    """A `<model>_eval.json` as CFBench's evaluation writes it: the data records plus the answer and the
    judge's reply; `passes(instance)` says which criteria the judge passes."""
    data = json.loads((BENCH.fixture_dir() / "cfbench_data.json").read_text(encoding="utf-8"))
    instances = {i.instance_id: i for i in BENCH.load(BENCH.fixture_dir(), {})}
    records = []
    for record in data:
        inst = instances[str(record["idx"])]
        response = f"answer to {record['idx']}"
        reply = judge_reply(inst, response, passes(inst))
        records.append({**record, "response": response, "infer_model": "gpt4o", "judge_response": reply})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    return path


def headline(capsys: pytest.CaptureFixture[str], run_dir: Path) -> dict[tuple[str, str], float]:
    code, out, err = cli(capsys, "report", str(run_dir), "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    return {(r["model"], r["metric"]): r["value"] for r in rows if r["slice"] == "all"}


def one_verdict_each(run_dir: Path) -> int:
    rows = load_verdict_rows(run_dir)
    keys = rows.select("model", "judge", "scoring", "instance_id", "constraint_idx")
    assert keys.height == keys.unique().height, "two verdicts of one instance reach the report"
    return int(rows.get_column("instance_id").n_unique())


def test_a_corrected_reimport_replaces_the_earlier_verdicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    everything = eval_file(tmp_path / "first" / "gpt4o_eval.json", lambda inst: -1)
    # The corrected file: the judge passes a different subset of each instance's criteria.
    corrected = eval_file(
        tmp_path / "second" / "gpt4o_eval.json", lambda inst: zlib.crc32(inst.instance_id.encode()) & 0b0110
    )
    run_dir, alone = tmp_path / "imported", tmp_path / "alone"
    assert cli(capsys, "import", "cfbench", str(everything), "--out", str(run_dir))[0] == 0
    first = headline(capsys, run_dir)
    assert first[("gpt4o", "CSR")] == 1.0
    code, out, err = cli(capsys, "import", "cfbench", str(corrected), "--out", str(run_dir))
    assert code == 0, err
    n = one_verdict_each(run_dir)
    assert f"{n} scored, {n} of them replacing an earlier import's verdict" in out
    assert cli(capsys, "import", "cfbench", str(corrected), "--out", str(alone))[0] == 0
    assert headline(capsys, run_dir) == headline(capsys, alone) != first
    # The same file once more changes nothing and replaces nothing.
    code, out, _ = cli(capsys, "import", "cfbench", str(corrected), "--out", str(run_dir))
    assert code == 0 and "replacing" not in out
    assert headline(capsys, run_dir) == headline(capsys, alone)


def test_a_second_scoring_mode_into_one_directory_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = eval_file(tmp_path / "gpt4o_eval.json", lambda inst: 0b101)
    run_dir = tmp_path / "imported"
    assert cli(capsys, "import", "cfbench", str(path), "--out", str(run_dir), "--scoring", "paper")[0] == 0
    before = headline(capsys, run_dir)
    code, _, err = cli(
        capsys, "import", "cfbench", str(path), "--out", str(run_dir), "--scoring", "reference"
    )
    assert code == 2
    assert "holds cfbench verdicts scored in paper mode" in err and "--scoring paper" in err
    assert headline(capsys, run_dir) == before  # nothing was written
    one_verdict_each(run_dir)


def two_verdicts_of_one_instance() -> tuple[str, list[dict[str, Any]]]:
    """An instance's id and its verdict rows, each constraint scored twice: paper (all pass), then
    reference (all fail)."""
    inst = next(iter(BENCH.load(BENCH.fixture_dir(), {})))
    base = {"run": "r", "benchmark": "cfbench", "model": "m", "judge": "j", "instance_id": inst.instance_id}
    rows = []
    for scoring, satisfied in (("paper", True), ("reference", False)):
        for c in inst.constraints:
            rows.append(
                {
                    **base,
                    "scoring": scoring,
                    "group_id": inst.group_id,
                    "split": inst.split,
                    "constraint_idx": c.idx,
                    "constraint_type": c.type,
                    "priority": c.priority,
                    "satisfied": satisfied,
                    "source": "judge",
                    "status": "ok",
                }
            )
    return inst.instance_id, rows


def test_metrics_name_the_instances_with_two_verdicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    instance_id, rows = two_verdicts_of_one_instance()
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    code, _, err = cli(capsys, "metrics", str(path))
    assert code == 2
    assert "1 instances have two verdicts" in err
    assert f"model='m', judge='j', instance_id='{instance_id}' (scoring paper, reference)" in err
    # One of them alone is scored.
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows[: len(rows) // 2]) + "\n")
    assert cli(capsys, "metrics", str(path))[0] == 0


@pytest.mark.parametrize("offset", [0, 40])
def test_one_benchmarks_metrics_refuse_two_verdicts_too(offset: int) -> None:
    """benchmark_metrics skips the validation pass; the per-instance pass finds the duplicate anyway
    (before: the paper and reference verdicts were pooled, CSR 0.5), also with constraint indexes past
    the 32 bits the pass keeps one each (`offset`)."""
    instance_id, rows = two_verdicts_of_one_instance()
    frame = pl.DataFrame(rows).with_columns(pl.col("constraint_idx") + offset)
    frame = frame.with_columns(pl.lit(None).alias(c) for c in METRIC_COLUMNS if c not in frame.columns)
    assert CFBENCH_METRICS is not None
    with pytest.raises(VerdictError, match=f"instance_id='{instance_id}' \\(scoring paper, reference\\)"):
        metrics.benchmark_metrics(frame, CFBENCH_METRICS)
    assert metrics.benchmark_metrics(frame.head(len(rows) // 2), CFBENCH_METRICS).height


def test_the_released_eval_file_reimported_after_a_correction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], shared_benchmarks: Path
) -> None:
    """The issue's repro: gpt4o_eval.json, then a corrected copy into the same directory."""
    released = shared_benchmarks / "CFBench" / "output" / "judge" / "gpt4o_eval.json"
    records = json.loads(released.read_text(encoding="utf-8"))
    # The correction: every judge score of 1 on the first criterion of each reply becomes 0.
    for record in records:
        record["judge_response"] = record["judge_response"].replace("\t1", "\t0", 1)
    corrected = tmp_path / "fixed" / "gpt4o_eval.json"
    corrected.parent.mkdir()
    corrected.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    run_dir, alone = tmp_path / "imported", tmp_path / "alone"
    assert cli(capsys, "import", "cfbench", str(released), "--out", str(run_dir))[0] == 0
    first = headline(capsys, run_dir)
    assert cli(capsys, "import", "cfbench", str(corrected), "--out", str(run_dir))[0] == 0
    assert cli(capsys, "import", "cfbench", str(corrected), "--out", str(alone))[0] == 0
    assert headline(capsys, run_dir) == headline(capsys, alone) != first
    one_verdict_each(run_dir)


def verdicts(*rows: tuple[str, int, int]) -> pl.DataFrame:
    """Rows of one instance: (judge, instruction_idx, constraint_idx) each."""
    return pl.DataFrame(
        [
            {"benchmark": "b", "model": "m", "instance_id": "1", "scoring": "paper", "judge": j}
            | {"instruction_idx": part, "constraint_idx": c, "satisfied": True}
            for j, part, c in rows
        ]
    )


def test_two_verdicts_in_two_parts_of_an_instance_are_found() -> None:
    """A per-part pass (EIFBench's instructions) sums its parts' bits over the instance, so two verdicts
    of one constraint are found in a part's group (a constraint is known by its instruction_idx too:
    tests/test_constraint_identity.py); two judges' verdicts of one constraint are not two verdicts
    (the exact pass tells them apart)."""
    aggs = [pl.col("satisfied").all()]
    with pytest.raises(VerdictError, match="1 instances have two verdicts"):
        metrics.per_instance(
            verdicts(("j", 0, 0), ("j", 1, 0), ("j", 1, 0)), "b", aggs, within=["instruction_idx"]
        )
    two_judges = verdicts(("j", 0, 0), ("k", 0, 0), ("j", 0, 40), ("k", 0, 41))
    assert metrics.per_instance(two_judges, "b", aggs).collect().height == 1
