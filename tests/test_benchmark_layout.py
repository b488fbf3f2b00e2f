"""The built-in benchmarks share one module layout and one base class (issue 24): a newcomer who has
read one package knows where everything of the others is, and what the base class holds is written once.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from ifsweep import benchmarks
from ifsweep.benchmarks import BenchmarkBase
from ifsweep.benchmarks.registry import BUILTIN

# The layout docs/CONTRIBUTING.md describes; a benchmark may add modules of its own beside these.
LAYOUT = {
    "__init__.py",
    "_benchmark.py",
    "_load.py",
    "_prompts.py",
    "_parse.py",
    "_metrics.py",
    "_simulated.py",
}


@pytest.mark.parametrize("name", list(BUILTIN))
def test_each_builtin_benchmark_has_the_layout_and_subclasses_the_base(name: str) -> None:
    bench = benchmarks.get(name)
    assert isinstance(bench, BenchmarkBase)
    package = Path(inspect.getfile(type(bench))).parent
    assert inspect.getfile(type(bench)) == str(package / "_benchmark.py")
    modules = {p.name for p in package.glob("*.py")}
    assert modules >= LAYOUT, sorted(LAYOUT - modules)
    assert all(m.startswith("_") for m in modules), sorted(m for m in modules if not m.startswith("_"))
    assert bench.fixture_dir() == package / "fixtures" and bench.fixture_dir().is_dir()


@pytest.mark.parametrize("name", list(BUILTIN))
def test_no_builtin_benchmark_repeats_what_the_base_class_holds(name: str) -> None:
    cls = type(benchmarks.get(name))
    tree = ast.parse(Path(inspect.getfile(cls)).read_text(encoding="utf-8"))
    defined = {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__
        for node in node.body
        if isinstance(node, ast.FunctionDef)
    }
    # The hooks a benchmark fills in: its options' values, and a report name that carries a language.
    hooks = {"check_options", "report_name"}
    shared = {n for n, v in vars(BenchmarkBase).items() if callable(v) and not n.startswith("_")} - hooks
    assert not defined & shared, sorted(defined & shared)
    # What is left is what only the benchmark knows.
    assert defined <= {"release", "load", "plan", "parse", *hooks}, sorted(defined)
