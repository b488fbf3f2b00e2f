"""A third-party benchmark, registered through the `ifsweep.benchmarks` entry point group by a package
written here and installed with pip into this environment (uninstalled at the end): `ifsweep benchmarks
list` shows it, a sweep runs it against the simulator, its report has its rows, and no file of ifsweep
changes. A second entry point of the same package is broken: it is named in the errors, and stops
nothing else."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from ifsweep.simulator import SimConfig, SimulatorThread

REPO = Path(__file__).resolve().parents[1]
DIST = "ifsweep-wordcount-plugin"

PYPROJECT = f"""
[build-system]
requires = ["setuptools>=70.1"]
build-backend = "setuptools.build_meta"

[project]
name = "{DIST}"
version = "0.1.0"
dependencies = ["ifsweep"]

[project.entry-points."ifsweep.benchmarks"]
wordcount = "ifsweep_wordcount:WordCount"
brokenbench = "ifsweep_wordcount.missing:Nothing"

[tool.setuptools]
packages = ["ifsweep_wordcount"]

[tool.setuptools.package-data]
ifsweep_wordcount = ["data/*.json"]
"""

# A rule-only benchmark: is the answer between a least and a most number of words?
PLUGIN = '''
"""WordCount: does an answer keep to the word counts its prompt asks for? Scored by rules alone."""

from __future__ import annotations

import json
from pathlib import Path

import ifsweep.benchmarks as b

HERE = Path(__file__).resolve().parent


# The base class brings option checks and the report name; the package's own fixture folder is named below.
class WordCount(b.BenchmarkBase):
    name = "wordcount"
    display_name = "WordCount"
    release = b.Release("https://example.invalid/wc", "v1", (b.DataFile("words.json", sha256="0" * 64),))

    def load(self, data_dir, options):
        for rec in json.loads((data_dir / "words.json").read_text(encoding="utf-8")):
            yield b.Instance(
                benchmark=self.name,
                instance_id=rec["id"],
                group_id=rec["id"],
                messages=(b.Message("user", rec["prompt"]),),
                constraints=(b.Constraint(0, type="at_least"), b.Constraint(1, type="at_most")),
                meta={"least": rec["least"], "most": rec["most"]},
            )

    def plan(self, instance, response, mode):
        n = len(response.split())
        values = {0: n >= instance.meta["least"], 1: n <= instance.meta["most"]}
        return b.Plan(rule_values=values, judge_tasks=())

    def parse(self, instance, task, turn_idx, reply, mode):
        raise ValueError("wordcount sends no judge requests")

    def template_version(self):
        return "wordcount-1"

    def fixture_dir(self):
        return HERE / "data"

    def simulated_judge_reply(self, messages, decide):
        return None  # rules alone: no judge requests to answer

    def metrics(self):
        import polars as pl

        from ifsweep.metrics import BenchmarkMetrics, Components, Leaf, kept_expr, per_instance

        def components(rows):
            per = [kept_expr(), pl.col("satisfied").all().cast(pl.Float64).alias("ok")]
            inst = per_instance(rows, self.name, per).collect()
            kept = inst.filter(pl.col("kept")).lazy()
            leaf = Leaf(kept, "WCA", pl.lit("all"), (), "instance", "instance_id", pl.col("ok"))
            return Components((leaf,), seen=inst.lazy())

        return (BenchmarkMetrics(self.name, self.display_name, ("WCA",), "WCA", components),)
'''

DATA = [
    {"id": f"w{i}", "prompt": f"Write about topic {i} in {i} words.", "least": 30 + i * 10, "most": 200}
    for i in range(8)
]


def ifsweep_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "ifsweep", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False, cwd=cwd)


def pip(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", *args, "--disable-pip-version-check", "--no-input"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def repo_state() -> str:
    out = subprocess.run(
        ["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True, check=False
    )
    diff = subprocess.run(["git", "diff"], cwd=REPO, capture_output=True, text=True, check=False)
    return out.stdout + diff.stdout


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The package built and installed from files written here (offline: no build isolation, no deps)."""
    root = tmp_path_factory.mktemp("plugin")
    pkg = root / "ifsweep_wordcount"
    (pkg / "data").mkdir(parents=True)
    (root / "pyproject.toml").write_text(textwrap.dedent(PYPROJECT), encoding="utf-8")
    (pkg / "__init__.py").write_text(PLUGIN, encoding="utf-8")
    (pkg / "data" / "words.json").write_text(json.dumps(DATA), encoding="utf-8")
    before = repo_state()
    pip("install", "--no-deps", "--no-build-isolation", "--no-index", str(root))
    try:
        yield pkg
    finally:
        pip("uninstall", "-y", DIST)
    assert repo_state() == before, "installing a plugin changed a file of ifsweep"


