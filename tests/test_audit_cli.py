"""`ifsweep audit RUN_DIR --gold FILE` against a simulator run (issue 33, items 2, 4 and 7): the plain
simulated judge's verdicts, written as a user's gold file, audit judges whose flaws are known; gold
files in each format are checked row by row, with errors naming file, line and field; partial
instances are left out and counted; a label given on another answer is refused; annotators give a
majority and their kappa."""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from sweeps import panel_sweep

import ifsweep
from ifsweep import benchmarks
from ifsweep.runner.commands.agreement import run_agreement
from ifsweep.runner.commands.cli import main
from ifsweep.runner.store.compact import load_call_records, load_verdict_rows
from ifsweep.simulator import SimConfig, SimulatorThread

JUDGES = (("plain", "sim-judge"), ("lenient", "sim-judge-fyes0.1"), ("flips", "sim-judge-flip0.1"))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("audit") / "run"
    with SimulatorThread(SimConfig(seed=5)) as sim:
        assert ifsweep.run(panel_sweep(out, sim.base_url, JUDGES, limit=12)).status == "complete"
    yield out


def gold_rows(run: Path) -> list[dict[str, Any]]:
    """The plain judge's verdicts as gold, each with the sha256 of the answer it was given on."""
    calls = load_call_records(run).filter(pl.col("kind") == "generation")
    sha = {
        (b, m, i): hashlib.sha256((t or "").encode()).hexdigest()
        for b, m, i, t in calls.select("benchmark", "model", "instance_id", "text").iter_rows()
    }
    plain = load_verdict_rows(run).filter((pl.col("judge") == "plain") & (pl.col("source") == "judge"))
    assert plain.get_column("status").eq("ok").all()
    return [
        {
            "benchmark": r["benchmark"],
            "model": r["model"],
            "instance_id": r["instance_id"],
            "constraint_idx": r["constraint_idx"],
            "gold": r["satisfied"],
            "response_sha256": sha[(r["benchmark"], r["model"], r["instance_id"])],
        }
        for r in plain.sort("benchmark", "model", "instance_id", "constraint_idx").iter_rows(named=True)
    ]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def audit_json(run: Path, gold: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    assert main(["audit", str(run), "--gold", str(gold), "--format", "json", *extra]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def pick(
    rows: list[dict[str, Any]], judge: str, statistic: str, bench: str, model: str | None = None
) -> dict[str, Any]:
    (r,) = [
        x
        for x in rows
        if x["judge"] == judge
        and x["statistic"] == statistic
        and x["benchmark"] == bench
        and x["constraint_type"] == "all"
        and x["model"] == model
    ]
    return r


def test_audit_measures_the_known_flaws(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gold = write_jsonl(tmp_path / "gold.jsonl", gold_rows(run))
    found = audit_json(run, gold, capsys)
    rows = found["audit"]
    assert found["judges"] == ["plain", "lenient", "flips", "majority"]
    assert list(rows[0]) == [
        *("benchmark", "judge", "constraint_type", "model", "statistic"),
        *("value", "ci_low", "ci_high", "units", "instances"),
    ]
    for bench in ("cfbench", "infobench"):
        assert pick(rows, "plain", "accuracy", bench)["value"] == 1.0
        assert pick(rows, "plain", "false_yes", bench)["value"] == 0.0
        # the lenient judge never says NO to a true YES; its false-yes is 0.1 within its interval
        assert pick(rows, "lenient", "false_no", bench)["value"] == 0.0
        fy = pick(rows, "lenient", "false_yes", bench)
        assert fy["ci_low"] <= 0.1 <= fy["ci_high"], fy
        assert fy["value"] > 0
        flips = pick(rows, "flips", "false_yes", bench)
        assert flips["ci_low"] <= 0.1 <= flips["ci_high"], flips
        assert pick(rows, "flips", "accuracy", bench, "a")["units"] > 0  # per model: gold covers three
    # kappa against gold is agreement's kappa between the plain judge and the other, on the same units
    panel = run_agreement(run, judges=["plain", "flips"], resamples=0)
    for bench in ("cfbench", "infobench"):
        assert pick(rows, "flips", "kappa_gold", bench)["value"] == pytest.approx(
            panel.kappa(bench, "plain", "flips"), abs=1e-12
        )
    assert found["gold"]["partial_instances_left_out"] == 0


def test_audit_text_and_markdown(run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gold = write_jsonl(tmp_path / "gold.jsonl", gold_rows(run))
    assert main(["audit", str(run), "--gold", str(gold), "--resamples", "50"]) == 0
    text = capsys.readouterr().out
    assert "false-yes" in text and "lenient" in text and "all models" in text
    assert main(["audit", str(run), "--gold", str(gold), "--format", "markdown", "--resamples", "50"]) == 0
    md = capsys.readouterr().out
    assert "| benchmark | judge | constraint type |" in md


def test_partial_instances_are_left_out_and_counted(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = gold_rows(run)
    first = (rows[0]["benchmark"], rows[0]["model"], rows[0]["instance_id"])
    dropped = [
        r for r in rows if (r["benchmark"], r["model"], r["instance_id"]) != first or r["constraint_idx"] != 0
    ]
    found = audit_json(run, write_jsonl(tmp_path / "g.jsonl", dropped), capsys, "--resamples", "0")
    full = audit_json(run, write_jsonl(tmp_path / "all.jsonl", rows), capsys, "--resamples", "0")
    assert found["gold"]["partial_instances_left_out"] == 1
    assert found["gold"]["instances"] == full["gold"]["instances"] - 1
    bench = first[0]
    assert (
        pick(found["audit"], "plain", "accuracy", bench)["instances"]
        == pick(full["audit"], "plain", "accuracy", bench)["instances"] - 1
    )


def test_a_label_on_another_answer_is_refused(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = gold_rows(run)
    rows[3]["response_sha256"] = "0" * 64
    code = main(["audit", str(run), "--gold", str(write_jsonl(tmp_path / "g.jsonl", rows))])
    err = capsys.readouterr().err
    assert code == 2
    assert "g.jsonl: line 4: field 'response_sha256'" in err and rows[3]["instance_id"] in err


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"gold": "maybe"}, "line 3: field 'gold': expected true or false"),
        ({"constraint_idx": -1}, "line 3: field 'constraint_idx': expected a whole number"),
        ({"constraint_idx": 99}, "line 3: field 'constraint_idx': instance"),
        ({"instance_id": "nope"}, "line 3: the run has no instance 'nope'"),
        ({"sample": "convenience"}, "line 3: field 'sample': expected random or stratified"),
        ({"inclusion_prob": 1.5}, "line 3: field 'inclusion_prob': expected a probability"),
        ({"response_sha256": "xyz"}, "line 3: field 'response_sha256': expected 64 hexadecimal digits"),
        ({"benchmark": None}, "line 3: field 'benchmark': missing"),
        ({"instruction_idx": 3}, "line 3: field 'instruction_idx': constraint"),
    ],
)
def test_bad_jsonl_rows_are_named(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any], expected: str
) -> None:
    rows = gold_rows(run)[:5]
    rows[2] = rows[2] | change
    assert main(["audit", str(run), "--gold", str(write_jsonl(tmp_path / "bad.jsonl", rows))]) == 2
    err = capsys.readouterr().err
    assert f"bad.jsonl: {expected}" in err, err


def test_csv_and_parquet_read_alike_and_name_their_lines(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = gold_rows(run)
    as_json = audit_json(run, write_jsonl(tmp_path / "g.jsonl", rows), capsys, "--resamples", "20")
    path = tmp_path / "g.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=[*rows[0], "answer"])
        w.writeheader()
        for r in rows:  # an answer over two lines: line numbers count where a row starts
            w.writerow(r | {"gold": "true" if r["gold"] else "false", "answer": "two\nlines"})
    assert audit_json(run, path, capsys, "--resamples", "20")["audit"] == as_json["audit"]
    pl.DataFrame(rows).write_parquet(tmp_path / "g.parquet")
    assert audit_json(run, tmp_path / "g.parquet", capsys, "--resamples", "20")["audit"] == as_json["audit"]
    text = path.read_text(encoding="utf-8").splitlines()
    text[5] = text[5].replace(",true,", ",perhaps,").replace(",false,", ",perhaps,")
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    assert main(["audit", str(run), "--gold", str(path)]) == 2
    # the header is line 1 and each row takes two lines: physical line 6 is the start of row 3
    assert "g.csv: line 6: field 'gold'" in capsys.readouterr().err
    bad = pl.DataFrame(rows).with_columns(pl.lit("x").alias("constraint_idx"))
    bad.write_parquet(tmp_path / "bad.parquet")
    assert main(["audit", str(run), "--gold", str(tmp_path / "bad.parquet")]) == 2
    assert "bad.parquet: row 1: field 'constraint_idx'" in capsys.readouterr().err


def test_annotators_give_a_majority_and_their_kappa(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [r for r in gold_rows(run) if r["benchmark"] == "cfbench"]
    three = []
    for n, r in enumerate(rows):
        three += [r | {"annotator": "x"}, r | {"annotator": "y"}]
        # the third annotator is wrong on every fourth unit: outvoted, but it lowers their kappa
        three.append(r | {"annotator": "z", "gold": (not r["gold"]) if n % 4 == 0 else r["gold"]})
    found = audit_json(run, write_jsonl(tmp_path / "a.jsonl", three), capsys, "--resamples", "0")
    assert (
        pick(found["audit"], "plain", "accuracy", "cfbench")["value"] == 1.0
    )  # the majority is the plain judge
    kappas = {
        tuple(s["judges"]): s["value"]
        for s in found["gold"]["annotator_agreement"]
        if s["statistic"] == "cohen_kappa" and s["constraint_type"] == "all"
    }
    assert kappas[("x", "y")] == 1.0 and kappas[("x", "z")] < 1.0
    tie = [r | {"annotator": "x"} for r in rows] + [rows[0] | {"annotator": "y", "gold": not rows[0]["gold"]}]
    tied = audit_json(run, write_jsonl(tmp_path / "t.jsonl", tie), capsys, "--resamples", "0")
    assert tied["gold"]["tied_units"] == 1 and tied["gold"]["partial_instances_left_out"] == 1
    again = [rows[0], rows[0]]
    assert main(["audit", str(run), "--gold", str(write_jsonl(tmp_path / "d.jsonl", again))]) == 2
    assert "d.jsonl: line 2: constraint" in capsys.readouterr().err


# ------------------------------------------------------------------------------- the labelling sheet


def sheet(
    run: Path, out: Path, capsys: pytest.CaptureFixture[str], n: int, seed: int
) -> list[dict[str, str]]:
    args = ["gold", "template", str(run), "--benchmark", "cfbench", "--model", "b"]
    assert main([*args, "--instances", str(n), "--seed", str(seed), "--out", str(out)]) == 0
    capsys.readouterr()
    with out.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_gold_template_samples_and_reads_back(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = sheet(run, tmp_path / "s.csv", capsys, 5, 3)
    ids = sorted({r["instance_id"] for r in rows})
    assert len(ids) == 5
    assert rows == sheet(run, tmp_path / "again.csv", capsys, 5, 3)  # seeded: the same sheet
    assert {r["instance_id"] for r in sheet(run, tmp_path / "other.csv", capsys, 5, 4)} != set(ids)
    data = {
        i.instance_id: i for i in benchmarks.get("cfbench").load(benchmarks.get("cfbench").fixture_dir(), {})
    }
    for iid in ids:
        mine = [r for r in rows if r["instance_id"] == iid]
        assert [r["constraint"] for r in mine] == [c.text for c in data[iid].constraints]  # every constraint
        assert all(r["gold"] == "" and r["answer"] for r in mine)
    plain = {(r["instance_id"], r["constraint_idx"]): r for r in gold_rows(run) if r["model"] == "b"}
    assert all(
        r["response_sha256"] == plain[(r["instance_id"], int(r["constraint_idx"]))]["response_sha256"]
        for r in rows
    )
    # labelled (all but one constraint) and read back by the audit: that instance is partial
    path = tmp_path / "filled.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for n, r in enumerate(rows):
            w.writerow(
                r
                | {
                    "gold": ""
                    if n == 0
                    else str(plain[(r["instance_id"], int(r["constraint_idx"]))]["gold"]).lower()
                }
            )
    found = audit_json(run, path, capsys, "--resamples", "0")
    assert found["gold"]["instances"] == 4 and found["gold"]["partial_instances_left_out"] == 1
    assert pick(found["audit"], "plain", "accuracy", "cfbench")["value"] == 1.0
    assert pick(found["audit"], "plain", "accuracy", "cfbench")["instances"] == 4
    # more than the run has: all of them, said on standard error
    args = ["gold", "template", str(run), "--benchmark", "cfbench", "--model", "b", "--instances", "500"]
    assert main([*args, "--out", str(tmp_path / "all.csv")]) == 0
    assert "only 12 instances" in capsys.readouterr().err
