"""A constraint is known by (instruction_idx, constraint_idx) within its instance (issue 31.5).

EIFBench numbers the constraints of a task from 0 in each sub-instruction; before, the duplicate check
keyed on constraint_idx alone and refused such rows ("N instances have two verdicts"), and judge
agreement and the panel's majority merged two sub-instructions' constraints into one unit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from ifsweep import metrics
from ifsweep.metrics import VerdictError
from ifsweep.metrics.panel import majority_rows
from ifsweep.runner.commands.cli import main

# Per task, per sub-instruction, whether each of its constraints is met (numbered from 0 in each).
TASKS: dict[str, list[list[bool]]] = {
    "1": [[True, True], [True, False, True], [True]],
    "2": [[True], [True, True]],
    "3": [[False, True, True], [True, True]],
    "4": [[True, True, True, True]],
}


def eif_rows(judge: str = "j", flip: frozenset[tuple[str, int, int]] = frozenset()) -> list[dict[str, Any]]:
    """EIFBench verdict rows numbered as EIFBench numbers them; `flip` inverts those (task, part, c)."""
    rows = []
    for task, parts in TASKS.items():
        for part, met in enumerate(parts):
            for c, ok in enumerate(met):
                rows.append(
                    {"run": "r", "benchmark": "eifbench", "model": "m", "judge": judge, "scoring": "paper"}
                    | {"instance_id": task, "split": "single", "instruction_idx": part, "constraint_idx": c}
                    | {"constraint_type": "format", "priority": None}
                    | {"satisfied": ok != ((task, part, c) in flip), "source": "judge", "status": "ok"}
                )
    return rows


def expected() -> dict[str, float]:
    """GAcc, ILAcc, CLAcc computed here from TASKS: means over tasks."""
    gacc = [all(all(p) for p in parts) for parts in TASKS.values()]
    ilacc = [sum(all(p) for p in parts) / len(parts) for parts in TASKS.values()]
    clacc = [sum(sum(p) for p in parts) / sum(len(p) for p in parts) for parts in TASKS.values()]
    return {name: sum(v) / len(v) for name, v in (("GAcc", gacc), ("ILAcc", ilacc), ("CLAcc", clacc))}


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_metrics_score_eifbench_numbered_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "rows.jsonl", eif_rows())
    capsys.readouterr()
    assert main(["metrics", str(path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    got = {r["metric"]: r["value"] for r in out if r["slice"] == "all"}
    assert got.pop("coverage") == 1.0
    assert got == pytest.approx(expected())


def test_a_constraint_verdicted_twice_in_one_sub_instruction_is_still_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = eif_rows()
    twice = next(
        r for r in rows if (r["instance_id"], r["instruction_idx"], r["constraint_idx"]) == ("3", 1, 1)
    )
    path = write(tmp_path / "rows.jsonl", [*rows, dict(twice)])
    capsys.readouterr()
    assert main(["metrics", str(path)]) == 2
    assert "1 instances have two verdicts" in capsys.readouterr().err


def test_two_judges_agreement_counts_every_sub_instructions_constraint() -> None:
    """Judge k disagrees with j on one constraint of the second sub-instruction of task 1: 19 units, one
    disagreement (before: the units of a task's sub-instructions merged by index)."""
    rows = pl.DataFrame(eif_rows("j") + eif_rows("k", frozenset({("1", 1, 1)})))
    stats = metrics.agreement_stats(rows, ["j", "k"])
    units = sum(len(p) for parts in TASKS.values() for p in parts)
    pair = ("raw", "all", ("j", "k"))
    overall = next(s for s in stats if (s.statistic, s.constraint_type, s.judges) == pair)
    assert overall.units == units
    assert overall.value == pytest.approx((units - 1) / units)


def test_the_majority_keeps_each_sub_instructions_constraints() -> None:
    rows = pl.DataFrame(eif_rows("j") + eif_rows("k") + eif_rows("l", frozenset({("1", 1, 1)})))
    voted = majority_rows(rows, ["j", "k", "l"]).collect()
    assert voted.height == sum(len(p) for parts in TASKS.values() for p in parts)
    assert voted.filter(pl.col("satisfied")).height == sum(sum(p) for parts in TASKS.values() for p in parts)


def verdicts(*rows: tuple[str, int, int]) -> pl.DataFrame:
    """Rows of one instance: (judge, instruction_idx, constraint_idx) each."""
    return pl.DataFrame(
        [
            {"benchmark": "b", "model": "m", "instance_id": "1", "scoring": "paper", "judge": j}
            | {"instruction_idx": part, "constraint_idx": c, "satisfied": True}
            for j, part, c in rows
        ]
    )


@pytest.mark.parametrize("within", [[], ["instruction_idx"]])
def test_the_per_instance_pass_tells_constraints_apart_by_their_sub_instruction(within: list[str]) -> None:
    aggs = [pl.col("satisfied").all()]
    distinct = verdicts(("j", 0, 0), ("j", 1, 0), ("j", 1, 1), ("j", 9, 0), ("j", 0, 8), ("j", 1, 70))
    assert metrics.per_instance(distinct, "b", aggs, within=within).collect().height == (1 + 2 * bool(within))
    with pytest.raises(VerdictError, match="1 instances have two verdicts"):
        metrics.per_instance(verdicts(("j", 0, 0), ("j", 1, 0), ("j", 1, 0)), "b", aggs, within=within)
