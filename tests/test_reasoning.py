"""Reasoning models (issue 32, item 7): OpenAI's o-series and gpt-5 refuse `max_tokens` (they take
`max_completion_tokens`) and sampling parameters. Every route sends what the model takes: the fast
path, LiteLLM, and the lines of a Batch API file; the simulator refuses as OpenAI does."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import anyio
import pytest
from capture import CaptureProxy
from sweeps import stored_records, toml_config

from ifsweep.providers.budget import Budget
from ifsweep.providers.pool import ProviderPool
from ifsweep.providers.records import EndpointSpec
from ifsweep.providers.send.params import sent_params
from ifsweep.runner.commands.cli import main
from ifsweep.runner.config import load_config
from ifsweep.simulator import SimulatorThread
from ifsweep.simulator.server import reasoning_refusal

PARAMS = {"temperature": 0, "top_p": 0.9, "max_tokens": 300, "seed": 7}


def test_a_reasoning_model_is_sent_max_completion_tokens_and_no_sampling_parameter() -> None:
    for model in ("openai/o3-mini", "openai/o4-mini", "openai/gpt-5", "o1"):
        assert sent_params(EndpointSpec("m", model, params=PARAMS)) == {
            "seed": 7,
            "max_completion_tokens": 300,
        }
    for model in ("openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5", "deepseek/deepseek-reasoner"):
        assert sent_params(EndpointSpec("m", model, params=PARAMS)) == PARAMS
    # The config's word beats the map's, both ways.
    assert sent_params(EndpointSpec("m", "openai/o3-mini", params=PARAMS, reasoning=False)) == PARAMS
    assert "max_tokens" not in sent_params(
        EndpointSpec("m", "hosted_vllm/mine", params=PARAMS, reasoning=True)
    )
    both = {"max_tokens": 10, "max_completion_tokens": 900}
    assert sent_params(EndpointSpec("m", "openai/o3", params=both)) == {"max_completion_tokens": 900}


def test_the_simulator_refuses_what_a_reasoning_model_does_not_take() -> None:
    refused = reasoning_refusal({"max_tokens": 5}, "o3-mini")
    assert refused is not None and refused["error"]["param"] == "max_tokens"
    assert refused["error"]["code"] == "unsupported_parameter"
    assert reasoning_refusal({"temperature": 0}, "gpt-5-mini") is not None
    assert reasoning_refusal({"temperature": 1, "max_completion_tokens": 5}, "o4-mini") is None
    assert reasoning_refusal({"temperature": 0, "max_tokens": 5}, "gpt-4o-mini") is None


@pytest.mark.parametrize("force_litellm", [False, True])
def test_both_send_paths_send_a_reasoning_model_what_it_takes(force_litellm: bool) -> None:
    with SimulatorThread() as sim, CaptureProxy(sim.root_url) as proxy:
        spec = EndpointSpec(
            "m", "openai/o3-mini", api_base=proxy.base_url, params=PARAMS, force_litellm=force_litellm
        )

        async def go() -> Any:
            async with ProviderPool(budget=Budget(None)) as pool:
                return await pool.endpoint(spec).complete([{"role": "user", "content": "hello"}])

        done = anyio.run(go)
        (sent,) = [e.json() for e in proxy.to("/v1/chat/completions")]
    assert done.status == "ok", done.error_message
    assert sent["max_completion_tokens"] == 300 and sent["seed"] == 7
    assert not {"max_tokens", "temperature", "top_p"} & set(sent)


def test_a_sweep_of_reasoning_models_interactive_and_in_batches_completes(tmp_path: Path) -> None:
    """Before: every call of either model got a 400 (max_tokens, temperature) that no retry fixes."""
    with SimulatorThread() as sim, CaptureProxy(sim.root_url) as proxy:
        text = toml_config(tmp_path / "run", proxy.base_url, bench=("cfbench",), limit=2)
        text = text.replace('model = "openai/sim-alpha"', 'model = "openai/o3-mini"')
        batch = "batch = { max_age_s = 0.3, poll_s = 0.1, poll_max_s = 0.5 }"
        text = text.replace('model = "openai/sim-beta"', f'model = "openai/o4-mini"\n{batch}')
        cfg = tmp_path / "s.toml"
        cfg.write_text(text.replace('[judge]\nid = "judge"', '[judge]\nid = "judge"\nreasoning = false'))
        loaded = load_config(cfg)
        assert loaded.models[0].params["max_tokens"] == 128  # the config keeps its words
        assert loaded.judges[0].reasoning is False
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()) as err:
            code = main(["run", str(cfg)])
        chats = [e.json() for e in proxy.to("/v1/chat/completions") if e.json()["model"] == "o3-mini"]
        files = [e.body for e in proxy.to("/v1/files") if e.method == "POST"]
    assert code == 0, err.getvalue()[-2000:]
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["status"] == "complete"
    assert not [r for r in stored_records(tmp_path / "run", {"generation"}) if r["status"] == "error"]
    assert chats and all("max_tokens" not in c and "temperature" not in c for c in chats)
    lines = [json.loads(line) for f in files for line in f.splitlines() if line.startswith(b"{")]
    bodies = [line["body"] for line in lines if line["body"]["model"] == "o4-mini"]
    assert bodies and all(b["max_completion_tokens"] == 128 and "temperature" not in b for b in bodies)


def _run(cfg: Path) -> None:
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()) as err:
        code = main(["run", str(cfg)])
    assert code == 0, err.getvalue()[-2000:]


def test_a_changed_reasoning_setting_is_sent_again_on_resume_and_one_that_changes_nothing_is_not(
    tmp_path: Path,
) -> None:
    """Keys hash what is sent (`sent_params`), not the config's params: `reasoning = true` on alpha
    changes its requests (max_completion_tokens, no temperature), so its generations are sent again;
    `reasoning = false` on beta, which the map already calls no reasoning model, changes none of its
    requests and re-buys nothing. Before: the resume sent nothing and kept alpha's old answers for a
    request that now differs. The viewer proves the new answers' prompts by the same keys."""
    from ifsweep.runner.store.manifest import read_manifest
    from ifsweep.runner.view.detail import instance_detail
    from ifsweep.runner.view.index import RunIndex
    from ifsweep.runner.view.sources import InstanceSource

    run_dir = tmp_path / "run"
    with SimulatorThread() as sim, CaptureProxy(sim.root_url) as proxy:
        text = toml_config(run_dir, proxy.base_url, bench=("cfbench",), limit=3)
        cfg = tmp_path / "s.toml"
        cfg.write_text(text)
        _run(cfg)
        first = [e.json() for e in proxy.to("/v1/chat/completions")]
        alpha_first = [c for c in first if c["model"] == "sim-alpha"]
        assert len(alpha_first) == 3 and all(c["max_tokens"] == 128 for c in alpha_first)
        text = text.replace('model = "openai/sim-alpha"', 'model = "openai/sim-alpha"\nreasoning = true')
        text = text.replace('model = "openai/sim-beta"', 'model = "openai/sim-beta"\nreasoning = false')
        cfg.write_text(text)
        _run(cfg)
        again = [e.json() for e in proxy.to("/v1/chat/completions")][len(first) :]
    alpha = [c for c in again if c["model"] == "sim-alpha"]
    assert len(alpha) == 3, [c["model"] for c in again]
    assert all(c["max_completion_tokens"] == 128 and "temperature" not in c for c in alpha)
    assert not [c for c in again if c["model"] == "sim-beta"]
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "complete"
    manifest = read_manifest(run_dir)
    assert manifest is not None
    assert manifest.models["alpha"].keyed_params == {"max_completion_tokens": 128}
    assert manifest.models["beta"].keyed_params == manifest.models["beta"].params
    index = RunIndex.build(run_dir)
    source = InstanceSource(manifest)
    for model in ("alpha", "beta"):
        ids = list(index.groups[("cfbench", model)])
        details = [instance_detail(index, source, "cfbench", model, iid) for iid in ids]
        assert len(details) == 3 and all(d is not None and d.prompt_proven for d in details), model
