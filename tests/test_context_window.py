"""Context windows: a server's refusal of a too-long prompt is recognised as `context_length` with both
sizes and is not retried; `ifsweep plan` warns of prompts over a model's window before any spend, with
the window from the config, the model's server (llama.cpp /props, vLLM /v1/models) or LiteLLM's map.

The refusals below are the servers' own wording (llama.cpp b4xxx+ server, OpenAI, vLLM 0.6+, Anthropic).
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from sweeps import toml_config

from ifsweep.providers.records import EndpointSpec
from ifsweep.providers.send.context import Overflow, overflow_in
from ifsweep.providers.send.fast import error_detail
from ifsweep.providers.send.retry import HttpStatusError, classify
from ifsweep.runner.commands.cli import main
from ifsweep.runner.commands.windows import Window, window_of
from ifsweep.simulator import SimConfig, SimulatorThread

LLAMA_BODY = orjson.dumps(
    {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 8123,
            "n_ctx": 4096,
        }
    }
)
OPENAI = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 "
    "tokens. Please reduce the length of the messages."
)
VLLM_OLD = (
    "This model's maximum context length is 4096 tokens. However, you requested 8300 tokens (8172 in the "
    "messages, 128 in the completion). Please reduce the length of the messages or completion."
)
VLLM_NEW = (
    "'max_tokens' or 'max_completion_tokens' is too large: 128. This model's maximum context length is "
    "4096 tokens and your request has 4000 input tokens (128 > 4096 - 4000)."
)
ANTHROPIC = "prompt is too long: 210311 tokens > 200000 maximum"


def test_each_servers_wording_gives_both_sizes() -> None:
    llama = error_detail(LLAMA_BODY)
    assert overflow_in(llama) == Overflow(window=4096, prompt_tokens=8123)
    assert overflow_in(OPENAI) == Overflow(window=128000, prompt_tokens=130512)
    assert overflow_in(VLLM_OLD) == Overflow(window=4096, prompt_tokens=8172, requested=8300)
    assert overflow_in(VLLM_NEW) == Overflow(window=4096, prompt_tokens=4000)
    assert overflow_in(ANTHROPIC) == Overflow(window=200000, prompt_tokens=210311)
    # LiteLLM prints the body as a Python dict inside its exception text.
    assert overflow_in(f"litellm.BadRequestError: {orjson.loads(LLAMA_BODY)}") == Overflow(4096, 8123)
    assert overflow_in("Invalid value for 'temperature': must be <= 2") is None
    assert (
        Overflow(4096, 8172, 8300).describe("m")
        == "a prompt of 8172 tokens plus 128 for the answer exceeds m's context window of 4096 tokens"
    )


def test_an_overflow_is_its_own_kind_and_not_retried() -> None:
    for text in (error_detail(LLAMA_BODY), OPENAI, VLLM_OLD, VLLM_NEW, ANTHROPIC):
        decision = classify(HttpStatusError(400, {}, text))
        assert (decision.kind, decision.retry) == ("context_length", False), text
    # Other 400s stay bad requests; an overflow phrase under a 5xx is still the server's fault.
    assert classify(HttpStatusError(400, {}, "Invalid value for 'temperature'")).kind == "bad_request"
    assert classify(HttpStatusError(503, {}, OPENAI)).kind == "server"


def plan(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> str:
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(text)
    assert main(["plan", str(cfg)]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(
    ("style", "source"), [("llamacpp", "/props n_ctx"), ("openai", "/models max_model_len")]
)
def test_plan_warns_with_the_window_the_server_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], style: str, source: str
) -> None:
    with SimulatorThread(SimConfig(context_window=5, context_style=style)) as sim:
        out = plan(tmp_path, capsys, toml_config(tmp_path / "run", sim.base_url, bench=("infobench",)))
        assert sim.stats.requests == 0  # asked the window only: nothing sent, nothing spent
    for model in ("alpha", "beta"):
        assert f"warning: 10 of 10 infobench prompts exceed {model}'s context window of 5 tokens" in out
    assert source in out and "context_length errors" in out
    # The judge (on the same server) is told of once per benchmark.
    assert out.count("infobench pairs have a judge prompt over judge's context window of 5 tokens") == 1
    assert not (tmp_path / "run").exists()

    with SimulatorThread(SimConfig(context_window=100_000, context_style=style)) as sim:
        out = plan(tmp_path, capsys, toml_config(tmp_path / "run", sim.base_url, bench=("infobench",)))
    assert "warning" not in out and "context window" not in out


def test_plan_window_from_the_config_and_from_litellms_map(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with SimulatorThread() as sim:  # reports no window at all
        text = toml_config(
            tmp_path / "run", sim.base_url, bench=("infobench",), extra_model="context_window = 8"
        )
        out = plan(tmp_path, capsys, text)
    assert "exceed alpha's context window of 8 tokens (config context_window)" in out

    # A model LiteLLM's map gives a 512-token window, against EIFBench's long prompts.
    text = toml_config(tmp_path / "run", "http://127.0.0.1:9/v1", bench=("eifbench",), models=("guard",))
    text = text.replace('model = "openai/sim-guard"', 'model = "groq/meta-llama/llama-prompt-guard-2-22m"')
    text = text.replace('api_base = "http://127.0.0.1:9/v1"\nparams', "params")
    out = plan(tmp_path, capsys, text)
    assert "eifbench prompts exceed guard's context window of 512 tokens (LiteLLM model map" in out
    assert window_of(EndpointSpec(label="m", model="openai/gpt-4o-mini")) == Window(
        128000, "LiteLLM model map max_input_tokens"
    )
