"""`ifsweep run` as a subprocess: the exit status and summary.json tell the truth about pairs in error,
`ifsweep status` agrees with summary.json, and a prompt over the model's context window is a
`context_length` error naming both sizes, on both send paths.

The models' simulator has a small context window, so the longer prompts are refused (deterministically:
the simulator counts tokens the same way every time); the judge has a simulator of its own without one.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sweeps import stored_records, toml_config

from ifsweep import benchmarks
from ifsweep.runner.watch.outcomes import errors_message
from ifsweep.simulator import SimConfig, SimulatorThread
from ifsweep.simulator.text import prompt_tokens

WINDOW = 30
PRICE = "price = { input_per_mtok = 1.0, output_per_mtok = 2.0 }"
BENCH = ("infobench", "cfbench")
MODELS = ("alpha", "beta")
DOWN_KINDS = {"connection", "timeout"}


def ifsweep(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ifsweep.runner.commands.cli", *args],
        capture_output=True,
        text=True,
        timeout=240,
    )


def summary(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return data


def status_json(out: Path) -> dict[str, Any]:
    done = ifsweep("status", "--json", str(out))
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def too_long(window: int) -> int:
    """Pairs whose prompt the simulator counts over `window` tokens (each model meets every prompt)."""
    n = 0
    for name in BENCH:
        bench = benchmarks.get(name)
        for inst in bench.load(bench.fixture_dir(), {}):
            n += prompt_tokens([m.as_dict() for m in inst.messages]) > window
    return n * len(MODELS)


MAX_TOKENS = 128  # toml_config's params; an OpenAI-style server counts them into the window


@pytest.fixture
def sims(request: pytest.FixtureRequest) -> Iterator[tuple[SimulatorThread, SimulatorThread]]:
    style = getattr(request, "param", "llamacpp")
    # llama.cpp refuses a prompt over n_ctx; OpenAI and vLLM a prompt plus max_tokens over the window.
    window = WINDOW if style == "llamacpp" else WINDOW + MAX_TOKENS
    with (
        SimulatorThread(SimConfig(context_window=window, context_style=style)) as models,
        SimulatorThread() as judge,
    ):
        yield models, judge


def write_config(tmp_path: Path, models_base: str, judge_base: str, *, litellm: bool = False) -> Path:
    out = tmp_path / "run"
    extra = PRICE + ("\nuse_litellm = true" if litellm else "")
    text = toml_config(out, models_base, models=MODELS, bench=BENCH, judge=False, extra_model=extra)
    text += f'\n[judge]\nid = "judge"\nmodel = "openai/sim-judge"\napi_base = "{judge_base}"\n{PRICE}\n'
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(text)
    return cfg


@pytest.mark.parametrize(
    ("path", "sims"),
    [("fast", "llamacpp"), ("fast", "openai"), ("litellm", "openai"), ("litellm", "llamacpp")],
    indirect=["sims"],
)
def test_pairs_in_error_exit_1_until_a_rerun_fixes_them(
    tmp_path: Path, sims: tuple[SimulatorThread, SimulatorThread], path: str, request: pytest.FixtureRequest
) -> None:
    models, judge = sims
    cfg = write_config(tmp_path, models.base_url, judge.base_url, litellm=path == "litellm")
    out = tmp_path / "run"
    failed = too_long(WINDOW)
    assert 0 < failed < len(MODELS) * 22  # some pairs fail, not all

    first = ifsweep("run", str(cfg))
    told = f"{failed} pairs ended in error (context_length: {failed}); run again to retry them"
    assert first.returncode == 1, first.stderr
    assert told in first.stderr
    s = summary(out)
    assert (s["status"], s["complete"], s["errors"]) == ("failed", False, failed)
    assert s["errors_by_kind"] == {"context_length": failed}
    assert s["message"] == told

    # Each refused call was sent once (never retried) and names the window and the prompt's size,
    # where the error reaches us with them: LiteLLM keeps llama.cpp's message but drops its n_ctx and
    # n_prompt_tokens fields.
    style = request.node.callspec.params["sims"]
    errors = [r for r in stored_records(out, {"generation"}) if r["status"] == "error"]
    assert len(errors) == failed
    for r in errors:
        assert r["error_kind"] == "context_length"
        assert r["attempts"] == 1
        if (path, style) != ("litellm", "llamacpp"):
            window = WINDOW if style == "llamacpp" else WINDOW + MAX_TOKENS
            assert f"context window of {window} tokens" in r["error_message"]
            assert "a prompt of " in r["error_message"]

    # `ifsweep status` says the same: incomplete, and why.
    st = status_json(out)
    assert (st["complete"], st["errors_by_kind"]) == (False, {"context_length": failed})
    text = ifsweep("status", str(out)).stdout
    assert f"incomplete: {told}" in text

    # Give the server a longer context: the rerun retries exactly those pairs and ends complete.
    models.set_config(SimConfig())
    second = ifsweep("run", str(cfg))
    assert second.returncode == 0, second.stderr
    s = summary(out)
    assert (s["status"], s["complete"], s["errors"], s["errors_by_kind"]) == ("complete", True, 0, {})
    assert status_json(out)["complete"] is True


def test_a_model_whose_server_is_down_fails_the_sweep(tmp_path: Path) -> None:
    with SimulatorThread() as sim:
        cfg = write_config(tmp_path, sim.base_url, sim.base_url)
        # beta's server refuses every connection: its pairs end as connection errors after retries
        # (or as timeouts, when a loaded machine lets the 1 s deadline pass first).
        cfg.write_text(
            cfg.read_text().replace(
                f'model = "openai/sim-beta"\napi_base = "{sim.base_url}"', _down("sim-beta")
            )
        )
        done = ifsweep("run", str(cfg))
    assert done.returncode == 1, done.stderr[-2000:]
    s = summary(tmp_path / "run")
    assert (s["status"], s["complete"]) == ("failed", False)
    assert sum(s["errors_by_kind"].values()) == 22 and set(s["errors_by_kind"]) <= DOWN_KINDS
    assert f"[ifsweep] {errors_message(22, s['errors_by_kind'])}" in done.stderr


def test_the_library_says_the_same(tmp_path: Path) -> None:
    import ifsweep

    with SimulatorThread() as sim:
        cfg = write_config(tmp_path, sim.base_url, sim.base_url)
        cfg.write_text(
            cfg.read_text().replace(
                f'model = "openai/sim-beta"\napi_base = "{sim.base_url}"', _down("sim-beta")
            )
        )
        result = ifsweep.run(cfg, progress="off")
    assert (result.status, result.exit_code, result.complete) == ("failed", 1, False)
    assert sum(result.errors_by_kind.values()) == 22 and set(result.errors_by_kind) <= DOWN_KINDS
    assert result.message == errors_message(22, result.errors_by_kind)
    assert result.message.startswith("22 pairs ended in error (") and "run again to retry" in result.message
    rows = {(r.model, r.benchmark): r for r in ifsweep.status(tmp_path / "run")}
    by_model = {(r["model"], r["benchmark"]): r for r in summary(tmp_path / "run")["by_model"]}
    assert {k: (r.spent_usd, r.judge_usd) for k, r in rows.items()} == {
        k: (r["spent_usd"], r["judge_usd"]) for k, r in by_model.items()
    }


def _down(name: str) -> str:
    with socket.socket() as sock:  # a loopback port bound, then closed: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f'model = "openai/{name}"\napi_base = "http://127.0.0.1:{port}/v1"\ntimeout_s = 1.0'


def test_a_clean_sweep_exits_0_and_summary_rows_equal_status_rows(tmp_path: Path) -> None:
    with SimulatorThread() as models, SimulatorThread() as judge:
        cfg = write_config(tmp_path, models.base_url, judge.base_url)
        done = ifsweep("run", str(cfg))
    out = tmp_path / "run"
    assert done.returncode == 0, done.stderr
    s = summary(out)

    # Per (model, benchmark): its answers plus the judge's calls on them, from the records themselves
    # (not the model's total on every row), and the judge's part on its own.
    calls = stored_records(out, {"generation", "judgment"})
    assert len(s["by_model"]) == len(MODELS) * len(BENCH)
    for row in s["by_model"]:
        mine = [r for r in calls if (r["model"], r["benchmark"]) == (row["model"], row["benchmark"])]
        judged = [r for r in mine if r["kind"] == "judgment"]
        assert judged and len(judged) < len(mine)
        assert row["spent_usd"] == pytest.approx(sum(r["cost_usd"] for r in mine), abs=1e-9)
        assert row["judge_usd"] == pytest.approx(sum(r["cost_usd"] for r in judged), abs=1e-9)
    rows = {(r["model"], r["benchmark"]): (r["spent_usd"], r["judge_usd"]) for r in s["by_model"]}
    assert sum(spent for spent, _ in rows.values()) == pytest.approx(s["spent_usd"], abs=1e-9)

    # The very figures `ifsweep status` computes; and both say the run is complete.
    st = status_json(out)
    assert rows == {(r["model"], r["benchmark"]): (r["spent_usd"], r["judge_usd"]) for r in st["rows"]}
    assert (s["status"], s["complete"], s["errors_by_kind"]) == ("complete", True, {})
    assert (st["complete"], st["errors_by_kind"]) == (True, {})


def test_a_judge_call_in_error_names_the_judge(tmp_path: Path) -> None:
    # Every judge prompt (instruction, answer and rubric) is longer than the judge's 40 tokens.
    with (
        SimulatorThread() as models,
        SimulatorThread(SimConfig(context_window=40, context_style="llamacpp")) as judge,
    ):
        cfg = write_config(tmp_path, models.base_url, judge.base_url)
        done = ifsweep("run", str(cfg))
    pairs = len(MODELS) * 22
    assert done.returncode == 1, done.stderr[-2000:]
    assert (
        f"{pairs} pairs ended in error (judge:context_length: {pairs}); run again to retry them"
        in done.stderr
    )
    judged = stored_records(tmp_path / "run", {"judgment"})
    assert judged and all(j["error_kind"] == "context_length" for j in judged)
    assert status_json(tmp_path / "run")["errors_by_kind"] == {"judge:context_length": pairs}
