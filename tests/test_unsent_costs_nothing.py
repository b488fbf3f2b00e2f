"""An attempt that never reached a provider costs nothing (issue 31 item 9).

A judge whose api_base is a closed port (connect refused) or a name that does not resolve was booked
its worst case per attempt as spend "cut off in flight", and every "run again to retry" added more until
the cap stopped the run. Now only an attempt whose request was sent (a reset after it, a timeout, a cut
answer) is charged its worst case. Through the CLI against the simulator (the models) and real sockets
(the judge), on the fast path, the LiteLLM path and in batch mode; `classify` on the errors the real
clients raise.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from sweeps import toml_config

from ifsweep.providers.send import retry
from ifsweep.runner.commands.cli import main
from ifsweep.simulator import SimConfig, SimulatorThread

MODEL_PRICE = "price = { input_per_mtok = 1.0, output_per_mtok = 4.0 }"
# A dear judge: 1,000 output tokens at $100/Mtok, about $0.1 of worst case an attempt.
JUDGE_PRICE = "price = { input_per_mtok = 1.0, output_per_mtok = 100.0 }\nparams = { max_tokens = 1000 }"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def resetting_port() -> Iterator[int]:
    """A port that accepts, reads the request and resets the connection (RST, SO_LINGER 0)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conn.recv(1 << 16)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(srv.getsockname()[1])
    finally:
        stop.set()
        srv.close()
        thread.join(5)


@pytest.fixture
def plain_http_port() -> Iterator[int]:
    """A port that answers any bytes with a plain HTTP 400: a TLS client's handshake fails there."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conn.recv(1 << 16)
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(srv.getsockname()[1])
    finally:
        srv.close()
        thread.join(5)


def config(out: Path, model_base: str, judge_base: str, path: str, extra_run: str = "") -> str:
    """One CFBench instance, one model on the simulator, the judge at `judge_base` over `path`."""
    text = toml_config(
        out, model_base, models=("alpha",), bench=("cfbench",), limit=1, extra_model=MODEL_PRICE,
        extra_run=extra_run, judge=False,
    )  # fmt: skip
    how = {"fast": "", "litellm": "use_litellm = true", "batch": "batch = { max_age_s = 0.1 }"}[path]
    judge = ["[judge]", 'id = "judge"', 'model = "openai/sim-judge"', f'api_base = "{judge_base}"']
    return text + "\n".join([*judge, JUDGE_PRICE, how, ""])


def run(cfg: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["run", str(cfg)])
    capsys.readouterr()
    return code, json.loads((out / "summary.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("path", "extra_run"),
    [("fast", ""), ("fast", "max_usd = 5.0"), ("litellm", "max_usd = 5.0"), ("batch", "max_usd = 5.0")],
    ids=["fast", "fast-capped", "litellm-capped", "batch-capped"],
)
def test_a_judge_on_a_closed_port_costs_nothing_however_often_it_is_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str, extra_run: str
) -> None:
    out, cfg = tmp_path / "run", tmp_path / "sweep.toml"
    with SimulatorThread(SimConfig(seed=3)) as sim:
        text = config(out, sim.base_url, f"http://127.0.0.1:{closed_port()}/v1", path, extra_run)
        cfg.write_text(text, encoding="utf-8")
        billed = []
        for _ in range(3):
            code, summary = run(cfg, out, capsys)
            assert code == 1, summary  # the judge's calls ended in error
            billed.append(sim.stats.billed_usd(1.0, 4.0))
            assert summary["worst_case_usd"] == 0.0, summary
            # What the simulator billed (the one generation, sent once), nothing for the judge.
            assert summary["spent_usd"] == pytest.approx(billed[-1], rel=1e-6, abs=1e-9), summary
    assert billed[0] > 0 and billed == [billed[0]] * 3


@pytest.mark.parametrize("path", ["fast", "litellm"])
def test_a_judge_reset_after_the_request_was_sent_is_charged_its_worst_case(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str, resetting_port: int
) -> None:
    out, cfg = tmp_path / "run", tmp_path / "sweep.toml"
    with SimulatorThread(SimConfig(seed=3)) as sim:
        cfg.write_text(config(out, sim.base_url, f"http://127.0.0.1:{resetting_port}/v1", path))
        code, summary = run(cfg, out, capsys)
        generation = sim.stats.billed_usd(1.0, 4.0)
    assert code == 1
    # Six attempts, each of which the provider may have run: at least one worst case each.
    assert summary["worst_case_usd"] >= 6 * 0.1
    assert summary["spent_usd"] == pytest.approx(generation + summary["worst_case_usd"], rel=1e-6)


def errors_of(url: str) -> list[BaseException]:
    """What aiohttp and LiteLLM raise for one POST to `url`."""
    from ifsweep.providers.pricing import import_litellm

    litellm = import_litellm()
    found: list[BaseException] = []

    async def both() -> None:
        async with aiohttp.ClientSession() as session:
            try:
                async with session.post(url + "/chat/completions", data=b"{}") as resp:
                    await resp.read()
            except Exception as exc:
                found.append(exc)
        try:
            await litellm.acompletion(
                model="openai/m", messages=[{"role": "user", "content": "hi"}], api_base=url,
                api_key="k", num_retries=0, timeout=5,
            )  # fmt: skip
        except Exception as exc:
            found.append(exc)

    anyio.run(both)
    assert len(found) == 2
    return found


def test_classify_tells_a_connection_never_made_from_one_reset(
    resetting_port: int, plain_http_port: int
) -> None:
    never = [
        f"http://127.0.0.1:{closed_port()}/v1",  # refused
        "http://no-such-host.invalid/v1",  # DNS
        f"https://127.0.0.1:{plain_http_port}/v1",  # the TLS handshake fails
    ]
    for exc in (e for url in never for e in errors_of(url)):
        decision = retry.classify(exc)
        assert (decision.kind, decision.retry, decision.sent) == ("connection", True, False), repr(exc)
    for exc in errors_of(f"http://127.0.0.1:{resetting_port}/v1"):
        decision = retry.classify(exc)
        assert (decision.kind, decision.sent) == ("connection", True), repr(exc)
    assert retry.never_sent(ConnectionRefusedError()) and not retry.never_sent(ConnectionResetError())
