"""End to end: TOML -> LiteLLM resolution -> real HTTP -> shards -> verdicts -> metrics -> report."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from sweeps import toml_config

from ifsweep import benchmarks
from ifsweep.runner.commands.cli import main
from ifsweep.runner.store.shards import RunStore
from ifsweep.simulator import SimConfig, SimulatorThread


@pytest.fixture
def sim() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimConfig(seed=3)) as s:
        yield s


def run_cli(*args: str) -> int:
    return main(list(args))


def read_summary(out: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((out / "summary.json").read_text())


def test_sweep_then_resume_sends_nothing(
    tmp_path: Path, sim: SimulatorThread, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(toml_config(out, sim.base_url, bench=benchmarks.names()))
    assert run_cli("run", str(cfg)) == 0
    summary = read_summary(out)
    assert summary["status"] == "complete"
    assert summary["planned"] == summary["done"] > 0 and summary["errors"] == 0
    sent = sim.stats.requests
    assert sent > summary["planned"]  # generations plus judge calls

    assert run_cli("run", str(cfg)) == 0
    assert sim.stats.requests == sent, "a resumed run re-sent requests"

    capsys.readouterr()
    assert run_cli("report", str(out), "--format", "json") == 0
    rows = json.loads(capsys.readouterr().out)
    heads = {(r["benchmark"], r["model"], r["metric"]) for r in rows if r["slice"] == "all"}
    for model in ("alpha", "beta"):
        for bench, metric in [
            ("followbench", "HSR"),
            ("followbench", "SSR"),
            ("followbench", "CSL"),
            ("cfbench", "CSR"),
            ("cfbench", "ISR"),
            ("cfbench", "PSR"),
            ("infobench", "DRFR"),
            ("eifbench", "GAcc"),
        ]:
            assert (bench, model, metric) in heads
    for r in rows:
        assert 0.0 <= r["value"] <= 1.0 or r["metric"] == "CSL"


def test_models_score_differently(
    tmp_path: Path, sim: SimulatorThread, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(toml_config(out, sim.base_url, models=("alpha", "beta", "gamma"), bench=("cfbench",)))
    assert run_cli("run", str(cfg)) == 0
    capsys.readouterr()
    run_cli("report", str(out), "--format", "json")
    rows = json.loads(capsys.readouterr().out)
    csr = {r["model"]: r["value"] for r in rows if r["metric"] == "CSR" and r["slice"] == "all"}
    assert len(set(csr.values())) == 3, csr


class _PlainOpenAI(BaseHTTPRequestHandler):
    """A minimal OpenAI-compatible server written with the standard library, independent of our simulator."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).seen.append(body)
        req = json.loads(body)
        last = req["messages"][-1]["content"]
        if "#System#" in last:
            n = last.count("#Initial Instruction + ")
            text = "Checked.\n" + repr(["YES"] * max(n - 1, 1))
        elif "\t" in last or "criteria" in last.lower():
            text = "ok"
        else:
            text = f"An answer of {len(last)} characters."
        payload = json.dumps(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": req["model"],
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


def test_foreign_openai_server_and_resume(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _PlainOpenAI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/v1"
        out = tmp_path / "run"
        cfg = tmp_path / "sweep.toml"
        # File order: `limit` = 6 instances (the seeded order's 6 units would be 30).
        cfg.write_text(
            toml_config(
                out, base, models=("solo",), bench=("followbench",), limit=6, extra_run='order = "file"'
            )
        )
        assert run_cli("run", str(cfg)) == 0
        n = len(_PlainOpenAI.seen)
        assert n >= 6
        assert run_cli("run", str(cfg)) == 0
        assert len(_PlainOpenAI.seen) == n
        store = RunStore.open(out, writer_id="reader")
        try:
            gens = list(store.iter_records({"generation"}))
        finally:
            store.close()
        assert len(gens) == 6 and all(g["status"] == "ok" and g["text"].startswith("An answer") for g in gens)
    finally:
        server.shutdown()
        server.server_close()
