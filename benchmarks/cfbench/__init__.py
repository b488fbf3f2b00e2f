"""CFBench: data loading, the judge prompt, both reply parsers, reference-mode scores and the reader of
the reference tool's output files. See docs/benchmarks/cfbench.md."""

from ifsweep.benchmarks.cfbench._benchmark import CFBench
from ifsweep.benchmarks.cfbench._import import read_reference_outputs
from ifsweep.benchmarks.cfbench._load import instance_from_record, load_instances
from ifsweep.benchmarks.cfbench._parse import ReferenceParse, paper_values, reference_parse, reference_values
from ifsweep.benchmarks.cfbench._prompts import judge_template, render_judge_prompt
from ifsweep.benchmarks.cfbench._reference import (
    SCORE_COLUMNS,
    reference_file_scores,
    reference_item_metric,
    reference_metric_of,
)

__all__ = [
    "SCORE_COLUMNS",
    "CFBench",
    "ReferenceParse",
    "instance_from_record",
    "judge_template",
    "load_instances",
    "paper_values",
    "read_reference_outputs",
    "reference_file_scores",
    "reference_item_metric",
    "reference_metric_of",
    "reference_parse",
    "reference_values",
    "render_judge_prompt",
]
