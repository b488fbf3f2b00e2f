"""EIFBench (Zou et al., 2025): multi-task, multi-constraint Chinese instructions; GAcc, ILAcc, CLAcc.

Data: Hope-Rita/EIFBench data/sorted_<scenario><n>.json. Notes: docs/benchmarks/eifbench.md.
"""

from ifsweep.benchmarks.eifbench._benchmark import EIFBench
from ifsweep.benchmarks.eifbench._load import SCENARIOS, instance_id
from ifsweep.benchmarks.eifbench._parse import decide_paper, decide_reference
from ifsweep.benchmarks.eifbench._prompts import (
    ANSWER_PROMPT,
    SCORE_PROMPT,
    SPLIT_THRESHOLD,
    SYSTEM,
    generation_messages,
    input_text,
    score_user,
)

__all__ = [
    "ANSWER_PROMPT",
    "SCENARIOS",
    "SCORE_PROMPT",
    "SPLIT_THRESHOLD",
    "SYSTEM",
    "EIFBench",
    "decide_paper",
    "decide_reference",
    "generation_messages",
    "input_text",
    "instance_id",
    "score_user",
]
