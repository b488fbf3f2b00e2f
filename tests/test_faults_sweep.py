"""`ifsweep run` as a subprocess against a simulator that injects every fault, on both send paths.

One run per path: every fault is hit; every (model, instance) ends as exactly one generation and one
verdict; errors carry a kind and a message and are never judged; empty, truncated and refused answers
are judged and counted in the report; the key never appears in the run directory or the output. A resume
with the faults switched off retries only the errors.
"""

from __future__ import annotations

import collections
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sweeps import stored_records, toml_config

from ifsweep.providers.records import ErrorKind
from ifsweep.simulator import FaultRates, SimConfig, SimulatorThread
from ifsweep.simulator.config import FAULT_NAMES

SECRET = "sk-ifsweep-FAULTSWEEP-7f3a9c1e5b"
KEY_ENV = "IFSWEEP_FAULT_TEST_KEY"
ANSWERS = {"ok", "empty", "truncated", "refused"}
ERROR_KINDS = set(ErrorKind.__args__)  # type: ignore[attr-defined]
# Every fault but quota (an account without credit ends its endpoint's sends for the run:
# tests/test_quota.py) at 4% each: 64% of requests misbehave, enough to meet each in a small sweep.
CHAOS = tuple(f for f in FAULT_NAMES if f != "quota")
FAULTS = FaultRates(**dict.fromkeys(CHAOS, 0.04))


def run_ifsweep(cfg: Path) -> subprocess.CompletedProcess[str]:
    env = {**_env(), KEY_ENV: SECRET}
    return subprocess.run(
        [sys.executable, "-m", "ifsweep.runner.commands.cli", "run", str(cfg)],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != KEY_ENV}


