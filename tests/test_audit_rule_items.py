"""`audit_rule_items = true` on a FollowBench table (issue 33, item 1): the rule-decided instances are
also judged, as audit rows beside the rule's, which no metric reads (the leaderboard is the same as
without the option), and `ifsweep audit RUN_DIR` without a gold file audits each judge against the
rules: per constraint where each check is one constraint's, and the whole-answer rules apart as a bound.
Over real HTTP to the simulator, with a judge whose false-yes rate is known."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import ifsweep
from ifsweep import benchmarks
from ifsweep.runner.commands.cli import main
from ifsweep.runner.store.compact import load_verdict_rows
from ifsweep.simulator import SimConfig, SimulatorThread

PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
JUDGES = (("plain", "sim-judge"), ("lenient", "sim-judge-fyes0.3"))


def data_with_a_cumulative_source(root: Path) -> Path:
    """The FollowBench sample with its text_editing group relabelled gigaword: a rule of five checks,
    one per level, so its instances get per-constraint rule gold."""
    out = root / "data"
    shutil.copytree(benchmarks.get("followbench").fixture_dir() / "data", out)
    path = out / "mixed_constraints.json"
    rows = json.loads(path.read_text(encoding="utf-8"))
    for r in rows:
        if r["source"] == "text_editing":
            r["source"] = "gigaword"
    path.write_text(json.dumps(rows), encoding="utf-8")
    return out


def sweep(out: Path, base: str, data: Path, audit: bool) -> dict[str, Any]:
    table: dict[str, Any] = {"name": "followbench", "data": str(data)}
    if audit:
        table["audit_rule_items"] = True
    return {
        "run": {"output_dir": str(out), "progress": "off", "concurrency": 8},
        "benchmarks": [table],
        "models": [
            {
                "id": m,
                "model": f"openai/sim-{m}",
                "api_base": base,
                "price": PRICE,
                "params": {"max_tokens": 64},
            }
            for m in ("a", "b")
        ],
        "judges": [
            {"id": j, "model": f"openai/{name}", "api_base": base, "price": PRICE} for j, name in JUDGES
        ],
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path]]:
    root = tmp_path_factory.mktemp("rule-items")
    data = data_with_a_cumulative_source(root)
    with SimulatorThread(SimConfig(seed=9)) as sim:
        plain, audited = root / "plain", root / "audited"
        assert ifsweep.run(sweep(plain, sim.base_url, data, audit=False)).status == "complete"
        assert ifsweep.run(sweep(audited, sim.base_url, data, audit=True)).status == "complete"
    yield plain, audited, data


def report(run: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    assert main(["report", str(run), "--format", "json", "--judge", "all"]) == 0
    found = json.loads(capsys.readouterr().out)
    rows = found["metrics"] if isinstance(found, dict) else found
    return [{k: r[k] for k in ("benchmark", "model", "judge", "metric", "slice", "value", "n")} for r in rows]


def test_the_leaderboard_is_unchanged(
    runs: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    plain, audited, _ = runs
    before, after = report(plain, capsys), report(audited, capsys)
    assert before and before == after


def test_rule_decided_instances_get_audit_rows_beside_the_rules(runs: tuple[Path, Path, Path]) -> None:
    plain, audited, _ = runs
    assert load_verdict_rows(plain, audit=True).filter(pl.col("source") == "audit").height == 0
    rows = load_verdict_rows(audited, audit=True)
    audit = rows.filter(pl.col("source") == "audit")
    rule = rows.filter(pl.col("source") == "rule")
    key = ["model", "judge", "instance_id", "constraint_idx"]
    # every rule row of the sample's rule-decided instances (E2E, gsm_8k, gigaword) has its audit twin,
    # and the template-checked example category gets none (no judge prompt exists for it)
    ruled = rule.filter(pl.col("category") != "example")
    assert ruled.height > 0
    assert audit.select(key).sort(key).equals(ruled.select(key).sort(key))
    assert audit.get_column("status").eq("ok").all()
    assert load_verdict_rows(audited).filter(pl.col("source") == "audit").height == 0  # no reader sees them


def test_audit_against_the_rules(runs: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, audited, data = runs
    assert main(["audit", str(audited), "--format", "json", "--data", str(data), "--resamples", "200"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["gold"]["source"].startswith("rule checks")
    # the gigaword group: levels 1..5, 15 constraints per model
    assert found["gold"]["instances"] == 10 and found["gold"]["units"] == 30
    stats = {
        (s["judge"], s["statistic"]): s
        for s in found["audit"]
        if s["constraint_type"] == "all" and s["model"] is None
    }
    lenient, plain = stats[("lenient", "false_no")], stats[("plain", "false_no")]
    assert lenient["units"] == plain["units"] > 0
    # the lenient judge says YES where the plain judge does: it can only be more often wrong on a NO
    assert stats[("lenient", "false_yes")]["value"] >= stats[("plain", "false_yes")]["value"]
    assert lenient["value"] <= plain["value"]
    whole = {w["judge"]: w for w in found["whole_answer"]}
    assert set(whole) == {"plain", "lenient", "majority"}
    assert whole["plain"]["instances"] == 20  # E2E and gsm_8k, five levels each, two models
    assert whole["plain"]["rule_fail"] + whole["plain"]["rule_pass"] == 20
    assert main(["audit", str(audited), "--data", str(data), "--resamples", "0"]) == 0
    assert "whole-answer rules (a bound" in capsys.readouterr().out


def test_without_gold_or_audit_rows_the_audit_says_what_to_do(
    runs: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    plain, _, _ = runs
    assert main(["audit", str(plain)]) == 2
    assert "pass --gold FILE" in capsys.readouterr().err
