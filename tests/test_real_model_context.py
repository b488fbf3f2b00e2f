"""The real-model tier, context overflow: EIFBench prompts (8,000+ tokens) against llama.cpp's per-slot
window (the tier's server runs `-c 16384 -np 4`: 4,096 tokens a slot).

`ifsweep plan` warns before anything is sent, with the window the server reports (/props); the run
stores each refused call as `context_length`, sent once, naming the window and the prompt's size (where
the send path keeps them), and exits 1 saying how many pairs failed and why.

Data: EIFBench's released multi-party file from the benchmark data beside the checkout when it is there;
otherwise the built-in EIFBench fixture with its dialogue repeated to the same length, so the tier runs
from a fresh clone too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED
from llamaserver import LlamaServer
from sweeps import stored_records

from ifsweep import benchmarks

pytestmark = pytest.mark.real_model

SERVED = "openai/smollm2-135m-instruct"
SLOT_WINDOW = 4096  # 16,384 / 4 slots
PAIRS = 2


def long_eifbench(tmp: Path) -> Path:
    released = SHARED / "EIFBench" / "data"
    if (released / "sorted_party100.json").is_file():
        return released
    fixture = benchmarks.get("eifbench").fixture_dir() / "sorted_party2.json"
    rows: list[dict[str, Any]] = json.loads(fixture.read_text("utf-8"))
    for r in rows:
        r["input"] = "\n".join([r["input"]] * 60)  # tens of thousands of characters: over 8,000 tokens
    folder = tmp / "eifbench-long"
    folder.mkdir()
    (folder / "sorted_party2.json").write_text(json.dumps(rows, ensure_ascii=False), "utf-8")
    return folder


def sweep_toml(out: Path, api_base: str, data: Path, *, use_litellm: bool) -> str:
    endpoint = (
        f'model = "{SERVED}"\napi_base = "{api_base}"\nuse_litellm = {str(use_litellm).lower()}\n'
        "params = { temperature = 0, max_tokens = 16 }\n"
    )
    return "\n".join(
        [
            "[run]",
            f'output_dir = "{out}"',
            'progress = "off"',
            "",
            "[[benchmarks]]",
            'name = "eifbench"',
            f'data = "{data}"',
            f"limit = {PAIRS}",
            "",
            "[[models]]",
            'id = "smollm2"',
            endpoint,
            "[judge]",
            'id = "smollm2-judge"',
            endpoint,
        ]
    )


def ifsweep(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ifsweep.runner.commands.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize("path", ["fast", "litellm"])
def test_prompts_over_the_slot_window(
    llama_server: LlamaServer, tmp_path: Path, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IFSWEEP_CACHE_DIR", str(tmp_path / "cache"))
    cfg = tmp_path / "sweep.toml"
    out = tmp_path / "run"
    cfg.write_text(
        sweep_toml(out, llama_server.api_base, long_eifbench(tmp_path), use_litellm=path == "litellm")
    )

    before = llama_server.counters()
    plan = ifsweep("plan", str(cfg))
    assert plan.returncode == 0, plan.stderr
    assert llama_server.counters() == before  # planning sent no completion
    assert (
        f"of {PAIRS} eifbench prompts exceed smollm2's context window of {SLOT_WINDOW} tokens" in plan.stdout
    )
    assert "/props n_ctx (per slot)" in plan.stdout

    run = ifsweep("run", str(cfg))
    told = f"{PAIRS} pairs ended in error (context_length: {PAIRS}); run again to retry them"
    assert run.returncode == 1, run.stderr[-2000:]
    assert told in run.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["complete"], summary["errors_by_kind"]) == (False, {"context_length": PAIRS})
    gens = stored_records(out, {"generation"})
    assert len(gens) == PAIRS
    for g in gens:
        assert (g["status"], g["error_kind"], g["attempts"]) == ("error", "context_length", 1)
        assert "exceeds the available context size" in g["error_message"]  # the server's own words
        if path == "fast":  # LiteLLM drops llama.cpp's n_ctx / n_prompt_tokens fields
            assert f"context window of {SLOT_WINDOW} tokens" in g["error_message"]
            prompt = int(g["error_message"].split("a prompt of ", 1)[1].split(" ", 1)[0])
            assert prompt > SLOT_WINDOW
    assert not stored_records(out, {"judgment"})  # an answer that never came is never judged
