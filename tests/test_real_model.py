"""The real-model tier: llama.cpp's server running SmolLM2-135M as both model and judge.

Everything else in the suite talks to our own simulator, which answers the way we expect; here the
answers are a real (and weak) model's. The assertions are about what must hold whatever the model says:
every planned pair has a verdict record, every call went over the configured send path, judge replies are
the server's text, and a rerun of the same config sends the server nothing. Scores are not asserted.

Limits are small so the tier runs in a few minutes on 2 cores (SmolLM2 generates about 110 tokens/s and
reads prompts at about 230 tokens/s there); each benchmark's built-in fixture data keeps every prompt
within a slot's 4,096 tokens.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from llamaserver import LlamaServer, ServerCounters
from sweeps import stored_records

from ifsweep import benchmarks
from ifsweep.runner.commands.cli import main

pytestmark = pytest.mark.real_model

LIMITS = {"followbench": 3, "infobench": 2, "cfbench": 1, "eifbench": 1}
PATHS = ("fast", "litellm")
MODEL, JUDGE = "smollm2", "smollm2-judge"
# One string for model and judge: the server serves one model whatever the request names.
SERVED = "openai/smollm2-135m-instruct"
MAX_TOKENS = 64


@dataclass(frozen=True)
class Swept:
    path: str
    config: Path
    out: Path
    exit_code: int
    before: ServerCounters
    after: ServerCounters


def sweep_toml(out: Path, api_base: str, *, use_litellm: bool) -> str:
    flag = str(use_litellm).lower()
    endpoint = (
        f'model = "{SERVED}"\napi_base = "{api_base}"\nuse_litellm = {flag}\n'
        f"params = {{ temperature = 0, max_tokens = {MAX_TOKENS} }}\n"
    )
    # File order: `limit` is the first N instances, as planned_pairs reads them (the seeded order would
    # take N FollowBench groups of 5 levels, five times the real model's calls).
    run = ["[run]", f'output_dir = "{out}"', 'progress = "off"', "concurrency = 4", "reask = 1"]
    lines = [*run, 'order = "file"', ""]
    for name, limit in LIMITS.items():
        data = benchmarks.get(name).fixture_dir()
        lines += ["[[benchmarks]]", f'name = "{name}"', f'data = "{data}"', f"limit = {limit}", ""]
    lines += ["[[models]]", f'id = "{MODEL}"', endpoint, "[judge]", f'id = "{JUDGE}"', endpoint]
    return "\n".join(lines)


def planned_pairs() -> set[tuple[str, str]]:
    """(benchmark, instance id) of the first `limit` instances of each fixture, read by the benchmark."""
    out = set()
    for name, limit in LIMITS.items():
        bench = benchmarks.get(name)
        for inst in itertools.islice(bench.load(bench.fixture_dir(), {}), limit):
            out.add((name, inst.instance_id))
    return out


def records(s: Swept, kind: str) -> list[dict[str, Any]]:
    return stored_records(s.out, {kind})


@pytest.fixture(scope="module", params=PATHS)
def swept(
    request: pytest.FixtureRequest, llama_server: LlamaServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Swept]:
    path = request.param
    tmp = tmp_path_factory.mktemp(f"real-{path}")
    cfg = tmp / "sweep.toml"
    cfg.write_text(sweep_toml(tmp / "run", llama_server.api_base, use_litellm=path == "litellm"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("IFSWEEP_CACHE_DIR", str(tmp / "cache"))  # never the user's data cache
        before = llama_server.counters()
        code = main(["run", str(cfg)])
        after = llama_server.counters()
        yield Swept(path, cfg, tmp / "run", code, before, after)


def test_the_sweep_reached_the_server(swept: Swept) -> None:
    # exit codes: 0 complete, 1 some pair in error; anything else (bad config, a crash) fails here
    assert swept.exit_code in (0, 1)
    assert swept.after.slot_tasks != swept.before.slot_tasks
    assert swept.after.predicted_tokens > swept.before.predicted_tokens


def test_every_planned_pair_has_a_verdict_with_rows(swept: Swept) -> None:
    verdicts = records(swept, "verdict")
    seen = Counter((r["benchmark"], r["instance_id"]) for r in verdicts)
    assert set(seen) == planned_pairs()
    assert all(n == 1 for n in seen.values()), seen
    assert {r["model"] for r in verdicts} == {MODEL}
    assert {r["judge"] for r in verdicts} == {JUDGE}
    for r in verdicts:
        assert r["rows"], f"{r['benchmark']} {r['instance_id']}: a verdict without rows"
    judged = {r["benchmark"] for r in verdicts for row in r["rows"] if row["source"] == "judge"}
    assert judged == set(LIMITS), "every benchmark has judge-scored constraints"


def test_generations_are_the_servers_text_over_the_configured_path(swept: Swept) -> None:
    gens = records(swept, "generation")
    assert {(g["benchmark"], g["instance_id"]) for g in gens} == planned_pairs()
    for g in gens:
        assert g["path"] == swept.path
        assert g["status"] in ("ok", "truncated"), (g["status"], g["error_kind"], g["error_message"])
        assert g["text"].strip()
        assert g["output_tokens"] <= MAX_TOKENS
        assert g["finish_reason"] == ("length" if g["status"] == "truncated" else "stop")


def test_judge_replies_are_real_text(swept: Swept) -> None:
    judgments = records(swept, "judgment")
    by_bench: dict[str, list[dict[str, Any]]] = {}
    for j in judgments:
        by_bench.setdefault(j["benchmark"], []).append(j)
    assert set(by_bench) == set(LIMITS)
    for bench, js in by_bench.items():
        for j in js:
            assert j["path"] == swept.path
            assert j["judge"] == JUDGE
            assert j["status"] in ("ok", "truncated"), (bench, j["error_kind"], j["error_message"])
            assert j["text"].strip(), f"{bench}: an empty judge reply"
            assert j["input_tokens"] > 0 and 0 < j["output_tokens"] <= MAX_TOKENS
            assert j["parse"] in ("ok", "unparsed")
    # a model's replies to different prompts differ; one fixed string would be a canned answer
    texts = {j["text"] for j in judgments}
    assert len(texts) > len(by_bench)


def test_the_summary_counts_every_planned_pair(swept: Swept) -> None:
    summary = json.loads((swept.out / "summary.json").read_text())
    assert summary["planned"] == len(planned_pairs())
    assert summary["done"] + summary["errors"] == summary["planned"]


def test_rerun_sends_the_server_nothing(swept: Swept, llama_server: LlamaServer) -> None:
    # A rerun re-sends calls stored as errors (retry_errors); a finished sweep has none to re-send.
    failed = [r for r in records(swept, "generation") + records(swept, "judgment") if r["status"] == "error"]
    assert not failed, f"the first run stored errors, which a rerun would retry: {failed[:3]}"
    shard_bytes = {p: p.stat().st_size for p in swept.out.rglob("*.jsonl")}
    before = llama_server.counters()
    code = main(["run", str(swept.config)])
    assert llama_server.counters() == before, "a rerun of a finished sweep sent requests"
    assert code == swept.exit_code
    grown = {p for p, n in shard_bytes.items() if p.stat().st_size != n}
    assert not grown, f"a rerun wrote records: {sorted(map(str, grown))}"
