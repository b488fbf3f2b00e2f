"""What the simulator needs to answer EIFBench's scoring prompt in the shape `_parse` reads: the prompt
is recognised by labels of score_prompt.txt, the judged text sits between its `模型回复` and `子任务`
labels, and the reply is a line of analysis then `答案：是` or `答案：否`."""

from __future__ import annotations

from collections.abc import Sequence

from ifsweep.benchmarks._simulated import between, user_texts
from ifsweep.benchmarks.base import Decide
from ifsweep.benchmarks.records import Message

_MARKERS = ("**子任务**", "**约束**", "答案：是/否")
_RESPONSE = "- **模型回复**：\n"
_SUBTASK = "\n- **子任务**：\n"
_CONSTRAINT = "- **约束**:"


def simulated_judge_reply(messages: Sequence[Message], decide: Decide) -> str | None:
    users = user_texts(messages)
    if not users or not all(marker in users[-1] for marker in _MARKERS):
        return None
    prompt = users[-1]
    judged = between(prompt, _RESPONSE, _SUBTASK)
    judged = judged if judged is not None else prompt
    at = prompt.rfind(_CONSTRAINT)
    subtask_at = prompt.rfind(_SUBTASK)
    # Each scoring question is its own call: the sub-task and question text are the decision key.
    key = prompt[subtask_at:] if subtask_at >= 0 else prompt[at:]
    if decide(judged, key):
        return "分析：模型回复完成了子任务，并满足该约束。\n答案：是"
    return "分析：模型回复没有完全满足该约束。\n答案：否"
