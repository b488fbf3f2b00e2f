"""FollowBench's judge prompt: the constraint-evolution path, the answer, and the verdict request.

The texts are reproduced byte for byte from the reference repository YJiangcm/FollowBench
(code/gpt4_based_evaluation.py for English, code_zh/gpt4_based_evaluation.py for Chinese: the
functions content_/situation_/style_/format_/mixed_evaluation_prompt). Those functions differ only
in the phrase naming the kind of constraint, so we hold each language's pieces once and the phrase
per category. A level-1 prompt uses singular wording; a level-L prompt lists every step of the path.
Pieces are joined by concatenation, never str.format over instruction or answer text (they hold braces).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import astuple, dataclass

from ifsweep.benchmarks.records import Message

JUDGED_CATEGORIES = ("content", "situation", "style", "format", "mixed")


@dataclass(frozen=True, slots=True)
class JudgeTemplate:
    """One language's pieces. `{kind}` is the category phrase, `{level}` / `{step}` are integers."""

    intro_one: str
    intro_many: str
    initial: str
    step_one: str
    step_many: str
    answer_one: str
    answer_many: str
    system_one: str
    system_many: str
    kinds: tuple[tuple[str, str], ...]  # (category, phrase) for each judged category

    def kind(self, category: str) -> str:
        for name, phrase in self.kinds:
            if name == category:
                return phrase
        raise ValueError(f"category {category!r} has no judge prompt")


ENGLISH = JudgeTemplate(
    intro_one=(
        "Given an initial instruction, we add one {kind} and obtain the final instruction with "
        "1 additional constraint.\n\n"
    ),
    intro_many=(
        "Given an initial instruction, we add one {kind} per time and obtain the final instruction with "
        "{level} additional constraints.\n\n"
    ),
    initial="#Initial Instruction#\n",
    step_one="#Initial Instruction + 1 constraint#\n",
    step_many="#Initial Instruction + {step} constraints#\n",
    answer_one="#Answer of Initial Instruction + 1 constraint#\n",
    answer_many="#Answer of Initial Instruction + {level} constraints#\n",
    system_one=(
        "#System#\n1) Please identify the 1 added constraint.\n"
        "2) Please descriminate if the #Answer of Initial Instruction + 1 constraint# satisfies the 1 added "
        "constraint.\n"
        "3) In the final line, only output a Python LIST with 1 element ('YES' or 'NO') indicating whether "
        "the answer satisfies the 1 added constraint."
    ),
    system_many=(
        "#System#\n1) Please identify all {level} added constraints.\n"
        "2) For the {level} added constraints, discriminate if the #Answer of Initial Instruction + {level} "
        "constraints# satisfies each constraint.\n"
        "3) In the final line, only output a Python LIST with {level} elements ('YES' or 'NO') indicating "
        "whether the answer satisfies each constraint."
    ),
    kinds=(
        ("content", "content constraint"),
        ("situation", "situation constraint (information to describe a specific situation/background)"),
        ("style", "style constraint"),
        ("format", "format constraint"),
        ("mixed", "constraint"),
    ),
)

CHINESE = JudgeTemplate(
    intro_one="给定一个初始指令，我们添加一个{kind}，获得了有1个附加约束的最终指令。\n\n",
    intro_many="给定一个初始指令，我们每次添加一个{kind}，获得了有{level}个附加约束的最终指令。\n\n",
    initial="#初始指令#\n",
    step_one="#初始指令 + 1个约束#\n",
    step_many="#初始指令 + {step}个约束#\n",
    answer_one="#初始指令 + 1个约束的答案#\n",
    answer_many="#初始指令 + {level}个约束的答案#\n",
    system_one=(
        "#系统#\n1) 请识别出添加的1个约束。\n"
        "2) 请判断#初始指令 + 1个约束的答案#是否满足了添加的1个约束。\n"
        "3) 在最后一行，只输出一个包含1个元素（“YES”或“NO”）的Python列表，表明答案是否满足添加的一个约束。"
    ),
    system_many=(
        "#系统#\n1) 请识别出添加的{level}个约束。\n"
        "2) 对于添加的{level}个约束, 请判断#初始指令 + {level}个约束的答案#是否满足了每个约束。\n"
        "3) 在最后一行，只输出一个包含{level}个元素（“YES”或“NO”）的Python列表，"
        "表明答案是否满足添加的每一个约束。"
    ),
    kinds=(
        ("content", "内容约束"),
        ("situation", "情景约束（描述特定情况/背景的信息）"),
        ("style", "风格约束"),
        ("format", "格式约束"),
        ("mixed", "约束"),
    ),
)

TEMPLATES = {"en": ENGLISH, "zh": CHINESE}


def judge_prompt(category: str, evolution_path: Sequence[str], answer: str, language: str) -> str:
    """The single user message sent to the judge for a level-L answer (L = len(path) - 1)."""
    template = TEMPLATES[language]
    level = len(evolution_path) - 1
    if level < 1:
        raise ValueError("the evolution path needs the level-0 instruction and at least one level")
    kind = template.kind(category)
    parts: list[str]
    if level == 1:
        parts = [template.intro_one.format(kind=kind)]
    else:
        parts = [template.intro_many.format(kind=kind, level=level)]
    parts += [template.initial, evolution_path[0], "\n\n", template.step_one, evolution_path[1], "\n\n"]
    for step in range(2, level + 1):
        parts += [template.step_many.format(step=step), evolution_path[step], "\n\n"]
    if level == 1:
        parts += [template.answer_one, answer, "\n\n", template.system_one]
    else:
        parts += [
            template.answer_many.format(level=level),
            answer,
            "\n\n",
            template.system_many.format(level=level),
        ]
    return "".join(parts)


@functools.cache
def judge_templates(language: str) -> tuple[str, ...]:
    """Every piece of one language's judge prompt the benchmark writes itself (the category phrases
    included): where a judge's copies are looked for."""
    template = TEMPLATES[language]
    pieces = [piece for piece in astuple(template) if isinstance(piece, str)]
    return (*pieces, *(phrase for _, phrase in template.kinds))


def format_rule(level: int, language: str) -> str:
    """The template's own last line, the rule a re-ask quotes: "3) In the final line, only output a
    Python LIST with L elements ('YES' or 'NO')..." for level L."""
    template = TEMPLATES[language]
    system = template.system_one if level == 1 else template.system_many.format(level=level)
    return system.splitlines()[-1]


def generation_messages(instruction: str) -> tuple[Message, ...]:
    """FollowBench generates from the instruction alone, as one user message (no system prompt)."""
    return (Message("user", instruction),)


def template_version() -> str:
    """Short sha256 over every judge-prompt piece of both languages (the rules' and the parser's version
    is their code's: benchmarks/versions.py)."""
    digest = hashlib.sha256()
    for language in sorted(TEMPLATES):
        for piece in astuple(TEMPLATES[language]):
            digest.update(repr(piece).encode("utf-8"))
            digest.update(b"\x00")
    return digest.hexdigest()[:12]
