"""CFBench's judge prompt: the `gpt_judge_for_cfbench` template of the reference code, shipped verbatim.

judge_prompt.txt is a byte-exact copy of the template in code/evalaute.py of
PKU-Baichuan-MLSystemLab/CFBench @ 0bcbf9b (see docs/benchmarks/cfbench.md); scores depend on its text.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from importlib import resources

from ifsweep.benchmarks.records import Instance

__all__ = ["criteria_block", "format_rule", "judge_template", "render_judge_prompt", "template_version"]

_PLACEHOLDER = re.compile(r"\{(prompt|gold_ans|response|criteria)\}")


@cache
def judge_template() -> str:
    return (
        resources.files("ifsweep.benchmarks.cfbench")
        .joinpath("judge_prompt.txt")
        .read_bytes()
        .decode("utf-8")
    )


@cache
def format_rule() -> str:
    """The rule a re-ask quotes: the template's own output-format section, word for word."""
    text = judge_template()
    return text[text.index("输出格式:") : text.index("\n\n可参考")].rstrip()


def template_version() -> str:
    """Short sha256 of the template (the parser's version is its code's: benchmarks/versions.py)."""
    return hashlib.sha256(judge_template().encode("utf-8")).hexdigest()[:12]


def criteria_block(instance: Instance) -> str:
    return "\n\n".join(constraint.text for constraint in instance.constraints)


def render_judge_prompt(instance: Instance, response: str) -> str:
    """The judge's one user message. Substitution is a single pass, as the reference's f-string is, so
    braces inside a prompt or a response (103 prompts have some) are never taken for placeholders."""
    values = {
        "prompt": instance.messages[-1].content,
        "gold_ans": str(instance.meta.get("gold", "")),
        "response": response,
        "criteria": criteria_block(instance),
    }
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], judge_template())
