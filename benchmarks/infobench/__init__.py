"""InFoBench (Qin et al., 2024): decomposed yes/no questions judged in one conversation; DRFR.

Data: Hugging Face dataset kqsong/InFoBench, file InfoBench.json. Notes: docs/benchmarks/infobench.md.
"""

from ifsweep.benchmarks.infobench._benchmark import SPLITS, InfoBench
from ifsweep.benchmarks.infobench._load import DATA_FILE
from ifsweep.benchmarks.infobench._parse import decide_paper, decide_reference
from ifsweep.benchmarks.infobench._prompts import SYS_MSG, first_turn, generation_messages, judge_task

__all__ = [
    "DATA_FILE",
    "SPLITS",
    "SYS_MSG",
    "InfoBench",
    "decide_paper",
    "decide_reference",
    "first_turn",
    "generation_messages",
    "judge_task",
]
