"""The texts EIFBench sends: ANSWER_prompt for generation, SCORE_prompt for each scoring question.

Both templates are `ANSWER_prompt` / `SCORE_prompt` of the reference's key.py, kept byte for byte in
answer_prompt.txt / score_prompt.txt. The glue around them follows 5_output.py (generation) and
6_evaluation.py (judging); docs/benchmarks/eifbench.md has the details.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ifsweep.benchmarks.records import Message

_HERE = Path(__file__).resolve().parent
ANSWER_PROMPT_PATH = _HERE / "answer_prompt.txt"
SCORE_PROMPT_PATH = _HERE / "score_prompt.txt"
# Read once at import: packaged, read-only data files.
ANSWER_PROMPT = ANSWER_PROMPT_PATH.read_text(encoding="utf-8")
SCORE_PROMPT = SCORE_PROMPT_PATH.read_text(encoding="utf-8")
SYSTEM = "You are a helpful assistant."
# The rule a re-ask quotes: SCORE_prompt's own output-format section, word for word.
FORMAT_RULE = SCORE_PROMPT[
    SCORE_PROMPT.index("## 输出格式") : SCORE_PROMPT.index("答案：是/否") + len("答案：是/否")
]

# The reference splits a task whose input text is longer than this into two generation calls.
SPLIT_THRESHOLD = 8192
INPUT_TEXT_FORMAT = "Instruction:\n{input}\n\n"
SUB_INSTRUCTION_FORMAT = "{key}:\n{instruction}\nconstraints:\n{constraints}"
JUDGE_SUB_INSTRUCTION_FORMAT = "{key}:{instruction}"
# Every text of a judge request the benchmark writes itself: where a judge's copies are looked for.
JUDGE_TEMPLATES = (SYSTEM, SCORE_PROMPT, JUDGE_SUB_INSTRUCTION_FORMAT)


def _fill(template: str, values: Mapping[str, str]) -> str:
    """One pass over the template, like str.format on a template whose only braces are its fields:
    a value holding "{question}" (a model may write anything) is never substituted again."""
    pattern = re.compile(r"\{(" + "|".join(map(re.escape, values)) + r")\}")
    return pattern.sub(lambda m: values[m.group(1)], template)


def format_sub_instruction(key: str, instruction: str, questions: Sequence[str]) -> str:
    return SUB_INSTRUCTION_FORMAT.format(key=key, instruction=instruction, constraints="\n".join(questions))


def input_text(task_input: str, sub_instructions: Sequence[tuple[str, str, Sequence[str]]]) -> str:
    """`Instruction:\\n{input}\\n\\n` then each (key, instruction, questions) block, joined by a blank line;
    the caller passes the sub-instructions in the reference's order (by the number in the key)."""
    blocks = [format_sub_instruction(k, ins, qs) for k, ins, qs in sub_instructions]
    return INPUT_TEXT_FORMAT.format(input=task_input) + "\n\n".join(blocks)


def generation_messages(text: str) -> tuple[Message, ...]:
    return (Message("system", SYSTEM), Message("user", _fill(ANSWER_PROMPT, {"input_text": text})))


def score_user(task_input: str, output: str, key: str, instruction: str, question: str) -> str:
    values = {
        "input": task_input,
        "output": output,
        "sub_instruction": JUDGE_SUB_INSTRUCTION_FORMAT.format(key=key, instruction=instruction),
        "question": question,
    }
    return _fill(SCORE_PROMPT, values)


def template_version() -> str:
    """Short sha256 over every text that shapes a prompt, so editing any of them changes it."""
    h = hashlib.sha256()
    parts = (
        ANSWER_PROMPT,
        SCORE_PROMPT,
        SYSTEM,
        INPUT_TEXT_FORMAT,
        SUB_INSTRUCTION_FORMAT,
        JUDGE_SUB_INSTRUCTION_FORMAT,
        FORMAT_RULE,
    )
    for part in parts:
        h.update(part.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:12]


def template_fields(template: str) -> tuple[str, ...]:
    """Every `{...}` in a template, in order: lets tests pin that no other brace is in the texts."""
    return tuple(re.findall(r"\{([^{}]*)\}", template))
