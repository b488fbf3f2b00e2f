"""What the simulator needs to answer InFoBench's judge conversation in the shape `_parse` reads: the
conversation is recognised by a phrase of SYS_MSG's first line, the judged text sits between the first
turn's `Generated Text:` and `Question:` (_prompts.FIRST_TURN_*), and each turn is answered YES or NO."""

from __future__ import annotations

from collections.abc import Sequence

from ifsweep.benchmarks._simulated import between, user_texts
from ifsweep.benchmarks.base import Decide
from ifsweep.benchmarks.records import Message

MARKER = "answer the ensuing Questions with either a YES or NO choice"
_TEXT_START = 'Generated Text:\n"'
_TEXT_END = '"\n\nQuestion:\n'


def simulated_judge_reply(messages: Sequence[Message], decide: Decide) -> str | None:
    users = user_texts(messages)
    if not users or not any(MARKER in m.content for m in messages):
        return None
    judged: str | None = None
    for m in messages:
        judged = between(m.content, _TEXT_START, _TEXT_END)
        if judged is not None:
            break
    judged = judged if judged is not None else users[0]
    question_index = len(users) - 1  # one question per user turn
    return "YES" if decide(judged, str(question_index)) else "NO"
