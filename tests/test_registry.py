"""The benchmark registry is the one place that knows the benchmarks: every registered benchmark carries
its metric definitions and its simulated judge's reply shape, and no module outside benchmarks/ names a
benchmark."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import pytest

from ifsweep import benchmarks
from ifsweep.benchmarks import Benchmark, Instance, JudgeTask
from ifsweep.benchmarks.registry import BUILTIN
from ifsweep.runner.commands.rundir import metric_catalog
from ifsweep.simulator.judges import Judges
from ifsweep.simulator.text import filler_answer

REPO = Path(__file__).resolve().parents[1]
# The rooms that must take every benchmark from the registry (benchmarks/ itself defines them).
GENERIC_ROOMS = ("api", "runner", "metrics", "providers", "simulator")


def test_built_in_benchmarks_load_in_report_order() -> None:
    loaded = benchmarks.load_all()
    assert loaded.errors == ()
    assert [b.name for b in loaded.benchmarks][: len(BUILTIN)] == list(BUILTIN)
    assert benchmarks.names()[: len(BUILTIN)] == tuple(BUILTIN)
    for bench in loaded.benchmarks:
        assert isinstance(bench, Benchmark)
    with pytest.raises(KeyError, match="unknown benchmark 'nope'; known: followbench"):
        benchmarks.get("nope")


def test_every_benchmark_defines_its_metrics() -> None:
    catalog, errors = metric_catalog()
    assert errors == ()
    for bench in benchmarks.load_all().benchmarks:
        own = bench.metrics()
        assert own and all(m.name.startswith(bench.name) for m in own)
        assert own[0].display == bench.display_name
        for m in own:
            got = catalog.get(m.name)
            assert got is not None and (got.display, got.headline) == (m.display, m.headline)
            assert m.primary in m.headline
    # Both FollowBench languages report as benchmarks of their own.
    assert catalog.names()[:2] == ("followbench", "followbench-zh")


def _string_constants(tree: ast.AST) -> Iterator[tuple[int, str]]:
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            docstrings.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


def test_no_module_outside_benchmarks_names_a_benchmark() -> None:
    names = benchmarks.names()
    found = []
    for room in GENERIC_ROOMS:
        for path in sorted((REPO / room).rglob("*.py")):
            for line, text in _string_constants(ast.parse(path.read_text(encoding="utf-8"))):
                if any(n in text.lower() for n in names):
                    found.append(f"{path.relative_to(REPO)}:{line}: {text[:60]!r}")
    assert found == []


def _judge_turns(
    bench: Benchmark, options: dict[str, Any]
) -> Iterator[tuple[Instance, JudgeTask, int, tuple[str, ...]]]:
    """Every judge turn of the first fixture instances' plans, with the replies before it."""
    for inst in islice(bench.load(bench.fixture_dir(), options), 40):
        answer = filler_answer("sim-model", [m.as_dict() for m in inst.messages], seed=3)
        for task in bench.plan(inst, answer, "paper").judge_tasks:
            earlier: tuple[str, ...] = ()
            for turn in range(len(task.turns)):
                yield inst, task, turn, earlier
                earlier = (*earlier, "YES")


# Every built-in benchmark with its default options, and FollowBench's other language.
CASES = [*((name, {}) for name in BUILTIN), ("followbench", {"language": "zh"})]


@pytest.mark.parametrize(("name", "options"), CASES)
def test_the_simulated_judge_answers_in_the_shape_the_benchmark_parses(
    name: str, options: dict[str, Any]
) -> None:
    bench = benchmarks.get(name)
    judges = Judges.registered()
    others = [b for b in benchmarks.load_all().benchmarks if b.name != name]
    turns = 0
    for inst, task, turn, earlier in _judge_turns(bench, options):
        messages = task.messages_for_turn(turn, earlier)
        reply = judges.reply([m.as_dict() for m in messages], seed=5)
        assert reply is not None, (inst.instance_id, messages[-1].content[:200])
        outcome = bench.parse(inst, task, turn, reply, "paper")
        assert outcome.values is not None and len(outcome.values) == len(task.turns[turn].constraint_idxs)
        assert all(v is not None for v in outcome.values), reply
        # Only the benchmark that sent the request knows it: the registry's order cannot matter.
        assert all(o.simulated_judge_reply(messages, lambda judged, key: True) is None for o in others)
        turns += 1
    if turns == 0:
        pytest.skip(f"{name} sends no judge requests for its sample (a rule-only benchmark)")


def test_generation_prompts_get_filler_answers() -> None:
    judges = Judges.registered()
    for bench in benchmarks.load_all().benchmarks:
        for inst in islice(bench.load(bench.fixture_dir(), {}), 10):
            assert judges.reply([m.as_dict() for m in inst.messages], seed=0) is None, inst.instance_id


def test_the_registry_and_the_simulator_load_no_polars() -> None:
    """Benchmarks define their metrics in modules loaded only when metrics are computed."""
    code = (
        "import sys\nfrom ifsweep import benchmarks\nfrom ifsweep.simulator.judges import Judges\n"
        "Judges.registered()\n"
        "print(sorted(m for m in ('polars', 'ifsweep.metrics', 'litellm') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_rows_of_a_benchmark_nobody_registered_are_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ifsweep.runner.commands.cli import main

    rows = tmp_path / "rows.jsonl"
    row = {"benchmark": "nope", "model": "m", "instance_id": "i", "constraint_idx": 0, "source": "rule"}
    rows.write_text(json.dumps({**row, "status": "ok", "satisfied": True}) + "\n", encoding="utf-8")
    assert main(["metrics", str(rows)]) == 2
    err = capsys.readouterr().err
    assert "field 'benchmark': 'nope' is not one of" in err and "followbench-zh" in err
