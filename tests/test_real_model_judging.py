"""The real-model tier, judging: SmolLM2-135M as judge echoes its prompts (issue 11). In paper mode no
reply made of prompt text may count as a verdict, and a re-ask must be a follow-up, not the same request.

What must hold whatever the model says: every judge reply that parsed gives the same verdict with its
lines copied from the prompt's own text taken out (copies found by plain substrings, independently of
benchmarks/_echo.py; the instance's data and the answer are not the prompt's own text: an answer may
hold a verdict line, and a judge saying the same is not copying, issue 21.6), so no copied text decided
it; every re-ask sent the server a longer prompt than the
ask it follows (the unparsed reply and the format rule were added), as the server's own prompt token
count shows.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llamaserver import LlamaServer
from sweeps import stored_records

from ifsweep import benchmarks
from ifsweep.benchmarks import Instance, JudgeTask
from ifsweep.benchmarks.records import reask_message
from ifsweep.runner.commands.cli import main

pytestmark = pytest.mark.real_model

# Small: FollowBench's first fixture instances are judged, InFoBench asks a conversation of questions.
LIMITS = {"followbench": 4, "infobench": 1}
SERVED = "openai/smollm2-135m-instruct"
COPY_MIN_CHARS = 12


def _config(out: Path, api_base: str) -> str:
    endpoint = (
        f'model = "{SERVED}"\napi_base = "{api_base}"\nparams = {{ temperature = 0, max_tokens = 48 }}\n'
    )
    # File order: `limit` is the first N instances, as planned_pairs reads them (the seeded order would
    # take N FollowBench groups of 5 levels, five times the real model's calls).
    run = ["[run]", f'output_dir = "{out}"', 'progress = "off"', "concurrency = 4", "reask = 1"]
    lines = [*run, 'order = "file"', ""]
    for name, limit in LIMITS.items():
        data = benchmarks.get(name).fixture_dir()
        lines += ["[[benchmarks]]", f'name = "{name}"', f'data = "{data}"', f"limit = {limit}", ""]
    lines += ["[[models]]", 'id = "smollm2"', endpoint, "[judge]", 'id = "smollm2-judge"', endpoint]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def run_dir(llama_server: LlamaServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("real-judging")
    cfg = tmp / "sweep.toml"
    cfg.write_text(_config(tmp / "run", llama_server.api_base))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("IFSWEEP_CACHE_DIR", str(tmp / "cache"))
        assert main(["run", str(cfg)]) in (0, 1)
    yield tmp / "run"


def _instances() -> dict[tuple[str, str], Instance]:
    out = {}
    for name, limit in LIMITS.items():
        bench = benchmarks.get(name)
        for inst in itertools.islice(bench.load(bench.fixture_dir(), {}), limit):
            out[(name, inst.instance_id)] = inst
    return out


Plan = tuple[Instance, tuple[JudgeTask, ...], tuple[str, ...]]


def _plans(run_dir: Path) -> dict[tuple[str, str], Plan]:
    """Each instance's judge tasks, rebuilt from its stored generation: what its judge was sent; and the
    texts in it that are not the benchmark's own (the answer, the instance's data)."""
    gens = {
        (g["benchmark"], g["instance_id"]): g["text"] or "" for g in stored_records(run_dir, {"generation"})
    }
    out = {}
    for key, inst in _instances().items():
        tasks = benchmarks.get(key[0]).plan(inst, gens[key], "paper").judge_tasks
        data = [gens[key], *(c.text for c in inst.constraints), *(m.content for m in inst.messages)]
        data += [str(v) for v in inst.meta.values() if isinstance(v, str)]
        data += [str(v) for v in inst.meta.get("evolution_path", ())]
        out[key] = (inst, tasks, tuple(sorted((d for d in data if d.strip()), key=len, reverse=True)))
    return out


def _without_copies(reply: str, task: JudgeTask, data: tuple[str, ...]) -> str:
    """`reply` without its lines that occur verbatim in the prompt's own text of `task` (plain
    substrings, independent of benchmarks/_echo.py): what it was sent, with `data` cut out. A bare
    answer ("YES", "['NO']") occurs in most prompts, so only lines of COPY_MIN_CHARS or more count."""
    sent = [task.system or ""] + [x for t in task.turns for x in (t.user, reask_message(t).content)]
    for piece in data:
        sent = [text.replace(piece, "\n") for text in sent]
    kept = [
        line
        for line in reply.splitlines()
        if len(line.strip()) < COPY_MIN_CHARS or not any(line.strip() in text for text in sent)
    ]
    return "\n".join(kept)


def test_no_verdict_rests_on_text_copied_from_the_prompt(run_dir: Path) -> None:
    # SmolLM2 echoes its judge prompts (issue 11): a verdict read from a reply must be the same with the
    # copied lines taken out, or the copy decided it
    plans = _plans(run_dir)
    judgments = stored_records(run_dir, {"judgment"})
    assert {j["benchmark"] for j in judgments} == set(LIMITS)
    resting_on_copies = []
    for j in judgments:
        if j["parse"] != "ok":
            continue
        inst, tasks, data = plans[(j["benchmark"], j["instance_id"])]
        task = next(t for t in tasks if t.task_idx == j["task_idx"])
        bench = benchmarks.get(j["benchmark"])
        values = bench.parse(inst, task, j["turn_idx"], j["text"], "paper").values
        alone = bench.parse(inst, task, j["turn_idx"], _without_copies(j["text"], task, data), "paper").values
        if values != alone:
            resting_on_copies.append((j["instance_id"], j["text"][-160:], values, alone))
    assert not resting_on_copies, f"prompt text counted as a verdict: {resting_on_copies[:3]}"


def test_reasks_are_follow_ups_not_resends(run_dir: Path) -> None:
    judgments = stored_records(run_dir, {"judgment"})
    by_turn: dict[tuple[Any, ...], dict[int, dict[str, Any]]] = {}
    for j in judgments:
        by_turn.setdefault((j["benchmark"], j["instance_id"], j["task_idx"], j["turn_idx"]), {})[j["ask"]] = j
    reasked = [asks for asks in by_turn.values() if 1 in asks]
    assert reasked, "SmolLM2 left no first reply unparsed: nothing was re-asked"
    for asks in reasked:
        first, again = asks[0], asks[1]
        assert first["parse"] == "unparsed"
        # the server counted a longer prompt: the unparsed reply and the follow-up were added
        assert again["input_tokens"] > first["input_tokens"] + 10, (
            first["input_tokens"],
            again["input_tokens"],
        )
    # a judged row is decided exactly when an ask of its turn parsed (FollowBench: one turn for all
    # constraints; InFoBench: turn i asks constraint i)
    for v in stored_records(run_dir, {"verdict"}):
        for row in v["rows"]:
            turn = 0 if v["benchmark"] == "followbench" else row["constraint_idx"]
            asks = by_turn[(v["benchmark"], v["instance_id"], 0, turn)]
            assert (row["status"] == "ok") == any(a["parse"] == "ok" for a in asks.values()), row