def dead_base() -> str:
    """An api_base on a loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def secret_hits(out: Path, *texts: str) -> list[str]:
    hits = [f"output {i}" for i, t in enumerate(texts) if SECRET in t or "Bearer " in t]
    for f in sorted(out.rglob("*")):
        if f.is_file():
            data = f.read_bytes()
            if SECRET.encode() in data or b"Bearer " in data:
                hits.append(str(f))
    return hits


@pytest.mark.parametrize("path", ["fast", "litellm"])
def test_every_fault_in_a_real_sweep(tmp_path: Path, path: str) -> None:
    sim_cfg = SimConfig(faults=FAULTS, seed=21, hang_s=60.0)
    with SimulatorThread(sim_cfg) as sim:
        out = tmp_path / "run"
        extra = f'api_key_env = "{KEY_ENV}"\ntimeout_s = 6.0\nmax_concurrency = 8'
        if path == "litellm":
            extra += "\nuse_litellm = true"
        text = toml_config(
            out,
            sim.base_url,
            models=("alpha", "beta"),
            bench=("infobench", "cfbench"),
            limit=6,
            extra_model=extra,
        )
        text += f'api_key_env = "{KEY_ENV}"\ntimeout_s = 6.0\n' + (
            "use_litellm = true\n" if path == "litellm" else ""
        )
        # A provider that is down for the whole first run: its calls must end as error records.
        text += (
            f'\n[[models]]\nid = "gamma"\nmodel = "openai/sim-gamma"\napi_base = "{dead_base()}"\n'
            + extra.replace("timeout_s = 6.0", "timeout_s = 1.5")
            + "\nparams = { temperature = 0, max_tokens = 128 }\n"
        )
        cfg = tmp_path / "sweep.toml"
        cfg.write_text(text)

        first = run_ifsweep(cfg)
        # Pairs ended in error (gamma's at least): exit 1, and the line says how many and why.
        assert first.returncode == 1, first.stderr[-3000:]
        assert "pairs ended in error (" in first.stderr and "run again to retry them" in first.stderr
        assert "Traceback" not in first.stderr
        missed = [f for f in CHAOS if sim.stats.faults[f] == 0]
        assert not missed, f"faults never injected: {missed}"

        gens = stored_records(out, {"generation"})
        verdicts = stored_records(out, {"verdict"})
        judgments = stored_records(out, {"judgment"})
        pairs = {(g["model"], g["instance_id"]) for g in gens}
        assert len(pairs) == len(gens) == 3 * 12, "a pair is missing or was generated twice"
        assert len({(v["model"], v["instance_id"]) for v in verdicts}) == len(verdicts) == 36
        assert {g["path"] for g in gens} == {path}

        statuses = collections.Counter(g["status"] for g in gens)
        assert set(statuses) <= ANSWERS | {"error"}
        for g in gens:
            if g["status"] == "error":
                assert g["error_kind"] in ERROR_KINDS and g["error_message"] and g["text"] is None
            else:
                assert g["error_kind"] is None and g["error_message"] is None
        by_gen = {v["gen_key"]: v for v in verdicts}
        judged = {(j["model"], j["instance_id"]) for j in judgments}
        for g in gens:
            v = by_gen[g["key"]]
            if g["status"] == "error":  # never judged, never scored
                assert v["status"] == "error"
                assert all(r["status"] == "error" and r["satisfied"] is None for r in v["rows"])
                assert (g["model"], g["instance_id"]) not in judged
            else:  # empty, truncated and refused answers are real answers: judged
                # ...by a judgment of its own, or by the one already bought for another model's
                # identical answer to the same instance (judge calls are keyed by content: an empty
                # answer makes the same judge prompt whichever model gave it, and a missing text (a
                # content filter's null) is judged as the empty one: the pipeline plans `text or ""`).
                twins = {
                    o["model"]
                    for o in gens
                    if o["instance_id"] == g["instance_id"]
                    and (o["text"] or "") == (g["text"] or "")
                    and o is not g
                }
                assert (g["model"], g["instance_id"]) in judged or any(
                    (m, g["instance_id"]) in judged for m in twins
                ), (g["model"], g["instance_id"], g["status"])
                assert (
                    any(r["source"] == "judge" and r["status"] != "error" for r in v["rows"])
                    or v["status"] == "error"
                )
        summary = (out / "summary.json").read_text()
        assert f'"errors": {sum(v["status"] == "error" for v in verdicts)}' in summary

        report = subprocess.run(
            [sys.executable, "-m", "ifsweep.runner.commands.cli", "report", str(out), "--format", "md"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert report.returncode == 0, report.stderr
        assert "empty/trunc/refused" in report.stdout

        assert secret_hits(out, first.stdout, first.stderr, report.stdout, report.stderr) == []

        # Resume with a healthy provider: only error records are sent again.
        errors_before = {g["key"] for g in gens if g["status"] == "error"}
        assert errors_before, "no call ended in error: the resume below would prove nothing"
        sim.set_config(SimConfig(seed=21))
        sim.stats.reset()
        second = run_ifsweep(cfg)
        # gamma's provider is still down: still incomplete, and only for that.
        assert second.returncode == 1, second.stderr[-3000:]
        assert "12 pairs ended in error (" in second.stderr  # connection (or, via LiteLLM, timeout)
        gens2 = stored_records(out, {"generation"})
        latest: dict[str, dict[str, Any]] = {}
        for g in gens2:
            latest[g["key"]] = g
        assert all(g["status"] != "error" for g in latest.values() if g["model"] != "gamma")
        # Refused at once on the fast path; through LiteLLM, whose first call on a loaded machine can
        # outlast gamma's 1.5 s timeout_s before the refusal comes back, a timeout is as true.
        down = {"connection"} if path == "fast" else {"connection", "timeout"}
        assert all(
            g["status"] == "error" and g["error_kind"] in down
            for g in latest.values()
            if g["model"] == "gamma"
        )
        resent = collections.Counter(g["key"] for g in gens2[len(gens) :])
        assert set(resent) == errors_before and all(n == 1 for n in resent.values())
        assert secret_hits(out, second.stdout, second.stderr) == []
