"""`pip install .` (not editable) into a fresh virtual environment puts one package at the top of
site-packages, `ifsweep`, and the README's Python example runs from a folder whose own runner/,
providers/, metrics/ and benchmarks/ would shadow ours if anything imported them by those names."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHADOWS = ("runner", "providers", "metrics", "benchmarks", "simulator", "api")

pytestmark = pytest.mark.slow


def run(*cmd: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, timeout=300, cwd=cwd, check=False
    )
    assert done.returncode == 0, f"{cmd}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done


def source_tree(dest: Path) -> Path:
    """What a build reads, copied out of the checkout (a build writes build/ and *.egg-info beside it):
    pyproject.toml, the README and every folder the package-dir mapping names."""
    meta = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    folders = set(meta["tool"]["setuptools"]["package-dir"].values())
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, dest / name)
    for folder in folders:
        shutil.copytree(REPO / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def readme_example() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    found = re.search(r"```python\n(.*?)```", text, flags=re.S)
    assert found is not None, "README.md has no Python example"
    return found.group(1)


def test_one_package_in_site_packages_and_the_readme_example_runs(tmp_path: Path) -> None:
    wheel_dir = tmp_path / "dist"
    # Offline: no build isolation (the test environment has setuptools), no index.
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "-w",
        wheel_dir,
        source_tree(tmp_path / "src"),
    )
    (wheel,) = wheel_dir.glob("ifsweep-*.whl")

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").stdout.strip())
    before = {p.name for p in site.iterdir()}
    run(python, "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check", wheel)
    added = {p.name for p in site.iterdir()} - before
    assert added == {"ifsweep", "ifsweep-0.1.0.dist-info"}

    # ifsweep's dependencies from this environment, appended after the fresh site-packages: a path in a
    # .pth file is only added, so this environment's editable ifsweep is not installed there.
    (site / "test_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n", encoding="utf-8")
    work = tmp_path / "work"
    for name in SHADOWS:
        (work / name).mkdir(parents=True)
        (work / name / "__init__.py").write_text(f"raise ImportError('the folder {name}/ was imported')\n")
    where = run(
        python, "-c", "import ifsweep.runner.commands.library as m; print(m.__file__)", cwd=work
    ).stdout
    assert Path(where.strip()).is_relative_to(site)

    done = run(python, "-c", readme_example(), cwd=work)
    assert "complete 24/24" in done.stdout
    assert "CFBench (2 models)" in done.stdout
    assert (work / "runs" / "notebook" / "summary.json").is_file()