def test_benchmarks_list_shows_the_plugin_and_names_the_broken_entry_point(plugin: Path) -> None:
    done = ifsweep_cli("benchmarks", "list")
    listed = [line.split()[0] for line in done.stdout.splitlines()]
    assert listed == ["followbench", "cfbench", "infobench", "eifbench", "wordcount"]
    assert "WordCount" in done.stdout
    # The broken one is named with its entry point and distribution; the command says it failed.
    assert done.returncode == 1
    assert "benchmark 'brokenbench'" in done.stderr and DIST in done.stderr
    assert "ifsweep_wordcount.missing:Nothing" in done.stderr and "ModuleNotFoundError" in done.stderr


def sweep_toml(out: Path, base: str, *benches: tuple[str, Path]) -> str:
    lines = ["[run]", f"output_dir = {json.dumps(str(out))}", 'progress = "off"', ""]
    for name, data in benches:
        lines += ["[[benchmarks]]", f'name = "{name}"', f"data = {json.dumps(str(data))}", ""]
    for m in ("alpha", "beta"):
        lines += ["[[models]]", f'id = "{m}"', f'model = "openai/sim-{m}"', f'api_base = "{base}"', ""]
    lines += ["[judge]", 'model = "openai/sim-judge"', f'api_base = "{base}"', ""]
    return "\n".join(lines)


def test_a_sweep_runs_the_plugin_and_its_report_has_its_rows(plugin: Path, tmp_path: Path) -> None:
    from ifsweep import benchmarks

    cfbench = benchmarks.get("cfbench").fixture_dir()
    out = tmp_path / "run"
    cfg = tmp_path / "sweep.toml"
    with SimulatorThread(SimConfig(seed=2)) as sim:
        cfg.write_text(sweep_toml(out, sim.base_url, ("wordcount", plugin / "data"), ("cfbench", cfbench)))
        done = ifsweep_cli("run", str(cfg))
        assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["done"] == summary["planned"] == 2 * (8 + 12)

    table = ifsweep_cli("report", str(out))
    assert table.returncode == 0, table.stderr
    assert "WordCount (2 models)" in table.stdout and "WCA %" in table.stdout
    assert "CFBench (2 models)" in table.stdout
    rows = json.loads(ifsweep_cli("report", str(out), "--format", "json").stdout)
    wca = {r["model"]: r for r in rows if r["benchmark"] == "wordcount" and r["metric"] == "WCA"}
    assert set(wca) == {"alpha", "beta"} and all(r["n"] == 8 for r in wca.values())
    html = ifsweep_cli("report", str(out), "--format", "html")
    assert html.returncode == 0 and "WordCount" in html.stdout


def test_a_config_naming_the_broken_plugin_fails_with_its_entry_point(plugin: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(sweep_toml(tmp_path / "run", "http://127.0.0.1:9/v1", ("brokenbench", plugin / "data")))
    done = ifsweep_cli("plan", str(cfg))
    assert done.returncode == 2
    assert "benchmarks[0].name" in done.stderr and "ifsweep_wordcount.missing:Nothing" in done.stderr
    assert "Traceback" not in done.stderr
