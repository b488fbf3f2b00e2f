"""What the simulator needs to answer CFBench's judge prompt in the shape `parse` reads: the prompt is
recognised by the labels around judge_prompt.txt's {response} and {criteria}, and the reply scores
each criterion as `criterion<TAB>0|1`, joined by blank lines as the template joins them."""

from __future__ import annotations

from collections.abc import Sequence

from ifsweep.benchmarks._simulated import user_texts
from ifsweep.benchmarks.base import Decide
from ifsweep.benchmarks.records import Message

_RESPONSE = "\n\n[模型答案]: "
_CRITERIA = "[评估标准]: "
_END = "\n\n[你的评估]: "


def simulated_judge_reply(messages: Sequence[Message], decide: Decide) -> str | None:
    users = user_texts(messages)
    if not users:
        return None
    prompt = users[-1]
    if not (_CRITERIA in prompt and _END in prompt and _RESPONSE in prompt):
        return None
    crit_at = prompt.rfind(_CRITERIA)
    end = prompt.rfind(_END)
    criteria = prompt[crit_at + len(_CRITERIA) : end] if end > crit_at else prompt[crit_at + len(_CRITERIA) :]
    # The template's own examples are indented, so the first unindented label is the real answer's.
    resp_at = prompt.find(_RESPONSE)
    head = prompt[: prompt.rfind("\n\n" + _CRITERIA)]
    judged = head[resp_at + len(_RESPONSE) :] if 0 <= resp_at < len(head) else prompt
    items = criteria.split("\n\n")
    return "\n\n".join(f"{item}\t{1 if decide(judged, str(i)) else 0}" for i, item in enumerate(items))
