"""LiteLLM's bundled model map read without importing litellm (providers/price_map.py): the same prices
and context windows litellm's own get_model_info gives, for model strings as a config writes them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from ifsweep.providers import price_map
from ifsweep.providers.pricing import import_litellm, litellm_price
from ifsweep.providers.records import Price

REPO = Path(__file__).resolve().parents[1]
# Providers a sweep config names (the prefixes of its model strings).
CONFIG_PROVIDERS = (
    "openai",
    "anthropic",
    "gemini",
    "groq",
    "deepseek",
    "mistral",
    "together_ai",
    "openrouter",
)


def test_lookup_does_not_import_litellm_nor_touch_the_environment() -> None:
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    code = """
        import os, sys
        from ifsweep.providers.price_map import lookup
        from ifsweep.providers.pricing import litellm_price
        e = lookup("openai/gpt-4o-mini")
        print(e.max_input_tokens > 0, e.input_per_token > 0, litellm_price("openai/gpt-4o-mini") is not None)
        print("litellm" in sys.modules, "LITELLM_LOCAL_MODEL_COST_MAP" in os.environ)
    """
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "True", "False", "False"]


def test_agrees_with_litellm_get_model_info() -> None:
    litellm = import_litellm()
    entries = price_map._load().entries
    checked = 0
    for name, info in entries.items():
        provider = info.get("litellm_provider")
        if info.get("mode") != "chat" or provider not in CONFIG_PROVIDERS:
            continue
        # As a config writes it: provider/model (the map's own key when it carries the prefix already).
        model = name if name.startswith(f"{provider}/") else f"{provider}/{name}"
        ours = price_map.lookup(model)
        theirs = litellm.get_model_info(model)
        assert ours is not None, model
        assert (ours.input_per_token or 0.0) == (theirs.get("input_cost_per_token") or 0.0), model
        assert (ours.output_per_token or 0.0) == (theirs.get("output_cost_per_token") or 0.0), model
        assert ours.cache_read_per_token == theirs.get("cache_read_input_token_cost"), model
        assert ours.cache_write_per_token == theirs.get("cache_creation_input_token_cost"), model
        assert ours.max_input_tokens == theirs.get("max_input_tokens"), model
        checked += 1
    assert checked > 200  # the map holds hundreds of chat models from these providers


def test_bare_names_prefixes_and_unknown_models() -> None:
    mini = price_map.lookup("openai/gpt-4o-mini")
    assert mini is not None and mini == price_map.lookup("gpt-4o-mini") == price_map.lookup(
        "openai/GPT-4o-mini"
    )
    assert mini.max_input_tokens == 128000
    assert price_map.lookup("openai/no-such-model-xyz") is None
    # A prefix that names another provider does not borrow an OpenAI entry.
    assert price_map.lookup("anthropic/gpt-4o-mini") is None
    assert litellm_price("openai/gpt-4o-mini") == Price(
        0.15, 0.6, cached_input_per_mtok=0.075, batch_input_per_mtok=0.075, batch_output_per_mtok=0.3
    )
    assert litellm_price("openai/no-such-model-xyz") is None


def test_a_run_imports_litellm_only_for_a_call_through_it(tmp_path: Path) -> None:
    """Unpriced models look their price up in the map: neither a first run nor a resume imports litellm,
    and a resume that sends nothing does not load aiohttp either."""
    from sweeps import toml_config

    from ifsweep.simulator import SimulatorThread

    code = """
        import sys
        from ifsweep.runner.commands.cli import main
        code = main(["run", sys.argv[1]])
        print(code, "litellm" in sys.modules, "aiohttp" in sys.modules)
    """

    def run(cfg: Path) -> list[str]:
        out = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code), str(cfg)],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.split()[-3:]

    with SimulatorThread() as sim:
        cfg = tmp_path / "sweep.toml"
        cfg.write_text(toml_config(tmp_path / "run", sim.base_url, bench=("cfbench",), limit=3))
        assert run(cfg) == ["0", "False", "True"]  # sent its calls over aiohttp
        sent = sim.stats.requests
        assert run(cfg) == ["0", "False", "False"]  # the resume: nothing to send
        assert sim.stats.requests == sent
        # A model sent through LiteLLM is what imports it.
        cfg.write_text(
            cfg.read_text().replace("max_tokens = 128 }", "max_tokens = 64 }\nuse_litellm = true", 1)
        )
        assert run(cfg)[1] == "True"


def test_a_hosted_openai_model_is_routed_without_litellm_as_litellm_would() -> None:
    """A resume of a sweep over hosted OpenAI models (no api_base) works out their routes, and so their
    keys, without the 3 s litellm import; the route is the one litellm's own answer leads to."""
    code = """
        import sys
        from ifsweep.providers.pool import resolve_route
        from ifsweep.providers.records import EndpointSpec
        r = resolve_route(EndpointSpec(label="m", model="openai/gpt-4o-mini"))
        print(r.provider, r.model, r.api_base, r.path, "litellm" in sys.modules)
    """
    for env_base in (None, "http://127.0.0.1:9/v1"):
        env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_BASE")}
        if env_base:
            env["OPENAI_BASE_URL"] = env_base
        out = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, check=True
        )
        base = env_base or "https://api.openai.com/v1"
        assert out.stdout.split() == ["openai", "gpt-4o-mini", base, "fast", "False"]
    model, provider, _, litellm_base = import_litellm().get_llm_provider("openai/gpt-4o-mini")
    assert (provider, model, litellm_base) == ("openai", "gpt-4o-mini", None)
