"""The simulator's identity in result keys is the simulator, not its port (issue 31 item 8).

`ifsweep demo` run twice failed the second time (exit 2, "api_base changed": its own simulator listens
on a random port); so did any resume after `ifsweep serve-mock` restarted without --port. An endpoint's
`server_id` now names the server in the keys in place of its api_base: the demo sets its simulator's,
and serve-mock prints the one to set. Both from the CLI, in subprocesses.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from conftest import subprocess_env
from sweeps import stored_records, toml_config

from ifsweep.providers.records import EndpointSpec
from ifsweep.runner.store.keys import endpoint_identity

CLI = [sys.executable, "-m", "ifsweep.runner.commands.cli"]


def ifsweep(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, env=subprocess_env())


def calls(run_dir: Path) -> int:
    return len(stored_records(run_dir, {"generation", "judgment"}))


def test_the_demo_twice_resumes(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    first = ifsweep("demo", "--out", str(out))
    assert first.returncode == 0, first.stderr
    made = calls(out)
    spent = json.loads((out / "summary.json").read_text())["spent_usd"]
    second = ifsweep("demo", "--out", str(out))
    assert second.returncode == 0, second.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["done"] == summary["planned"] > 0
    # Resumed: nothing sent again, nothing spent again.
    assert calls(out) == made and summary["spent_usd"] == spent


@contextmanager
def serve_mock() -> Iterator[tuple[str, str]]:
    """`ifsweep serve-mock` without --port: (its base URL, the server_id it says to set)."""
    with subprocess.Popen(
        [*CLI, "serve-mock", "--seed", "4"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=subprocess_env(),
    ) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None and proc.stderr is not None
            url = re.fullmatch(r"listening on (\S+)", proc.stdout.readline().strip())
            hint = re.search(r'server_id = "([^"]+)"', proc.stderr.readline())
            assert url and hint
            yield url.group(1), hint.group(1)
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def config(out: Path, base: str, server_id: str) -> str:
    text = toml_config(out, base, models=("alpha",), bench=("cfbench",), limit=3)
    return text.replace(f'api_base = "{base}"', f'api_base = "{base}"\nserver_id = "{server_id}"')


def test_a_run_resumes_after_serve_mock_restarts_on_another_port(tmp_path: Path) -> None:
    out, cfg = tmp_path / "run", tmp_path / "sweep.toml"
    with serve_mock() as (base, server_id):
        cfg.write_text(config(out, base, server_id))
        done = ifsweep("run", str(cfg))
        assert done.returncode == 0, done.stderr
    made = calls(out)
    with serve_mock() as (again, same_id):
        assert again != base and same_id == server_id
        cfg.write_text(config(out, again, same_id))  # the new port, as the user edits it
        resumed = ifsweep("run", str(cfg))
    assert resumed.returncode == 0, resumed.stderr
    assert calls(out) == made
    assert json.loads((out / "summary.json").read_text())["status"] == "complete"


def test_a_server_id_names_the_endpoint_in_place_of_its_api_base() -> None:
    def spec(base: str, server_id: str | None) -> EndpointSpec:
        return EndpointSpec("m", "openai/sim-alpha", api_base=base, server_id=server_id)

    a, b = "http://127.0.0.1:4001/v1", "http://127.0.0.1:4002/v1"
    assert endpoint_identity(spec(a, "sim")) == endpoint_identity(spec(b, "sim"))
    assert endpoint_identity(spec(a, "sim")) != endpoint_identity(spec(a, "other"))
    # Without one, the api_base is the identity, as before.
    assert endpoint_identity(spec(a, None)) != endpoint_identity(spec(b, None))
    assert endpoint_identity(spec(a, None))["api_base"] == a
