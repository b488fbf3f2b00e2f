"""The texts InFoBench sends: the generation prompt and the judge's multi-turn conversation.

Scores depend on these byte for byte (docs/benchmarks/infobench.md says where each comes from):
- generation: the reference's generation.py sends one user message "{instruction}\\n\\n{input}\\n",
  even when the input is empty;
- judge: evaluation.py puts SYS_MSG inside the first user turn (there is no system message); the
  first turn also carries the input (left out when empty), the generated text and the first question;
  each later question is a user turn of its own, after the judge's earlier replies.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from ifsweep.benchmarks.records import JudgeTask, JudgeTurn, Message

SYS_MSG_PATH = Path(__file__).resolve().parent / "sys_msg.txt"
# Read once at import: a packaged, read-only data file, not environment state.
SYS_MSG = SYS_MSG_PATH.read_text(encoding="utf-8")

GENERATION_FORMAT = "{instruction}\n\n{input}\n"
FIRST_TURN_WITH_INPUT = (
    '{sys_msg}\n\nInput:\n"{input}"\n\nGenerated Text:\n"{output}"\n\nQuestion:\n{question}\n'
)
FIRST_TURN_NO_INPUT = '{sys_msg}\n\nGenerated Text:\n"{output}"\n\nQuestion:\n{question}\n'
LATER_TURN = "{question}\n"
# The rule a re-ask quotes: SYS_MSG's own words for the answer it wants.
FORMAT_RULE = "Answer the question with either a YES or NO choice."
# Every text of the judge conversation the benchmark writes itself: where a judge's copies are looked for.
JUDGE_TEMPLATES = (SYS_MSG, FIRST_TURN_WITH_INPUT, FIRST_TURN_NO_INPUT, LATER_TURN)


# str.format parses only these templates, never the values put into them, so braces in an instruction
# or a model's output pass through unchanged.
def generation_messages(instruction: str, input_text: str) -> tuple[Message, ...]:
    return (Message("user", GENERATION_FORMAT.format(instruction=instruction, input=input_text)),)


def first_turn(input_text: str, output: str, question: str) -> str:
    # The reference tests the input's truthiness, so only the empty string drops the Input block.
    if input_text:
        return FIRST_TURN_WITH_INPUT.format(
            sys_msg=SYS_MSG, input=input_text, output=output, question=question
        )
    return FIRST_TURN_NO_INPUT.format(sys_msg=SYS_MSG, output=output, question=question)


def judge_task(input_text: str, output: str, questions: Sequence[str]) -> JudgeTask:
    """One conversation for the whole instance: turn i asks question i and decides constraint i."""
    if not questions:
        raise ValueError("an InFoBench instance needs at least one question")
    turns = [JudgeTurn(first_turn(input_text, output, questions[0]), (0,), FORMAT_RULE)]
    turns.extend(
        JudgeTurn(LATER_TURN.format(question=q), (i,), FORMAT_RULE)
        for i, q in enumerate(questions[1:], start=1)
    )
    return JudgeTask(task_idx=0, turns=tuple(turns), system=None)


def template_version() -> str:
    """Short sha256 over every text that shapes a prompt, so editing any of them changes it."""
    h = hashlib.sha256()
    parts = (SYS_MSG, GENERATION_FORMAT, FIRST_TURN_WITH_INPUT, FIRST_TURN_NO_INPUT, LATER_TURN)
    for part in (*parts, FORMAT_RULE):
        h.update(part.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:12]
