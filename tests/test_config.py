"""Config validation: every mistake exits 2 with a message that names the file and the key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ifsweep.runner.config import ConfigError, load_config

GOOD = """
[run]
output_dir = "out"
max_usd = 2.5
concurrency = 16

[[benchmarks]]
name = "cfbench"
limit = 3
split = "easy"

[[models]]
id = "mini"
model = "openai/gpt-4o-mini"
api_base = "http://127.0.0.1:9/v1"
rpm = 500
params = { temperature = 0, max_tokens = 64 }
price = { input_per_mtok = 0.15, output_per_mtok = 0.6 }

[judge]
model = "openai/gpt-4o"
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "sweep.toml"
    p.write_text(text, encoding="utf-8")
    return p


def test_good_config_parses_into_typed_records(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, GOOD))
    assert cfg.run.output_dir == tmp_path.resolve() / "out"
    assert cfg.run.max_usd == 2.5 and cfg.run.concurrency == 16
    (b,) = cfg.benchmarks
    assert (b.name, b.limit, b.scoring, dict(b.options)) == ("cfbench", 3, "paper", {"split": "easy"})
    (m,) = cfg.models
    assert (m.label, m.model, m.rpm, m.params["max_tokens"]) == ("mini", "openai/gpt-4o-mini", 500, 64)
    assert m.price is not None and m.price.output_per_mtok == 0.6
    assert cfg.judge is not None and cfg.judge.label == "judge"


@pytest.mark.parametrize(
    ("change", "key", "words"),
    [
        (("concurrency = 16", "concurency = 16"), "run.concurency", "did you mean 'concurrency'"),
        (('name = "cfbench"', 'name = "cfbnch"'), "benchmarks[0].name", "did you mean 'cfbench'"),
        (('split = "easy"', 'split = "medium"'), "benchmarks[0]", "split"),
        (('split = "easy"', 'langauge = "en"'), "benchmarks[0].langauge", "unknown key"),
        (("rpm = 500", 'rpm = "fast"'), "models[0].rpm", "positive integer"),
        (("max_usd = 2.5", "max_usd = -1"), "run.max_usd", "positive number"),
        (("max_tokens = 64", "max_tokens = 0"), "models[0].params.max_tokens", "positive integer"),
        (('model = "openai/gpt-4o-mini"', 'model = "gpt4omini"'), "models[0].model", "names no provider"),
        ((", output_per_mtok = 0.6 }", " }"), "models[0].price.output_per_mtok", "missing"),
        (("[judge]", "[judges]"), "judges", "write [[judges]]"),
    ],
)
def test_each_mistake_names_its_key(tmp_path: Path, change: tuple[str, str], key: str, words: str) -> None:
    assert change[0] in GOOD
    path = write(tmp_path, GOOD.replace(change[0], change[1], 1))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.key == key
    assert str(path) in str(err.value) and words in str(err.value)


def test_duplicate_model_ids_and_missing_env(tmp_path: Path) -> None:
    twice = GOOD + '\n[[models]]\nid = "mini"\nmodel = "openai/gpt-4o"\n'
    with pytest.raises(ConfigError, match=r"models\[1\].id: duplicate model id 'mini'"):
        load_config(write(tmp_path, twice))
    var = "IFSWEEP_TEST_SURELY_UNSET_KEY"
    os.environ.pop(var, None)
    with pytest.raises(ConfigError, match=f"api_key_env: environment variable {var} is not set"):
        load_config(write(tmp_path, GOOD.replace("rpm = 500", f'api_key_env = "{var}"')))


def test_malformed_toml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\(syntax\): not valid TOML"):
        load_config(write(tmp_path, "[run\noutput_dir = 1"))
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "absent.toml")


def test_cli_exits_2_and_touches_no_run_dir(tmp_path: Path) -> None:
    bad = write(tmp_path, GOOD.replace("concurrency = 16", "concurrency = 0"))
    proc = subprocess.run(
        [sys.executable, "-m", "ifsweep.runner.commands.cli", "run", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "run.concurrency" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_help_does_not_import_litellm() -> None:
    code = (
        "import sys; from runner.commands.cli import main\n"
        "try:\n main(['--help'])\nexcept SystemExit: pass\n"
        "print('litellm' in sys.modules, 'polars' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert out.strip().endswith("False False")
