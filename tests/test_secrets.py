"""No API key and no Authorization header ever reaches a record, an event, a file or the output.

The hostile case: a provider whose error bodies quote the request's Authorization header back, on both
send paths (LiteLLM copies the body into its exception text). The fault-injecting sweeps of
tests/test_faults_sweep.py grep their run directories and output for their key too.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from sweeps import toml_config
from test_providers_support import ScriptedServer, Step

from ifsweep.providers.budget import Budget
from ifsweep.providers.limits import ProviderEvent
from ifsweep.providers.pool import ProviderPool
from ifsweep.providers.records import Completion, EndpointSpec, Price
from ifsweep.providers.send.retry import RetryPolicy

SECRET = "sk-ifsweep-SECRETS-c0ffee4242beef"
KEY_ENV = "IFSWEEP_SECRETS_TEST_KEY"
MSGS = [{"role": "user", "content": "hello"}]
FAST_RETRY = RetryPolicy(max_attempts=3, base_delay_s=0.001, max_delay_s=0.005, seed=0)


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, SECRET)
    return SECRET


def leaks(text: str) -> bool:
    return SECRET in text or SECRET[8:] in text or "Bearer sk-" in text


def call_echoing(status: int, path: str) -> tuple[Completion, list[ProviderEvent], list[str]]:
    async def main() -> tuple[Completion, list[ProviderEvent], list[str]]:
        events: list[ProviderEvent] = []
        steps = [Step(status=status, body={"echo_auth": True})]
        async with ScriptedServer(steps) as server:
            async with ProviderPool(budget=Budget(None), retry=FAST_RETRY, on_event=events.append) as pool:
                spec = EndpointSpec(
                    label="m",
                    model="openai/echo",
                    api_base=server.base_url,
                    api_key_env=KEY_ENV,
                    price=Price(1.0, 1.0),
                    timeout_s=20.0,
                    force_litellm=path == "litellm",
                )
                done = await pool.endpoint(spec).complete(MSGS)
            return done, events, server.auth_headers

    return asyncio.run(main())


@pytest.mark.parametrize("path", ["fast", "litellm"])
@pytest.mark.parametrize("status", [400, 401, 500])
def test_a_provider_quoting_the_key_never_leaks_it(key: str, path: str, status: int) -> None:
    done, events, seen = call_echoing(status, path)
    assert f"Bearer {key}" in seen, "the key was not sent: the test would prove nothing"
    assert done.status == "error" and done.error_message
    assert "Incorrect API key" in done.error_message  # the provider's words survive, the key does not
    assert "[REDACTED]" in done.error_message
    assert not leaks(done.error_message)
    assert events and not any(leaks(e.message) for e in events)
    assert not leaks(repr(done))


class _EchoHandler(BaseHTTPRequestHandler):
    """Answers every chat call 500 with the Authorization header quoted back, and logs nothing."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps(
            {"error": {"message": f"upstream failed for {self.headers.get('Authorization')}", "type": "x"}}
        ).encode()
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def echo_base() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("path", ["fast", "litellm"])
def test_a_sweep_against_a_quoting_provider_writes_and_prints_no_key(
    tmp_path: Path, echo_base: str, path: str
) -> None:
    out = tmp_path / "run"
    extra = f'api_key_env = "{KEY_ENV}"\ntimeout_s = 1.5' + (
        "\nuse_litellm = true" if path == "litellm" else ""
    )
    text = toml_config(out, echo_base, models=("a",), bench=("infobench",), limit=2, extra_model=extra)
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(text.replace('progress = "off"', 'progress = "plain"'))
    env = {**os.environ, KEY_ENV: SECRET}
    proc = subprocess.run(
        [sys.executable, "-m", "ifsweep.runner.commands.cli", "run", str(cfg)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]  # the failed calls leave pairs in error
    files = [p for p in out.rglob("*") if p.is_file()]
    blob = b"".join(p.read_bytes() for p in files)
    assert b"upstream failed for Bearer [REDACTED]" in blob, "the error records lack the provider's message"
    assert SECRET.encode() not in blob and b"Bearer sk-" not in blob
    assert not leaks(proc.stdout) and not leaks(proc.stderr)
    report = subprocess.run(
        [sys.executable, "-m", "ifsweep.runner.commands.cli", "status", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert not leaks(report.stdout + report.stderr)


@pytest.mark.parametrize("path", ["fast", "litellm"])
def test_a_successful_answer_repeating_the_key_is_stored_without_it(key: str, path: str) -> None:
    async def main() -> tuple[Completion, list[str]]:
        steps = [Step(status=200, body={"echo_key_in_answer": True})]
        async with ScriptedServer(steps) as server:
            async with ProviderPool(budget=Budget(None), retry=FAST_RETRY) as pool:
                spec = EndpointSpec(
                    label="m",
                    model="openai/echo",
                    api_base=server.base_url,
                    api_key_env=KEY_ENV,
                    timeout_s=20.0,
                    force_litellm=path == "litellm",
                )
                done = await pool.endpoint(spec).complete(MSGS)
            return done, server.auth_headers

    done, seen = asyncio.run(main())
    assert f"Bearer {key}" in seen
    assert done.status == "ok"
    # The key is gone; the rest of the answer is the model's, word for word.
    assert done.text == "Sure. The key you sent me is [REDACTED], and the weather is fine."
    assert not leaks(repr(done))
