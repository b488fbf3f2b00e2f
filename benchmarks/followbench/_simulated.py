"""What the simulator needs to answer FollowBench's judge prompt in the shape `_parse` reads: the prompt
is recognised by its #System# block and its count of list elements (the template's own wording in
_prompts.py, both languages), and the reply ends in a Python list with one 'YES' or 'NO' per constraint."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ifsweep.benchmarks._simulated import user_texts
from ifsweep.benchmarks.base import Decide
from ifsweep.benchmarks.records import Message

_COUNT_RE = re.compile(r"Python LIST with (\d+) elements?|包含(\d+)个元素")
_ANSWER_RE = re.compile(r"#(?:Answer of Initial Instruction[^#\n]*|初始指令 \+ \d+个约束的答案)#\n")
_SYSTEM_RE = re.compile(r"\n\n#(?:System|系统)#")


def simulated_judge_reply(messages: Sequence[Message], decide: Decide) -> str | None:
    users = user_texts(messages)
    if not users:
        return None
    prompt = users[-1]
    if "#System#" not in prompt and "#系统#" not in prompt:
        return None
    match = _COUNT_RE.search(prompt)
    if match is None:
        return None
    n = int(match.group(1) or match.group(2))
    judged = prompt
    header = _ANSWER_RE.search(prompt)
    ends = list(_SYSTEM_RE.finditer(prompt))
    if header is not None and ends and ends[-1].start() >= header.end():
        judged = prompt[header.end() : ends[-1].start()]
    verdicts = ["YES" if decide(judged, str(i)) else "NO" for i in range(n)]
    met = verdicts.count("YES")
    return (
        f"1) The answer was read against the {n} added constraint{'s' if n != 1 else ''}.\n"
        f"2) It satisfies {met} of them.\n"
        f"{verdicts!r}"
    )
