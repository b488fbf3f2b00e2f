"""`ifsweep gold template RUN_DIR --benchmark B --model M --instances N --seed S --out FILE.csv`: a
labelling sheet for a seeded uniform sample of one model's answers on one benchmark table, one row per
constraint with the instruction, the constraint's text, the answer and an empty `gold` column, so the
labels come back in the gold file format (`runner/commands/gold.py`; docs/metrics.md, "Gold files").

The sample is drawn from the instances the run's plan selects that have a current verdict and a stored
answer, by `random.Random(seed).sample` over their ids in natural order, so the same run, seed and size
give the same sheet. Prompts and constraint texts come from the data the run was made from (found as the
viewer finds it: `--data`, the built-in sample, the download cache, checked against the manifest's hash).
"""

from __future__ import annotations

import csv
import random
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ifsweep.runner.commands.gold import answer_sha256
from ifsweep.runner.commands.rundir import require_run_dir
from ifsweep.runner.errors import UsageError

if TYPE_CHECKING:
    from ifsweep.runner.view.sources import InstanceSource

__all__ = ["TEMPLATE_COLUMNS", "add_gold_parser", "write_template"]

TEMPLATE_COLUMNS = (
    "benchmark",
    "model",
    "instance_id",
    "instruction_idx",
    "constraint_idx",
    "constraint_type",
    "instruction",
    "constraint",
    "answer",
    "gold",
    "annotator",
    "response_sha256",
    "sample",
    "inclusion_prob",
)


def write_template(
    run_dir: Path,
    *,
    benchmark: str,
    model: str,
    instances: int,
    seed: int,
    out: Path,
    data_dirs: tuple[Path, ...] = (),
) -> int:
    """Write the sheet to `out`; the number of instances sampled (fewer than asked when the run has
    fewer, said on standard error)."""
    import polars as pl

    from ifsweep.runner.commands.audit import stored_answers
    from ifsweep.runner.store.current import read_run
    from ifsweep.runner.view.sources import InstanceSource
    from ifsweep.runner.watch.board import natural_key

    require_run_dir(run_dir)
    if instances < 1:
        raise UsageError(f"--instances: expected a whole number >= 1, got {instances}")
    reading = read_run(run_dir)
    assert reading.rows is not None
    ids = (
        reading.rows.filter((pl.col("benchmark") == benchmark) & (pl.col("model") == model))
        .select(pl.col("instance_id").cast(pl.String).unique())
        .collect()
        .get_column("instance_id")
        .to_list()
    )
    answers = stored_answers(run_dir)
    pool = sorted((i for i in ids if (benchmark, model, i) in answers), key=natural_key)
    if not pool:
        raise UsageError(f"{run_dir}: no judged answers of model {model!r} on {benchmark!r}")
    chosen = random.Random(seed).sample(pool, min(instances, len(pool)))
    if len(chosen) < instances:
        print(f"[ifsweep] only {len(pool)} instances to sample from: the sheet has them all", file=sys.stderr)
    source = InstanceSource(reading.manifest, data_dirs)
    rows = [
        row
        for iid in sorted(chosen, key=natural_key)
        for row in _sheet_rows(source, run_dir, benchmark, model, iid, answers[(benchmark, model, iid)] or "")
    ]
    for row in rows:
        row["inclusion_prob"] = len(chosen) / len(pool)
    with Path(out).open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(TEMPLATE_COLUMNS))
        writer.writeheader()
        writer.writerows(rows)
    return len(chosen)


def _sheet_rows(
    source: InstanceSource, run_dir: Path, benchmark: str, model: str, iid: str, answer: str
) -> list[dict[str, Any]]:
    """One instance's rows: every constraint, with the instruction and the answer."""
    inst, found = source.instance(benchmark, iid)
    if inst is None:
        raise UsageError(f"{run_dir}: instance {iid!r} of {benchmark!r}: {found.reason or 'not in the data'}")
    instruction = "\n\n".join(m.content for m in inst.messages if m.role != "assistant")
    return [
        {
            "benchmark": benchmark,
            "model": model,
            "instance_id": iid,
            "instruction_idx": "" if c.instruction_idx is None else c.instruction_idx,
            "constraint_idx": c.idx,
            "constraint_type": c.type or "",
            "instruction": instruction,
            "constraint": c.text,
            "answer": answer,
            "gold": "",
            "annotator": "",
            "response_sha256": answer_sha256(answer),
            "sample": "random",
        }
        for c in inst.constraints
    ]


def add_gold_parser(sub: Any) -> None:
    """Add `gold template` to the CLI's subparsers."""
    g = sub.add_parser("gold", help="gold labels: a labelling sheet for a sample of a run's answers")
    gsub = g.add_subparsers(metavar="ACTION")
    c = gsub.add_parser("template", help="a CSV labelling sheet for a seeded uniform sample of instances")
    c.add_argument("run_dir", type=Path)
    c.add_argument("--benchmark", required=True, help="the benchmark table (its report name)")
    c.add_argument("--model", required=True, help="the model's id")
    c.add_argument("--instances", type=int, default=100, help="how many instances (default 100)")
    c.add_argument("--seed", type=int, default=0, help="the sample's seed")
    c.add_argument("--out", type=Path, required=True, metavar="FILE.csv")
    c.add_argument("--data", type=Path, action="append", default=[], metavar="DIR", help="where the data is")
    c.set_defaults(handler=_cmd_template)


def _cmd_template(args: Any) -> int:
    n = write_template(
        args.run_dir,
        benchmark=args.benchmark,
        model=args.model,
        instances=args.instances,
        seed=args.seed,
        out=args.out,
        data_dirs=tuple(args.data),
    )
    print(f"{args.out}: {n} instances of {args.model} on {args.benchmark}; fill the gold column (true/false)")
    return 0
