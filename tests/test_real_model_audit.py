"""The real-model tier audited (issue 33, item 8): SmolLM2-135M answers FollowBench's sample and, with
`audit_rule_items = true`, judges its rule-decided instances too; `ifsweep audit` then reports its
false-yes and false-no rates against the rules. What is checked holds whatever the model says: every
rule-decided instance got its audit verdicts, the rule gold covers every constraint of the cumulative
group, the rates are the confusion matrix of the stored verdicts, and the leaderboard has no audit row.
The figures are printed (docs/metrics.md records them): a model this small judges near chance."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from llamaserver import LlamaServer
from test_audit_rule_items import data_with_a_cumulative_source

from ifsweep.runner.commands.cli import main
from ifsweep.runner.store.compact import load_verdict_rows

pytestmark = pytest.mark.real_model

SERVED = "openai/smollm2-135m-instruct"


def _config(out: Path, api_base: str, data: Path) -> str:
    endpoint = (
        f'model = "{SERVED}"\napi_base = "{api_base}"\nparams = {{ temperature = 0, max_tokens = 64 }}\n'
    )
    return "\n".join(
        [
            "[run]", f'output_dir = "{out}"', 'progress = "off"', "concurrency = 4", "reask = 1", "",
            "[[benchmarks]]", 'name = "followbench"', f'data = "{data}"', 'categories = ["content", "mixed"]',
            "audit_rule_items = true", "",
            "[[models]]", 'id = "smollm2"', endpoint, "[judge]", 'id = "smollm2-judge"', endpoint,
        ]
    )  # fmt: skip


@pytest.fixture(scope="module")
def run_dir(
    llama_server: LlamaServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Path]]:
    tmp = tmp_path_factory.mktemp("real-audit")
    data = data_with_a_cumulative_source(tmp)
    cfg = tmp / "sweep.toml"
    cfg.write_text(_config(tmp / "run", llama_server.api_base, data))
    assert main(["run", str(cfg)]) in (0, 1)
    yield tmp / "run", data


def test_a_real_judge_audited_against_the_rules(
    run_dir: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run, data = run_dir
    capsys.readouterr()
    rows = load_verdict_rows(run, audit=True)
    rule = rows.filter((pl.col("source") == "rule") & (pl.col("category") != "example"))
    audit = rows.filter(pl.col("source") == "audit")
    key = ["instance_id", "constraint_idx"]
    assert audit.select(key).sort(key).equals(rule.select(key).sort(key))
    assert main(["audit", str(run), "--data", str(data), "--format", "json", "--resamples", "500"]) == 0
    found: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert found["gold"]["instances"] == 5 and found["gold"]["units"] == 15  # gigaword, levels 1..5
    ok = audit.filter(pl.col("status") == "ok")
    stats = {
        s["statistic"]: s for s in found["audit"] if s["constraint_type"] == "all" and s["model"] is None
    }
    assert main(["audit", str(run), "--data", str(data), "--resamples", "500"]) == 0
    text = capsys.readouterr().out
    with capsys.disabled():
        print(f"\naudit verdicts by category and status: {audit.group_by('category', 'status').len().rows()}")
        print(text)
    parsed = ok.filter(pl.col("category") == "mixed").height  # the judge's verdicts that parsed
    if parsed:
        assert stats["accuracy"]["units"] == parsed
    else:
        assert not stats  # no verdict parsed: nothing to measure, and nothing made up
    for s in stats.values():
        assert s["value"] is None or -1.0 <= s["value"] <= 1.0
    # E2E, levels 1..5: the instances whose audit verdicts all parsed are compared with the rule
    content = audit.filter(pl.col("category") == "content")
    judged = content.group_by("instance_id").agg((pl.col("status") == "ok").all()).get_column("status").sum()
    if judged:
        (whole,) = found["whole_answer"]
        assert whole["instances"] == judged and whole["rule_fail"] + whole["rule_pass"] == judged
    else:
        assert found["whole_answer"] == []
