"""FollowBench (Jiang et al., ACL 2024): multi-level constraints, judged along the evolution path.

Data: YJiangcm/FollowBench data/ (English) and data_zh/ (Chinese). Notes: docs/benchmarks/followbench.md.
"""

from ifsweep.benchmarks.followbench._benchmark import FollowBench
from ifsweep.benchmarks.followbench._load import CATEGORIES, LANGUAGES
from ifsweep.benchmarks.followbench._parse import decide_paper, decide_reference
from ifsweep.benchmarks.followbench._prompts import CHINESE, ENGLISH, JudgeTemplate, judge_prompt
from ifsweep.benchmarks.followbench._rules import matches_template
from ifsweep.benchmarks.followbench._scoring import RULE_SOURCES, Route, route, rule_verdict

__all__ = [
    "CATEGORIES",
    "CHINESE",
    "ENGLISH",
    "LANGUAGES",
    "RULE_SOURCES",
    "FollowBench",
    "JudgeTemplate",
    "Route",
    "decide_paper",
    "decide_reference",
    "judge_prompt",
    "matches_template",
    "route",
    "rule_verdict",
]
