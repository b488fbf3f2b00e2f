"""A 429 that no wait fixes (issue 32, item 6): OpenAI's `insufficient_quota` (and its billing and
spend-limit codes) says the account has no credit. It is never retried; the first one stops its
endpoint's sends for the run, its pairs end in error kind `quota`, and the message says the account
needs credit, over both send paths and through `ifsweep run`."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import anyio
import pytest
from sweeps import toml_config

from ifsweep.providers.budget import Budget
from ifsweep.providers.pool import ProviderPool
from ifsweep.providers.records import EndpointSpec
from ifsweep.providers.send.retry import HttpStatusError, RetryPolicy, classify
from ifsweep.runner.commands.cli import main
from ifsweep.simulator import FaultRates, SimConfig, SimulatorThread
from ifsweep.simulator.config import BatchSettings


@pytest.mark.parametrize(
    ("code", "kind", "retry"),
    [
        ("insufficient_quota", "quota", False),
        ("billing_hard_limit_reached", "quota", False),
        ("project_spend_limit_exceeded", "quota", False),
        ("rate_limit_exceeded", "rate_limit", True),
        (None, "rate_limit", True),
    ],
)
def test_a_429_is_a_quota_error_by_its_code(code: str | None, kind: str, retry: bool) -> None:
    decision = classify(HttpStatusError(429, {}, "no", code))
    assert (decision.kind, decision.retry) == (kind, retry)
    # The code means quota only on a 429: elsewhere the status decides.
    assert classify(HttpStatusError(500, {}, "no", code)).kind == "server"


@pytest.mark.parametrize("force_litellm", [False, True])
def test_the_first_quota_answer_stops_the_endpoints_sends(force_litellm: bool) -> None:
    with SimulatorThread(SimConfig(faults=FaultRates(quota=1.0))) as sim:
        spec = EndpointSpec(
            "m", "openai/sim-a", api_base=sim.base_url, params={"max_tokens": 20}, force_litellm=force_litellm
        )

        async def go() -> list[object]:
            async with ProviderPool(budget=Budget(None), retry=RetryPolicy(base_delay_s=0.01)) as pool:
                endpoint = pool.endpoint(spec)
                return [await endpoint.complete([{"role": "user", "content": f"q{i}"}]) for i in range(4)]

        done = anyio.run(go)
        received = sum(sim.stats.by_model.values())
    assert received == 1  # one attempt, and nothing after it
    assert [getattr(c, "error_kind", None) for c in done] == ["quota"] * 4
    first = getattr(done[0], "error_message", "") or ""
    assert "no credit left" in first and "add credit" in first and getattr(done[0], "attempts", 0) == 1


def test_a_sweep_out_of_quota_ends_in_quota_errors_and_says_the_account_needs_credit(tmp_path: Path) -> None:
    with SimulatorThread(SimConfig(faults=FaultRates(quota=1.0))) as sim:
        cfg = tmp_path / "s.toml"
        cfg.write_text(
            toml_config(tmp_path / "run", sim.base_url, models=("alpha",), bench=("cfbench",), limit=3)
        )
        err = io.StringIO()
        with redirect_stdout(io.StringIO()), redirect_stderr(err):
            code = main(["run", str(cfg)])
        received = sum(sim.stats.by_model.values())
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert code == 1
    assert received <= 3  # at most the calls already in flight when the first answer came, never 6 each
    said = err.getvalue() + json.dumps(summary)
    assert "quota: 3" in said and "add credit" in said, said
    assert "rate_limit" not in said


# Anthropic's answer for an account without credit (under anthropic-version 2023-06-01: a 400
# invalid_request_error told apart by its message alone).
ANTHROPIC_NO_CREDIT = (
    '{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to '
    'access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}'
)


def test_anthropics_credit_balance_400_is_a_quota_error_and_other_400s_are_not() -> None:
    assert (classify(HttpStatusError(400, {}, ANTHROPIC_NO_CREDIT)).kind, False) == ("quota", False)
    assert not classify(HttpStatusError(400, {}, ANTHROPIC_NO_CREDIT)).retry
    other = '{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}'
    assert classify(HttpStatusError(400, {}, other)).kind == "bad_request"
    # The words mean quota only on a 400 (a 5xx whose body happens to quote them is still the server's).
    assert classify(HttpStatusError(500, {}, ANTHROPIC_NO_CREDIT)).kind == "server"


@pytest.mark.parametrize("batch", [False, True])
def test_an_anthropic_sweep_without_credit_ends_in_quota_errors_and_says_the_account_needs_credit(
    tmp_path: Path, batch: bool
) -> None:
    """Before: `bad_request: 3`, with advice to check the params. Now `quota`, never retried: over
    LiteLLM's interactive route the endpoint's sends end at the first answer; over Message Batches
    each errored request of the batch ends so."""
    with SimulatorThread(SimConfig(faults=FaultRates(quota=1.0))) as sim:
        text = toml_config(tmp_path / "run", sim.base_url, models=("alpha",), bench=("cfbench",), limit=3)
        claude = f'model = "anthropic/claude-sonnet-4-5"\napi_base = "{sim.root_url}"'
        if batch:
            claude += "\nbatch = { max_age_s = 0.3, poll_s = 0.1, poll_max_s = 0.5 }"
        cfg = tmp_path / "s.toml"
        cfg.write_text(text.replace(f'model = "openai/sim-alpha"\napi_base = "{sim.base_url}"', claude))
        err = io.StringIO()
        with redirect_stdout(io.StringIO()), redirect_stderr(err):
            code = main(["run", str(cfg)])
        received = sim.stats.by_model["claude-sonnet-4-5"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert code == 1
    assert 1 <= received <= 3
    said = err.getvalue() + json.dumps(summary)
    assert "quota: 3" in said and "add credit" in said, said
    assert "bad_request" not in said


@pytest.mark.parametrize("where", ["line", "create"])
def test_a_batch_mode_sweep_out_of_quota_submits_no_batch_after_the_first_answer(
    tmp_path: Path, where: str
) -> None:
    """OpenAI's insufficient_quota on the lines of the first batch (2 requests), or on its create, stops
    the endpoint as the interactive pool's first quota answer does (retry.out_of_quota): the third call,
    waiting in the collector, ends `quota` at once and no second batch is asked for. Before: the lines
    were retried as rate limits, and the third call went in a later batch once max_age_s had passed."""
    sim_config = (
        SimConfig(faults=FaultRates(quota=1.0))
        if where == "line"
        else SimConfig(batch=BatchSettings(no_credit=True))
    )
    with SimulatorThread(sim_config) as sim:
        batch = (
            "batch = { max_requests = 2, max_age_s = 60, poll_s = 0.1, poll_max_s = 0.5, max_retries = 2 }"
        )
        cfg = tmp_path / "s.toml"
        text = toml_config(tmp_path / "run", sim.base_url, models=("alpha",), bench=("cfbench",), limit=3)
        params = "params = { temperature = 0, max_tokens = 128 }"
        cfg.write_text(text.replace(params, params + "\n" + batch))
        err = io.StringIO()
        with redirect_stdout(io.StringIO()), redirect_stderr(err):
            code = main(["run", str(cfg)])
        ledger = sim.stats.ledger.snapshot()
        created, refused = sim.stats.batches_created, sim.stats.faults["quota"]
    submissions = ledger["submissions"]
    if where == "line":
        assert created == 1, submissions
        assert len(submissions) == 2 and len({s["batch_id"] for s in submissions}) == 1
        assert all(s["outcome"] == "unanswered" for s in submissions)
    else:
        assert (created, refused, submissions) == (0, 1, [])  # one create asked for, refused
    assert ledger["bills"] == []  # a quota answer is not billed
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert code == 1
    said = err.getvalue() + json.dumps(summary)
    assert "quota: 3" in said and "add credit" in said, said
    assert "rate_limit" not in said
